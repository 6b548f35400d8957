using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Net;
using System.Net.Sockets;
using System.Text;
using System.Threading;
using Newtonsoft.Json.Linq;

namespace Stepway.Worker.Tests
{
    /// <summary>One batch poll as the fake Task API saw it.</summary>
    public sealed class PollRecord
    {
        public string TaskType;
        public int Count;
        public int TimeoutMs;
        public string WorkerId;
        public string Domain;
        public int Returned;
        /// <summary>Tasks handed out to this worker and not answered yet when the poll came.</summary>
        public int HeldAtPoll;
        public DateTime Started;
        public DateTime Answered;
    }

    /// <summary>One <c>POST /api/tasks</c> or <c>POST /api/tasks/update-v2</c> as the fake
    /// Task API saw it, accepted or not.</summary>
    public sealed class ResultPost
    {
        /// <summary><c>/api/tasks</c> or <c>/api/tasks/update-v2</c>.</summary>
        public string Path;
        /// <summary>Of an update-v2 post: the task handed out with the answer (null: 204).</summary>
        public string HandedOut;
        public string TaskId;
        public string Status;
        /// <summary>The HTTP status it was answered with.</summary>
        public int Answer;
        /// <summary>The values of its <c>traceparent</c> headers (empty: none was sent).</summary>
        public string[] TraceParents;
    }

    /// <summary>
    /// An in-process fake of the Task API over real HTTP (HttpListener), with the contract of
    /// the control plane's Task API that a worker uses: batch poll with a long-poll timeout,
    /// <c>POST /api/tasks</c>, <c>POST /api/tasks/update-v2</c> (the result is accepted as by
    /// <c>POST /api/tasks</c>, then the next queued task of its type and domain is handed out
    /// to the worker, waiting up to 100 ms, else 204), <c>POST /api/tasks/{id}/log</c>, the
    /// external storage location and a PUT upload URL. It records every call (of result posts, also the
    /// <c>traceparent</c> header). An IN_PROGRESS result with
    /// <c>callbackAfterSeconds</c> above 0 puts the task back on its queue after that delay with
    /// the posted output as <c>outputData</c>; a result from a worker the task was not handed
    /// out to is refused with 409. Stop/Start keep the port and the state.
    /// </summary>
    public sealed class FakeTaskApi : IDisposable
    {
        public readonly object Gate = new object();
        private readonly Dictionary<string, List<JObject>> queues = new Dictionary<string, List<JObject>>();
        private readonly Dictionary<string, JObject> tasks = new Dictionary<string, JObject>();
        private readonly Dictionary<string, string> queueOf = new Dictionary<string, string>();
        public readonly Dictionary<string, string> Leases = new Dictionary<string, string>();
        private readonly List<JObject> results = new List<JObject>();
        private readonly List<ResultPost> resultPosts = new List<ResultPost>();
        private readonly Dictionary<string, List<string>> logs = new Dictionary<string, List<string>>();
        private readonly Dictionary<string, byte[]> uploads = new Dictionary<string, byte[]>();
        private readonly List<PollRecord> polls = new List<PollRecord>();
        private readonly Queue<int> resultFailures = new Queue<int>();
        public readonly List<string> AuthHeaders = new List<string>();
        private HttpListener listener;
        private Thread acceptor;
        private int sequence;

        public FakeTaskApi()
        {
            var probe = new TcpListener(IPAddress.Loopback, 0);
            probe.Start();
            Port = ((IPEndPoint)probe.LocalEndpoint).Port;
            probe.Stop();
            Start();
        }

        public int Port { get; }
        public string Url => "http://127.0.0.1:" + Port;

        /// <summary>When set, requests without this bearer token get 401.</summary>
        public string RequiredToken { get; set; }

        public void Start()
        {
            listener = new HttpListener();
            listener.Prefixes.Add(Url + "/");
            listener.Start();
            var own = listener;
            acceptor = new Thread(() => Accept(own)) { IsBackground = true, Name = "fake-task-api" };
            acceptor.Start();
        }

        public void Stop()
        {
            var own = listener;
            listener = null;
            if (own == null) return;
            try { own.Close(); } catch (Exception) { }
            acceptor.Join(2000);
        }

        public void Dispose() => Stop();

        // --- test side ------------------------------------------------------------------

        /// <summary>Queues a task; <paramref name="traceparent"/> (any JSON value) is set as its
        /// <c>traceparent</c>, as the Task API hands it out when the engine traces.</summary>
        public string Enqueue(string taskType, JObject input, string domain = null, JToken traceparent = null)
        {
            lock (Gate)
            {
                var taskId = "t" + (++sequence) + "-" + taskType;
                var task = new JObject
                {
                    ["taskId"] = taskId,
                    ["taskType"] = taskType,
                    ["taskDefName"] = taskType,
                    ["status"] = "SCHEDULED",
                    ["inputData"] = input,
                    ["outputData"] = new JObject(),
                    ["referenceTaskName"] = taskType + "_ref",
                    ["workflowInstanceId"] = "wf-" + taskId,
                    ["retryCount"] = 0,
                    ["attempt"] = 1,
                    ["pollCount"] = 0,
                    ["callbackAfterSeconds"] = 0,
                };
                if (traceparent != null) task["traceparent"] = traceparent;
                tasks[taskId] = task;
                queueOf[taskId] = domain == null ? taskType : domain + "-" + taskType;
                Queue(queueOf[taskId]).Add(task);
                Monitor.PulseAll(Gate);
                return taskId;
            }
        }

        public void FailNextResults(params int[] statuses)
        {
            lock (Gate) foreach (var s in statuses) resultFailures.Enqueue(s);
        }

        public int PendingResultFailures { get { lock (Gate) return resultFailures.Count; } }

        public List<PollRecord> Polls(string taskType)
        {
            lock (Gate) return polls.Where(p => p.TaskType == taskType).ToList();
        }

        public List<JObject> ResultsFor(string taskId)
        {
            lock (Gate) return results.Where(r => (string)r["taskId"] == taskId).ToList();
        }

        /// <summary>Every result post (<c>POST /api/tasks</c> or update-v2) of a task, in order,
        /// failed tries included.</summary>
        public List<ResultPost> ResultPostsFor(string taskId)
        {
            lock (Gate) return resultPosts.Where(p => p.TaskId == taskId).ToList();
        }

        /// <summary>Every result post (<c>POST /api/tasks</c> or update-v2), in order.</summary>
        public List<ResultPost> AllResultPosts()
        {
            lock (Gate) return resultPosts.ToList();
        }

        public List<string> Logs(string taskId)
        {
            lock (Gate)
            {
                List<string> lines;
                return logs.TryGetValue(taskId, out lines) ? lines.ToList() : new List<string>();
            }
        }

        public byte[] Upload(string path)
        {
            lock (Gate) return uploads[path];
        }

        /// <summary>The latest result of a task (with <paramref name="status"/>, if given); throws
        /// TimeoutException when none comes within <paramref name="seconds"/>.</summary>
        public JObject WaitResult(string taskId, string status = null, double seconds = 10)
        {
            var deadline = DateTime.UtcNow.AddSeconds(seconds);
            lock (Gate)
            {
                while (true)
                {
                    var found = results.LastOrDefault(r => (string)r["taskId"] == taskId && (status == null || (string)r["status"] == status));
                    if (found != null) return found;
                    var left = deadline - DateTime.UtcNow;
                    if (left <= TimeSpan.Zero) throw new TimeoutException("no result for " + taskId);
                    Monitor.Wait(Gate, left);
                }
            }
        }

        /// <summary>Waits until <paramref name="condition"/> holds (checked under the lock).</summary>
        public bool WaitFor(Func<bool> condition, double seconds = 10)
        {
            var deadline = DateTime.UtcNow.AddSeconds(seconds);
            lock (Gate)
            {
                while (!condition())
                {
                    var left = deadline - DateTime.UtcNow;
                    if (left <= TimeSpan.Zero) return false;
                    Monitor.Wait(Gate, left < TimeSpan.FromMilliseconds(50) ? left : TimeSpan.FromMilliseconds(50));
                }
                return true;
            }
        }

        private List<JObject> Queue(string name)
        {
            List<JObject> queue;
            if (!queues.TryGetValue(name, out queue)) queues[name] = queue = new List<JObject>();
            return queue;
        }

        // --- server side ------------------------------------------------------------------

        private void Accept(HttpListener own)
        {
            while (true)
            {
                HttpListenerContext context;
                try { context = own.GetContext(); }
                catch (Exception) { return; }
                ThreadPool.QueueUserWorkItem(_ => Handle(context));
            }
        }

        private void Handle(HttpListenerContext context)
        {
            try
            {
                var request = context.Request;
                var auth = request.Headers["Authorization"];
                lock (Gate) AuthHeaders.Add(auth);
                if (RequiredToken != null && auth != "Bearer " + RequiredToken)
                {
                    Reply(context, 401, new JObject { ["detail"] = "bad token" });
                    return;
                }
                var path = request.Url.AbsolutePath;
                var method = request.HttpMethod;
                if (method == "GET" && path.StartsWith("/api/tasks/poll/batch/", StringComparison.Ordinal))
                    Poll(context, Uri.UnescapeDataString(path.Substring("/api/tasks/poll/batch/".Length)));
                else if (method == "POST" && path == "/api/tasks")
                    Result(context, false);
                else if (method == "POST" && path == "/api/tasks/update-v2")
                    Result(context, true);
                else if (method == "POST" && path.StartsWith("/api/tasks/", StringComparison.Ordinal) && path.EndsWith("/log", StringComparison.Ordinal))
                    AddLog(context, Uri.UnescapeDataString(path.Substring(11, path.Length - 11 - 4)));
                else if (method == "GET" && path == "/api/tasks/external-storage-location")
                {
                    var where = "uploads/" + request.QueryString["taskType"] + "/" + request.QueryString["path"];
                    Reply(context, 200, new JObject { ["uri"] = Url + "/upload/" + where, ["path"] = where });
                }
                else if (method == "PUT" && path.StartsWith("/upload/", StringComparison.Ordinal))
                {
                    var data = ReadBytes(request);
                    lock (Gate) uploads[Uri.UnescapeDataString(path.Substring(8))] = data;
                    Reply(context, 201, null);
                }
                else Reply(context, 404, new JObject { ["detail"] = "no route " + method + " " + path });
            }
            catch (Exception exc)
            {
                try { Reply(context, 500, new JObject { ["detail"] = exc.ToString() }); } catch (Exception) { }
            }
        }

        private void Poll(HttpListenerContext context, string taskType)
        {
            var q = context.Request.QueryString;
            var record = new PollRecord
            {
                TaskType = taskType,
                Count = int.Parse(q["count"] ?? "1"),
                TimeoutMs = int.Parse(q["timeout"] ?? "100"),
                WorkerId = q["workerid"],
                Domain = q["domain"],
                Started = DateTime.UtcNow,
            };
            var handed = new JArray();
            lock (Gate)
            {
                record.HeldAtPoll = Leases.Values.Count(w => w == record.WorkerId);
                var queue = Queue(record.Domain == null ? taskType : record.Domain + "-" + taskType);
                var deadline = record.Started.AddMilliseconds(record.TimeoutMs);
                while (queue.Count == 0 && DateTime.UtcNow < deadline)
                    Monitor.Wait(Gate, deadline - DateTime.UtcNow);
                while (queue.Count > 0 && handed.Count < record.Count)
                {
                    var task = queue[0];
                    queue.RemoveAt(0);
                    task["status"] = "IN_PROGRESS";
                    task["pollCount"] = (int)task["pollCount"] + 1;
                    Leases[(string)task["taskId"]] = record.WorkerId;
                    handed.Add(task.DeepClone());
                }
                record.Returned = handed.Count;
                record.Answered = DateTime.UtcNow;
                polls.Add(record);
                Monitor.PulseAll(Gate);
            }
            Reply(context, 200, handed);
        }

        private void Result(HttpListenerContext context, bool takeNext)
        {
            var body = (JObject)WorkerJson.Parse(Encoding.UTF8.GetString(ReadBytes(context.Request)));
            var post = new ResultPost
            {
                Path = takeNext ? "/api/tasks/update-v2" : "/api/tasks",
                TaskId = (string)body["taskId"],
                Status = (string)body["status"],
                TraceParents = context.Request.Headers.GetValues("traceparent") ?? new string[0],
            };
            lock (Gate)
            {
                resultPosts.Add(post);
                if (resultFailures.Count > 0)
                {
                    var status = resultFailures.Dequeue();
                    post.Answer = status;
                    Monitor.PulseAll(Gate);
                    Reply(context, status, new JObject { ["detail"] = "injected failure " + status });
                    return;
                }
                var taskId = (string)body["taskId"];
                string holder;
                if (!Leases.TryGetValue(taskId, out holder) || holder != (string)body["workerId"])
                {
                    post.Answer = 409;
                    Reply(context, 409, new JObject { ["detail"] = "task " + taskId + " is not handed out to " + body["workerId"] });
                    return;
                }
                post.Answer = 200;
                results.Add(body);
                var logsOf = body["logs"] as JArray;
                if (logsOf != null)
                    foreach (var entry in logsOf) AddLine(taskId, (string)entry["log"]);
                var task = tasks[taskId];
                var state = (string)body["status"];
                var callback = body["callbackAfterSeconds"] == null ? 0 : (int)body["callbackAfterSeconds"];
                task["status"] = state;
                if (body["outputData"] != null) task["outputData"] = body["outputData"].DeepClone();
                if (state != "IN_PROGRESS" || callback > 0) Leases.Remove(taskId);
                if (state == "IN_PROGRESS" && callback > 0)
                {
                    var timer = (Timer)null;
                    timer = new Timer(_ =>
                    {
                        lock (Gate)
                        {
                            Queue((string)task["taskType"]).Add(task);
                            Monitor.PulseAll(Gate);
                        }
                        timer.Dispose();
                    }, null, callback * 1000, Timeout.Infinite);
                }
                Monitor.PulseAll(Gate);
                if (takeNext)
                {
                    // as the Task API's update_task_v2: one task of the same type and domain
                    // for the same worker, waiting up to UPDATE_V2_POLL_MS (100 ms)
                    var queue = Queue(queueOf[taskId]);
                    var deadline = DateTime.UtcNow.AddMilliseconds(100);
                    while (queue.Count == 0 && DateTime.UtcNow < deadline)
                        Monitor.Wait(Gate, deadline - DateTime.UtcNow);
                    if (queue.Count == 0)
                    {
                        Reply(context, 204, null);
                        return;
                    }
                    var next = queue[0];
                    queue.RemoveAt(0);
                    next["status"] = "IN_PROGRESS";
                    next["pollCount"] = (int)next["pollCount"] + 1;
                    Leases[(string)next["taskId"]] = (string)body["workerId"];
                    post.HandedOut = (string)next["taskId"];
                    Monitor.PulseAll(Gate);
                    Reply(context, 200, next.DeepClone());
                    return;
                }
            }
            Reply(context, 200, null, (string)body["taskId"]);
        }

        private void AddLog(HttpListenerContext context, string taskId)
        {
            var text = Encoding.UTF8.GetString(ReadBytes(context.Request));
            var token = WorkerJson.Parse(text);
            lock (Gate)
            {
                AddLine(taskId, token.Type == JTokenType.String ? (string)token : text);
                Monitor.PulseAll(Gate);
            }
            Reply(context, 200, null);
        }

        private void AddLine(string taskId, string line)
        {
            List<string> lines;
            if (!logs.TryGetValue(taskId, out lines)) logs[taskId] = lines = new List<string>();
            lines.Add(line);
        }

        private static byte[] ReadBytes(HttpListenerRequest request)
        {
            using (var buffer = new MemoryStream())
            {
                request.InputStream.CopyTo(buffer);
                return buffer.ToArray();
            }
        }

        private static void Reply(HttpListenerContext context, int status, JToken body, string text = null)
        {
            var response = context.Response;
            response.StatusCode = status;
            var payload = body != null ? WorkerJson.Serialize(body) : text ?? "";
            var bytes = Encoding.UTF8.GetBytes(payload);
            response.ContentType = body != null ? "application/json" : "text/plain";
            response.ContentLength64 = bytes.Length;
            response.OutputStream.Write(bytes, 0, bytes.Length);
            response.OutputStream.Close();
        }
    }
}
