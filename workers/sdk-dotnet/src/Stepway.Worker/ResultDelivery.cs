using System;
using System.Collections.Generic;
using System.Text;
using System.Threading;
using Newtonsoft.Json.Linq;

namespace Stepway.Worker
{
    /// <summary>A result on its way to the Task API.</summary>
    public sealed class PendingResult
    {
        public PendingResult(string taskId, string taskType, JObject body, byte[] largeOutput, string traceParent = null)
        {
            TaskId = taskId;
            TaskType = taskType;
            Body = body;
            LargeOutput = largeOutput;
            TraceParent = traceParent;
        }

        public string TaskId { get; }
        public string TaskType { get; }

        /// <summary>The TaskResult JSON.</summary>
        public JObject Body { get; }

        /// <summary>The output JSON while it is above the threshold and not uploaded yet.</summary>
        public byte[] LargeOutput { get; set; }

        public int Tries { get; set; }

        /// <summary>The task's <c>traceparent</c> (null: none, or malformed), sent as the
        /// header of every try.</summary>
        public string TraceParent { get; }
    }

    /// <summary>Builds and sends TaskResults: a large output is uploaded first and only its
    /// path posted.</summary>
    public static class ResultDelivery
    {
        /// <summary>The TaskResult body of an outcome (its output offloaded later when large).</summary>
        public static PendingResult MakeResult(JObject task, Outcome outcome, string workerId, int payloadThreshold, IList<string> logs = null)
        {
            var taskId = (string)task["taskId"];
            var workflowId = task["workflowInstanceId"] ?? task["workflowId"];
            var body = new JObject
            {
                ["workflowInstanceId"] = workflowId == null ? JValue.CreateNull() : workflowId.DeepClone(),
                ["taskId"] = taskId,
                ["status"] = outcome.Status,
                ["outputData"] = outcome.Output,
                ["workerId"] = workerId,
            };
            if (!string.IsNullOrEmpty(outcome.Reason)) body["reasonForIncompletion"] = outcome.Reason;
            if (outcome.Status == TaskStatuses.InProgress)
            {
                body["callbackAfterSeconds"] = outcome.CallbackAfterSeconds;
                if (outcome.ExtendLease) body["extendLease"] = true;
            }
            var lines = new List<string>(outcome.Logs);
            if (logs != null) lines.AddRange(logs);
            if (lines.Count > 0)
            {
                var array = new JArray();
                foreach (var line in lines) array.Add(new JObject { ["log"] = line, ["taskId"] = taskId });
                body["logs"] = array;
            }
            byte[] large = null;
            var encoded = Encoding.UTF8.GetBytes(WorkerJson.Serialize(outcome.Output));
            // an IN_PROGRESS output is the state a callback resumes from: the Task API keeps
            // it on the task as posted, so it is never uploaded
            if (encoded.Length > payloadThreshold && outcome.Status != TaskStatuses.InProgress)
                large = encoded;
            var taskType = (string)task["taskType"] ?? "";
            return new PendingResult(taskId, taskType, body, large, TraceContext.Of(task));
        }

        /// <summary>Uploads through the external storage location.</summary>
        public static UploadedPayload Upload(TaskClient client, string taskType, string taskId, byte[] data, string name, string contentType)
        {
            var location = client.StorageLocation(taskId + "/" + name, string.IsNullOrEmpty(taskType) ? null : taskType);
            client.Put(location.Uri, data, contentType);
            return location;
        }

        /// <summary>One try: upload a large output if still needed, then post (with the task's
        /// <c>traceparent</c>). With <paramref name="takeNext"/> the result goes to
        /// <c>update-v2</c> and the next task it hands out is returned (the caller's to execute);
        /// otherwise, and when there is none, null. Throws the client's exceptions.</summary>
        public static JObject SendOnce(TaskClient client, PendingResult pending, bool takeNext = false)
        {
            if (pending.LargeOutput != null)
            {
                var location = Upload(client, pending.TaskType, pending.TaskId, pending.LargeOutput, "output.json", "application/json");
                pending.Body["outputData"] = new JObject();
                pending.Body["externalOutputPayloadStoragePath"] = location.Path;
                pending.LargeOutput = null;
            }
            if (takeNext) return client.UpdateV2(pending.Body, pending.TraceParent);
            client.Update(pending.Body, pending.TraceParent);
            return null;
        }
    }

    /// <summary>
    /// Results that could not be posted yet, retried in order with exponential backoff by one
    /// background thread for as long as the process lives. Connection errors, timeouts, 5xx,
    /// 408 and 429 are retried; a 409 (stale attempt) is logged and dropped; any other 4xx
    /// is logged and dropped.
    /// </summary>
    public sealed class Outbox
    {
        private readonly TaskClient client;
        private readonly TimeSpan initial;
        private readonly TimeSpan maximum;
        private readonly WorkerLog log;
        private readonly LinkedList<PendingResult> queue = new LinkedList<PendingResult>();
        private readonly object gate = new object();
        private bool stopped;
        private Thread thread;
        private int delivered;
        private int dropped;

        public Outbox(TaskClient client, TimeSpan initial, TimeSpan maximum, WorkerLog log)
        {
            this.client = client;
            this.initial = initial;
            this.maximum = maximum;
            this.log = log;
        }

        /// <summary>Results waiting for a retry.</summary>
        public int Count { get { lock (gate) return queue.Count; } }

        public int Delivered => Volatile.Read(ref delivered);

        /// <summary>Results dropped for good (409 or another 4xx).</summary>
        public int Dropped => Volatile.Read(ref dropped);

        public void Start()
        {
            lock (gate)
            {
                if (thread != null) return;
                thread = new Thread(Loop) { IsBackground = true, Name = "stepway-outbox" };
                thread.Start();
            }
        }

        /// <summary>Posts now; queues for retry on a transient error. True when settled.</summary>
        public bool Deliver(PendingResult pending)
        {
            JObject next;
            return Deliver(pending, false, out next);
        }

        /// <summary>Posts now through <c>update-v2</c> and returns the next task it hands out
        /// (null: none, or the result is not settled yet). A result that cannot be posted now is
        /// queued for retry as by <see cref="Deliver(PendingResult)"/>, by the plain post: the
        /// retries run in the outbox's thread, which executes no task, so no task handed out
        /// with a retried result can be lost.</summary>
        public JObject DeliverAndTakeNext(PendingResult pending)
        {
            JObject next;
            Deliver(pending, true, out next);
            return next;
        }

        private bool Deliver(PendingResult pending, bool takeNext, out JObject next)
        {
            next = null;
            bool queuedBefore;
            lock (gate) queuedBefore = queue.Count > 0;
            if (!queuedBefore && Try(pending, takeNext, out next)) return true;
            lock (gate)
            {
                queue.AddLast(pending);
                Monitor.PulseAll(gate);
            }
            return false;
        }

        /// <summary>True when the result is settled (posted, or dropped for good);
        /// <paramref name="next"/>: the task <c>update-v2</c> handed out with it, if any.</summary>
        private bool Try(PendingResult pending, bool takeNext, out JObject next)
        {
            next = null;
            pending.Tries++;
            try
            {
                next = ResultDelivery.SendOnce(client, pending, takeNext);
            }
            catch (UnreadableTaskException exc)
            {
                // the result was accepted: only the task that came with it is unreadable
                log.Error("result of task " + pending.TaskId + " posted, but " + exc.Message);
            }
            catch (TransientException exc)
            {
                if (pending.Tries == 1 || pending.Tries % 20 == 0)
                    log.Warning("result of task " + pending.TaskId + " not posted (try " + pending.Tries + "), will retry: " + exc.Message);
                return false;
            }
            catch (ConflictException exc)
            {
                log.Warning("result of task " + pending.TaskId + " dropped: stale attempt: " + exc.Message);
                Interlocked.Increment(ref dropped);
                return true;
            }
            catch (RejectedException exc)
            {
                log.Error("result of task " + pending.TaskId + " refused, dropped: " + exc.Message);
                Interlocked.Increment(ref dropped);
                return true;
            }
            catch (Exception exc)
            {
                log.Error("result of task " + pending.TaskId + ": unexpected error, will retry: " + exc);
                return false;
            }
            if (pending.Tries > 1)
                log.Info("result of task " + pending.TaskId + " posted after " + pending.Tries + " tries");
            Interlocked.Increment(ref delivered);
            return true;
        }

        private void Loop()
        {
            var delay = initial;
            while (true)
            {
                PendingResult head;
                lock (gate)
                {
                    while (queue.Count == 0 && !stopped) Monitor.Wait(gate);
                    if (queue.Count == 0) return;
                    head = queue.First.Value;
                }
                JObject none;
                if (Try(head, false, out none))
                {
                    lock (gate)
                    {
                        queue.RemoveFirst();
                        Monitor.PulseAll(gate);
                    }
                    delay = initial;
                    continue;
                }
                lock (gate)
                {
                    if (!stopped) Monitor.Wait(gate, delay);
                }
                delay = TimeSpan.FromTicks(Math.Min(delay.Ticks * 2, maximum.Ticks));
            }
        }

        /// <summary>Waits until every queued result is settled, at most <paramref name="timeout"/>.</summary>
        public bool Drain(TimeSpan timeout)
        {
            var deadline = DateTime.UtcNow + timeout;
            lock (gate)
            {
                while (queue.Count > 0)
                {
                    var left = deadline - DateTime.UtcNow;
                    if (left <= TimeSpan.Zero) return false;
                    Monitor.Wait(gate, left < TimeSpan.FromMilliseconds(50) ? left : TimeSpan.FromMilliseconds(50));
                }
            }
            return true;
        }

        public void Stop()
        {
            lock (gate)
            {
                stopped = true;
                Monitor.PulseAll(gate);
            }
        }
    }
}
