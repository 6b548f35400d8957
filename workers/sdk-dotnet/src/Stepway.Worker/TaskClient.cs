using System;
using System.Collections.Generic;
using System.Globalization;
using System.Net;
using System.Net.Http;
using System.Net.Http.Headers;
using System.Text;
using System.Threading;
using Newtonsoft.Json.Linq;

namespace Stepway.Worker
{
    /// <summary>A call to the Task API failed.</summary>
    public class TaskApiException : Exception
    {
        public TaskApiException(string message, int? status = null, Exception inner = null) : base(message, inner)
        {
            Status = status;
        }

        /// <summary>The HTTP status, or null when there was no answer.</summary>
        public int? Status { get; }
    }

    /// <summary>Connection error, timeout, 5xx, 408, 425 or 429: try again later.</summary>
    public sealed class TransientException : TaskApiException
    {
        public TransientException(string message, int? status = null, Exception inner = null) : base(message, status, inner) { }
    }

    /// <summary>409: the attempt is stale (another worker holds it, it timed out, it already
    /// has a different result). Never retried.</summary>
    public sealed class ConflictException : TaskApiException
    {
        public ConflictException(string message, int status) : base(message, status) { }
    }

    /// <summary>Any other 4xx: the request is wrong for good. Never retried.</summary>
    public sealed class RejectedException : TaskApiException
    {
        public RejectedException(string message, int? status = null) : base(message, status) { }
    }

    /// <summary>A 2xx answer whose body is not what was asked for (the request itself succeeded).</summary>
    public sealed class UnreadableTaskException : TaskApiException
    {
        public UnreadableTaskException(string message) : base(message, 200) { }
    }

    /// <summary>HTTP calls to the Conductor-compatible Task API. One per worker process; thread safe.</summary>
    public sealed class TaskClient : IDisposable
    {
        private readonly HttpClient http;
        private readonly ITokenProvider tokens;

        public TaskClient(string serverUrl, ITokenProvider tokens = null, TimeSpan? timeout = null, HttpMessageHandler handler = null)
        {
            ServerUrl = serverUrl.TrimEnd('/');
            this.tokens = tokens ?? new NoToken();
            Timeout = timeout ?? TimeSpan.FromSeconds(30);
            if (handler == null)
            {
                var own = new HttpClientHandler { AllowAutoRedirect = false };
                // the Task API's long polls hold connections open: .NET Framework and Mono
                // allow only 2 per server by default
                try { own.MaxConnectionsPerServer = 64; }
                catch (PlatformNotSupportedException) { }
                catch (NotImplementedException) { }
                handler = own;
            }
            http = new HttpClient(handler) { Timeout = System.Threading.Timeout.InfiniteTimeSpan };
            http.DefaultRequestHeaders.UserAgent.ParseAdd("stepway-worker-dotnet/0.1");
        }

        public string ServerUrl { get; }
        public TimeSpan Timeout { get; }

        public void Dispose() => http.Dispose();

        // --- plumbing -------------------------------------------------------------------

        private HttpResponseMessage Send(Func<HttpRequestMessage> build, TimeSpan timeout, string what)
        {
            for (var attempt = 1; ; attempt++)
            {
                var request = build();
                var token = tokens.GetToken();
                if (!string.IsNullOrEmpty(token))
                    request.Headers.Authorization = new AuthenticationHeaderValue("Bearer", token);
                HttpResponseMessage response;
                using (var cts = new CancellationTokenSource(timeout))
                {
                    try
                    {
                        response = http.SendAsync(request, HttpCompletionOption.ResponseContentRead, cts.Token).GetAwaiter().GetResult();
                    }
                    catch (OperationCanceledException exc)
                    {
                        throw new TransientException(what + ": timed out after " + timeout.TotalSeconds.ToString(CultureInfo.InvariantCulture) + " s", null, exc);
                    }
                    catch (HttpRequestException exc)
                    {
                        throw new TransientException(what + ": " + Describe(exc), null, exc);
                    }
                    catch (WebException exc)
                    {
                        throw new TransientException(what + ": " + Describe(exc), null, exc);
                    }
                    catch (System.IO.IOException exc)
                    {
                        throw new TransientException(what + ": " + Describe(exc), null, exc);
                    }
                }
                if ((int)response.StatusCode == 401 && attempt == 1)
                {
                    response.Dispose();
                    tokens.Invalidate(); // a refreshed token may be accepted
                    continue;
                }
                return Check(response, what);
            }
        }

        private static string Describe(Exception exc)
        {
            var text = exc.GetType().Name + ": " + exc.Message;
            return exc.InnerException != null ? text + " (" + exc.InnerException.Message + ")" : text;
        }

        private static HttpResponseMessage Check(HttpResponseMessage response, string what)
        {
            var status = (int)response.StatusCode;
            if (status < 400) return response;
            var message = what + ": " + status + " " + Detail(response);
            response.Dispose();
            if (status >= 500 || status == 408 || status == 425 || status == 429)
                throw new TransientException(message, status);
            if (status == 409) throw new ConflictException(message, status);
            throw new RejectedException(message, status);
        }

        private static string Detail(HttpResponseMessage response)
        {
            var text = response.Content == null ? "" : response.Content.ReadAsStringAsync().GetAwaiter().GetResult();
            if (text.Length > 500) text = text.Substring(0, 500);
            try
            {
                var body = WorkerJson.Parse(text) as JObject;
                if (body != null)
                {
                    foreach (var key in new[] { "detail", "message", "title" })
                    {
                        var value = body[key];
                        if (value != null && value.Type != JTokenType.Null && value.ToString().Length > 0)
                            return value.Type == JTokenType.String ? (string)value : WorkerJson.Serialize(value);
                    }
                }
            }
            catch (Exception) { }
            return text;
        }

        private static string Body(HttpResponseMessage response)
        {
            using (response)
            {
                return response.Content == null ? "" : response.Content.ReadAsStringAsync().GetAwaiter().GetResult();
            }
        }

        private static StringContent Json(JToken token) =>
            new StringContent(WorkerJson.Serialize(token), Encoding.UTF8, "application/json");

        private static string Query(IEnumerable<KeyValuePair<string, string>> values)
        {
            var parts = new List<string>();
            foreach (var pair in values)
            {
                if (pair.Value != null)
                    parts.Add(Uri.EscapeDataString(pair.Key) + "=" + Uri.EscapeDataString(pair.Value));
            }
            return parts.Count == 0 ? "" : "?" + string.Join("&", parts);
        }

        // --- the Task API ------------------------------------------------------------------

        /// <summary><c>GET /api/tasks/poll/batch/{type}</c>: up to <paramref name="count"/> tasks,
        /// waiting at most <paramref name="timeoutMs"/> on the server.</summary>
        public List<JObject> Poll(string taskType, string workerId, int count, int timeoutMs, string domain = null)
        {
            var query = new List<KeyValuePair<string, string>>
            {
                new KeyValuePair<string, string>("workerid", workerId),
                new KeyValuePair<string, string>("count", count.ToString(CultureInfo.InvariantCulture)),
                new KeyValuePair<string, string>("timeout", timeoutMs.ToString(CultureInfo.InvariantCulture)),
            };
            if (!string.IsNullOrEmpty(domain)) query.Add(new KeyValuePair<string, string>("domain", domain));
            var url = ServerUrl + "/api/tasks/poll/batch/" + Uri.EscapeDataString(taskType) + Query(query);
            var response = Send(() => new HttpRequestMessage(HttpMethod.Get, url),
                Timeout + TimeSpan.FromMilliseconds(timeoutMs), "poll of " + taskType);
            var tasks = new List<JObject>();
            if (response.StatusCode == HttpStatusCode.NoContent)
            {
                response.Dispose();
                return tasks;
            }
            var text = Body(response);
            if (text.Trim().Length == 0) return tasks;
            var body = WorkerJson.Parse(text) as JArray;
            if (body == null) throw new RejectedException("poll of " + taskType + ": expected a list");
            foreach (var item in body)
            {
                var task = item as JObject;
                if (task != null) tasks.Add(task);
            }
            return tasks;
        }

        /// <summary><c>POST /api/tasks</c> with a TaskResult; <paramref name="traceParent"/>, the
        /// task's W3C trace context, goes as the <c>traceparent</c> header when it is well formed.</summary>
        public void Update(JObject result, string traceParent = null)
        {
            PostResult("/api/tasks", result, traceParent).Dispose();
        }

        /// <summary><c>POST /api/tasks/update-v2</c> (Conductor's updateTaskV2): posts a TaskResult
        /// as <see cref="Update"/> does and takes the next task of the same type for this worker,
        /// handed out (leased) to it, or null when there is none (204). A task returned here is
        /// the caller's to execute, as one a poll returned.</summary>
        public JObject UpdateV2(JObject result, string traceParent = null)
        {
            var response = PostResult("/api/tasks/update-v2", result, traceParent);
            if (response.StatusCode == HttpStatusCode.NoContent)
            {
                response.Dispose();
                return null;
            }
            var text = Body(response);
            if (text.Trim().Length == 0) return null;
            JObject task = null;
            try { task = WorkerJson.Parse(text) as JObject; }
            catch (Exception) { }
            var taskId = task == null ? null : task["taskId"];
            // the result was accepted (2xx): only the next task is unreadable
            if (taskId == null || taskId.Type == JTokenType.Null)
                throw new UnreadableTaskException("update-v2 answered no task but " + (text.Length > 200 ? text.Substring(0, 200) : text));
            return task;
        }

        /// <summary>A TaskResult posted to <paramref name="path"/>, with the task's
        /// <c>traceparent</c> header when it is well formed; the response, the caller's to dispose.</summary>
        private HttpResponseMessage PostResult(string path, JObject result, string traceParent)
        {
            var body = WorkerJson.Serialize(result);
            var trace = TraceContext.IsWellFormed(traceParent) ? traceParent : null;
            return Send(() =>
            {
                var request = new HttpRequestMessage(HttpMethod.Post, ServerUrl + path)
                {
                    Content = new StringContent(body, Encoding.UTF8, "application/json"),
                };
                if (trace != null) request.Headers.TryAddWithoutValidation(TraceContext.Header, trace);
                return request;
            }, Timeout, "POST " + path);
        }

        /// <summary><c>POST /api/tasks/{taskId}/log</c> with one line.</summary>
        public void Log(string taskId, string line, TimeSpan? timeout = null)
        {
            var url = ServerUrl + "/api/tasks/" + Uri.EscapeDataString(taskId) + "/log";
            Send(() => new HttpRequestMessage(HttpMethod.Post, url) { Content = Json(new JValue(line)) },
                timeout ?? TimeSpan.FromSeconds(5), "POST log of " + taskId).Dispose();
        }

        /// <summary><c>GET /api/tasks/{taskId}</c>.</summary>
        public JObject GetTask(string taskId)
        {
            var url = ServerUrl + "/api/tasks/" + Uri.EscapeDataString(taskId);
            var body = WorkerJson.Parse(Body(Send(() => new HttpRequestMessage(HttpMethod.Get, url), Timeout, "GET task " + taskId))) as JObject;
            if (body == null) throw new RejectedException("task " + taskId + ": expected an object");
            return body;
        }

        /// <summary>Where to upload a payload: <c>GET /api/tasks/external-storage-location</c>
        /// (the server may choose another path than the one asked for).</summary>
        public UploadedPayload StorageLocation(string path, string taskType = null, string operation = "WRITE", string payloadType = "TASK_OUTPUT")
        {
            var query = new List<KeyValuePair<string, string>>
            {
                new KeyValuePair<string, string>("path", path),
                new KeyValuePair<string, string>("operation", operation),
                new KeyValuePair<string, string>("payloadType", payloadType),
            };
            if (!string.IsNullOrEmpty(taskType)) query.Add(new KeyValuePair<string, string>("taskType", taskType));
            var url = ServerUrl + "/api/tasks/external-storage-location" + Query(query);
            var body = WorkerJson.Parse(Body(Send(() => new HttpRequestMessage(HttpMethod.Get, url), Timeout, "external-storage-location"))) as JObject;
            var uri = body == null ? null : (string)body["uri"];
            var where = body == null ? null : (string)body["path"];
            if (string.IsNullOrEmpty(uri) || string.IsNullOrEmpty(where))
                throw new RejectedException("external-storage-location gave no uri and path");
            return new UploadedPayload(where, uri);
        }

        /// <summary>PUTs <paramref name="data"/> to an upload URI (a signed Blob URL, or a URL of
        /// the control plane). The bearer token goes only to the control plane's own origin.</summary>
        public void Put(string uri, byte[] data, string contentType)
        {
            var absolute = new Uri(new Uri(ServerUrl + "/"), uri);
            var server = new Uri(ServerUrl);
            var sameOrigin = absolute.Scheme == server.Scheme && absolute.Authority == server.Authority;
            using (var request = new HttpRequestMessage(HttpMethod.Put, absolute))
            {
                request.Content = new ByteArrayContent(data);
                request.Content.Headers.ContentType = MediaTypeHeaderValue.Parse(contentType);
                request.Headers.TryAddWithoutValidation("x-ms-blob-type", "BlockBlob");
                if (sameOrigin)
                {
                    var token = tokens.GetToken();
                    if (!string.IsNullOrEmpty(token))
                        request.Headers.Authorization = new AuthenticationHeaderValue("Bearer", token);
                }
                HttpResponseMessage response;
                using (var cts = new CancellationTokenSource(Timeout))
                {
                    try
                    {
                        response = http.SendAsync(request, cts.Token).GetAwaiter().GetResult();
                    }
                    catch (Exception exc) when (exc is OperationCanceledException || exc is HttpRequestException || exc is WebException || exc is System.IO.IOException)
                    {
                        throw new TransientException("PUT upload: " + Describe(exc), null, exc);
                    }
                }
                var status = (int)response.StatusCode;
                if (status >= 400)
                {
                    var message = "PUT upload: " + status + " " + Body(response);
                    if (status >= 500 || status == 408 || status == 425 || status == 429) throw new TransientException(message, status);
                    throw new RejectedException(message, status);
                }
                response.Dispose();
            }
        }
    }
}
