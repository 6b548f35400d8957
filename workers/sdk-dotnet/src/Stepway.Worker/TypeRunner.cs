using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using Newtonsoft.Json.Linq;

namespace Stepway.Worker
{
    /// <summary>
    /// The worker loop for one task type: a poller thread and <c>Threads</c> handler threads.
    /// <code>
    /// forever:
    ///     wait for a free slot
    ///     tasks = GET /api/tasks/poll/batch/{type}?workerid=&amp;domain=&amp;count={free slots}&amp;timeout={long poll ms}
    ///     if none: wait 1 ms, doubling up to the poll interval; continue   (reset on a task)
    ///     hand each task to a handler thread
    /// handler thread, for each task it is handed:
    ///     run the handler
    ///     POST /api/tasks/update-v2 (the final result) -> the next task of the type, or none (204)
    ///     while there is a next task: run it in this thread, in the same slot, and post its
    ///     result the same way (a busy worker makes about one request per task; an IN_PROGRESS
    ///     result, and any result while stopping, goes to POST /api/tasks and takes no task)
    /// </code>
    /// </summary>
    internal sealed class TypeRunner
    {
        private static readonly TimeSpan MinWait = TimeSpan.FromMilliseconds(1);

        private readonly WorkerHost host;
        private readonly TaskHandler handler;
        private readonly object gate = new object();
        private readonly BlockingCollection<JObject> work = new BlockingCollection<JObject>();
        private readonly List<Thread> threads = new List<Thread>();
        private Thread poller;
        private int inFlight;
        private DateTime lastPollWarning = DateTime.MinValue;

        public TypeRunner(WorkerHost host, TaskHandler handler, TypeOptions options)
        {
            this.host = host;
            this.handler = handler;
            Options = options;
        }

        public TypeOptions Options { get; }
        public int Polls;
        public int Executed;
        /// <summary>Tasks update-v2 handed out with a result (not polled).</summary>
        public int HandedWithResult;

        public void Start()
        {
            for (var i = 0; i < Options.Threads; i++)
            {
                var thread = new Thread(WorkLoop) { IsBackground = true, Name = "stepway-" + Options.TaskType + "-" + i };
                thread.Start();
                threads.Add(thread);
            }
            poller = new Thread(PollLoop) { IsBackground = true, Name = "stepway-poll-" + Options.TaskType };
            poller.Start();
        }

        // --- polling ------------------------------------------------------------------------

        private int FreeSlots()
        {
            lock (gate)
            {
                while (inFlight >= Options.Threads && !host.Stopping.IsSet)
                    Monitor.Wait(gate, 500);
                return Options.Threads - inFlight;
            }
        }

        private void PollLoop()
        {
            var stopping = host.Stopping;
            var wait = MinWait;
            while (!stopping.IsSet)
            {
                var free = FreeSlots();
                if (stopping.IsSet || free <= 0) continue;
                List<JObject> tasks;
                try
                {
                    Interlocked.Increment(ref Polls);
                    tasks = host.Client.Poll(Options.TaskType, host.Options.WorkerId, free, host.Options.LongPollMs, Options.Domain);
                }
                catch (TransientException exc)
                {
                    if (DateTime.UtcNow - lastPollWarning > TimeSpan.FromSeconds(60))
                    {
                        lastPollWarning = DateTime.UtcNow;
                        host.Log.Warning("poll of " + Options.TaskType + " failed, retrying: " + exc.Message);
                    }
                    stopping.Wait(Options.PollInterval);
                    continue;
                }
                catch (RejectedException exc)
                {
                    host.Log.Error("poll of " + Options.TaskType + " refused: " + exc.Message);
                    stopping.Wait(Options.PollInterval > TimeSpan.FromSeconds(1) ? Options.PollInterval : TimeSpan.FromSeconds(1));
                    continue;
                }
                catch (Exception exc)
                {
                    host.Log.Error("poll of " + Options.TaskType + ": unexpected error: " + exc);
                    stopping.Wait(Options.PollInterval);
                    continue;
                }
                if (lastPollWarning != DateTime.MinValue)
                {
                    lastPollWarning = DateTime.MinValue;
                    host.Log.Info("poll of " + Options.TaskType + " works again");
                }
                if (tasks.Count == 0)
                {
                    stopping.Wait(wait);
                    wait = TimeSpan.FromTicks(Math.Min(wait.Ticks * 2, Options.PollInterval.Ticks));
                    continue;
                }
                wait = MinWait;
                lock (gate) inFlight += tasks.Count;
                foreach (var task in tasks)
                {
                    try
                    {
                        work.Add(task);
                    }
                    catch (InvalidOperationException)
                    {
                        // the shutdown grace ended while this poll was open: the lease
                        // expires and the engine retries the task
                        host.Log.Warning("task " + task["taskId"] + " polled after shutdown, abandoned");
                        lock (gate) inFlight--;
                    }
                }
            }
        }

        // --- executing ----------------------------------------------------------------------

        private void WorkLoop()
        {
            foreach (var polled in work.GetConsumingEnumerable())
            {
                // A task that update-v2 handed out with the result of the one before runs in
                // this thread, in the slot the one before held: never dropped, even while
                // stopping (as the tasks of a last poll, see JoinPoller).
                var task = polled;
                while (task != null)
                {
                    JObject next = null;
                    try
                    {
                        next = Execute(task);
                    }
                    catch (Exception exc)
                    {
                        host.Log.Error("task " + task["taskId"] + ": unexpected error in the worker: " + exc);
                    }
                    finally
                    {
                        lock (gate)
                        {
                            Executed++;
                            if (next == null)
                            {
                                inFlight--;
                                Monitor.PulseAll(gate);
                            }
                        }
                    }
                    task = next;
                }
            }
        }

        /// <summary>Runs the handler and posts the result; the next task when the post
        /// (update-v2) handed one out to this thread.</summary>
        private JObject Execute(JObject task)
        {
            var taskId = task["taskId"];
            if (taskId == null || taskId.Type == JTokenType.Null)
            {
                host.Log.Error(Options.TaskType + ": a polled task without taskId: " + WorkerJson.Serialize(task));
                return null;
            }
            var ctx = host.BuildContext(task, Options.TaskType);
            var watch = Stopwatch.StartNew();
            var outcome = handler.Execute(ctx);
            host.Log.Info("task " + ctx.TaskId + " (" + Options.TaskType + ") " + outcome.Status + " in "
                + watch.Elapsed.TotalSeconds.ToString("0.000", System.Globalization.CultureInfo.InvariantCulture) + " s");
            if (task["taskType"] == null) task["taskType"] = Options.TaskType;
            var pending = ResultDelivery.MakeResult(task, outcome, host.Options.WorkerId, Options.PayloadThreshold, ctx.TakePendingLogs());
            if (outcome.Status != TaskStatuses.InProgress && !host.Stopping.IsSet)
            {
                // this slot is free once the result is posted: one request posts it and
                // takes the next task of the type
                var next = host.Outbox.DeliverAndTakeNext(pending);
                if (next != null) Interlocked.Increment(ref HandedWithResult);
                return next;
            }
            host.Outbox.Deliver(pending);
            return null;
        }

        /// <summary>Waits for the poller (a poll already open finishes; its tasks still run),
        /// then lets the handler threads finish what is queued.</summary>
        public void JoinPoller(DateTime deadline)
        {
            if (poller != null)
            {
                lock (gate) Monitor.PulseAll(gate);
                if (!poller.Join(Left(deadline)))
                    host.Log.Warning(Options.TaskType + ": a poll is still open at shutdown");
            }
            // tasks a last poll returned are queued before this, so they still run
            try { work.CompleteAdding(); }
            catch (InvalidOperationException) { }
        }

        public bool Join(DateTime deadline)
        {
            var finished = true;
            foreach (var thread in threads)
                finished &= thread.Join(Left(deadline));
            return finished;
        }

        private static TimeSpan Left(DateTime deadline)
        {
            var left = deadline - DateTime.UtcNow;
            return left > TimeSpan.Zero ? left : TimeSpan.Zero;
        }
    }
}
