using System;
using System.Collections.Generic;
using System.Threading;
using Newtonsoft.Json.Linq;

namespace Stepway.Worker
{
    /// <summary>
    /// What a handler knows about the task it runs. Declare a parameter of this type to
    /// receive it, or read <see cref="Current"/>. <see cref="PreviousOutput"/> is the task's
    /// <c>outputData</c> as handed out: empty on a first run, the output of the last
    /// <see cref="InProgress"/> when the task is called back.
    /// </summary>
    public sealed class TaskContext
    {
        private static readonly AsyncLocal<TaskContext> current = new AsyncLocal<TaskContext>();
        private readonly object gate = new object();
        private List<string> pendingLogs = new List<string>();

        public TaskContext(string taskId, string taskType)
        {
            TaskId = taskId;
            TaskType = taskType;
            Attempt = 1;
            Input = new JObject();
            PreviousOutput = new JObject();
            Task = new JObject();
            WorkerId = "";
        }

        /// <summary>The context of the task running on this thread (or async flow), if any.</summary>
        public static TaskContext Current => current.Value;

        public string TaskId { get; }
        public string TaskType { get; }
        public string WorkflowId { get; set; }
        public string ReferenceName { get; set; }
        public int Attempt { get; set; }
        public int PollCount { get; set; }
        public JObject Input { get; set; }
        public JObject PreviousOutput { get; set; }

        /// <summary>The raw Task JSON as polled.</summary>
        public JObject Task { get; set; }

        public string WorkerId { get; set; }

        /// <summary>The task's <c>traceparent</c>, the W3C trace context of the engine's span that
        /// dispatched it, when it is well formed (version 00); null when the task has none
        /// (tracing is off) or a malformed one. The task's results are posted with it as their
        /// <c>traceparent</c> header; a handler may pass it on to calls of its own.</summary>
        public string TraceParent { get; internal set; }

        /// <summary>Set by the runtime: posts one line to <c>POST /api/tasks/{taskId}/log</c>;
        /// returns false when it could not.</summary>
        internal Func<string, bool> LogSink { get; set; }

        /// <summary>Set by the runtime: uploads bytes through the external storage location.</summary>
        internal Func<byte[], string, string, UploadedPayload> Uploader { get; set; }

        /// <summary>Posts one log line for this task (best effort: a line that cannot be
        /// posted now is sent with the result).</summary>
        public void Log(string message)
        {
            var text = message ?? "";
            var delivered = false;
            var sink = LogSink;
            if (sink != null)
            {
                try { delivered = sink(text); }
                catch (Exception) { delivered = false; }
            }
            if (!delivered)
            {
                lock (gate) pendingLogs.Add(text);
            }
        }

        /// <summary>Uploads <paramref name="data"/> through
        /// <c>GET /api/tasks/external-storage-location</c> and a PUT to the returned URI. Use
        /// it for large files (an export); large JSON outputs are offloaded automatically.</summary>
        public UploadedPayload Upload(byte[] data, string name = "output.json", string contentType = "application/json")
        {
            var uploader = Uploader;
            if (uploader == null) throw new InvalidOperationException("this task context has no uploader");
            return uploader(data, name, contentType);
        }

        internal List<string> TakePendingLogs()
        {
            lock (gate)
            {
                var lines = pendingLogs;
                pendingLogs = new List<string>();
                return lines;
            }
        }

        internal static TaskContext Enter(TaskContext ctx)
        {
            var previous = current.Value;
            current.Value = ctx;
            return previous;
        }

        internal static void Leave(TaskContext previous)
        {
            current.Value = previous;
        }

        /// <summary>The handler's view of a polled Task JSON.</summary>
        public static TaskContext FromTask(JObject task, string taskType, string workerId)
        {
            var ctx = new TaskContext((string)task["taskId"], taskType);
            ctx.WorkflowId = Str(task["workflowInstanceId"]) ?? Str(task["workflowId"]);
            ctx.ReferenceName = Str(task["referenceTaskName"]) ?? Str(task["taskRef"]);
            var attempt = Int(task["attempt"]);
            ctx.Attempt = attempt > 0 ? attempt : Int(task["retryCount"]) + 1;
            ctx.PollCount = Int(task["pollCount"]);
            ctx.Input = task["inputData"] as JObject ?? new JObject();
            ctx.PreviousOutput = task["outputData"] as JObject ?? new JObject();
            ctx.Task = task;
            ctx.WorkerId = workerId;
            ctx.TraceParent = TraceContext.Of(task);
            return ctx;
        }

        private static string Str(JToken token)
        {
            if (token == null || token.Type == JTokenType.Null) return null;
            return (string)token;
        }

        private static int Int(JToken token)
        {
            if (token == null) return 0;
            if (token.Type == JTokenType.Integer || token.Type == JTokenType.Float) return (int)token;
            int value;
            return token.Type == JTokenType.String && int.TryParse((string)token, out value) ? value : 0;
        }
    }

    /// <summary>Where an upload went: the payload path (what the Task API takes) and its URI.</summary>
    public sealed class UploadedPayload
    {
        public UploadedPayload(string path, string uri)
        {
            Path = path;
            Uri = uri;
        }

        public string Path { get; }
        public string Uri { get; }
    }
}
