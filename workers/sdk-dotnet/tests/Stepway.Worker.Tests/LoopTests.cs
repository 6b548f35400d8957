using System;
using System.Collections.Generic;
using System.Linq;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Newtonsoft.Json.Linq;
using NUnit.Framework;

namespace Stepway.Worker.Tests
{
    /// <summary>The worker loop over real HTTP against the fake Task API (the same behaviour
    /// as the Python SDK's workers/sdk/tests/test_loop.py).</summary>
    [TestFixture]
    public class LoopTests : WorkerFixture
    {
        [Test]
        public void BatchPollAsksForFreeSlotsOnly()
        {
            var running = 0;
            var peak = 0;
            var gate = new object();
            var host = NewHost(o => o.Threads = 3).Add("slow", ctx =>
            {
                lock (gate) { running++; peak = Math.Max(peak, running); }
                Thread.Sleep(300);
                lock (gate) running--;
                return new { i = (int)ctx.Input["i"] };
            });
            var ids = Enumerable.Range(0, 5).Select(i => Server.Enqueue("slow", new JObject { ["i"] = i })).ToList();
            host.Start();
            foreach (var id in ids) Assert.AreEqual("COMPLETED", (string)Server.WaitResult(id)["status"]);
            var polls = Server.Polls("slow");
            Assert.AreEqual(3, polls[0].Count);
            Assert.AreEqual(3, polls[0].Returned);
            Assert.IsTrue(polls.All(p => p.Returned <= p.Count));
            // a poll never asks for more than the slots not taken by tasks in hand
            Assert.IsTrue(polls.All(p => p.Count + p.HeldAtPoll <= 3),
                string.Join(", ", polls.Select(p => p.Count + "+" + p.HeldAtPoll)));
            Assert.AreEqual(3, peak);
            // the two left came with results (update-v2, in the slot just freed) or by polls
            // sized to the slots freed meanwhile
            Assert.AreEqual(5, polls.Sum(p => p.Returned) + Server.AllResultPosts().Count(p => p.HandedOut != null));
            Assert.IsTrue(polls.All(p => p.TimeoutMs == 200 && p.WorkerId == "test-worker"));
            Assert.AreEqual(new JObject { ["i"] = 4 }.ToString(), Server.WaitResult(ids[4])["outputData"].ToString());
        }

        [Test]
        public void IdleWorkerBacksOffFrom1msToThePollInterval()
        {
            var host = NewHost(o => { o.LongPollMs = 0; o.PollInterval = TimeSpan.FromMilliseconds(200); })
                .Add("idle", ctx => null);
            host.Start();
            Thread.Sleep(1200);
            var polls = Server.Polls("idle");
            // without the backoff this would be thousands of polls
            // (bounds leave room for a loaded CI machine: the shape is what is checked)
            Assert.That(polls.Count, Is.InRange(4, 25));
            var gaps = polls.Zip(polls.Skip(1), (a, b) => (b.Started - a.Answered).TotalSeconds).ToList();
            Assert.Less(gaps[0], gaps[gaps.Count - 1], "starts short (1 ms) and grows");
            Assert.Greater(gaps[gaps.Count - 1], 0.12, "settled at the poll interval");
            Assert.Less(gaps.Max(), 1.0, "never far beyond the 0.2 s poll interval");
            // a task arriving now is picked up, and the wait resets
            var taskId = Server.Enqueue("idle", new JObject());
            Assert.AreEqual("{}", Server.WaitResult(taskId)["outputData"].ToString(Newtonsoft.Json.Formatting.None));
        }

        [Test]
        public void InProgressCallbacksResumeFromTheCursor()
        {
            var seen = new List<string>();
            var host = NewHost().AddHandlers(new ChunkedHandlers(seen));
            host.Start();
            var taskId = Server.Enqueue("chunked", new JObject { ["total"] = 30 });
            var final = Server.WaitResult(taskId, "COMPLETED");
            Assert.AreEqual(30, (int)final["outputData"]["done"]);
            var statuses = Server.ResultsFor(taskId).Select(r => (string)r["status"] + ":" + r["callbackAfterSeconds"]).ToList();
            Assert.AreEqual(new[] { "IN_PROGRESS:1", "IN_PROGRESS:1", "COMPLETED:" }, statuses);
            Assert.AreEqual(new[] { "{}", "{\"cursor\":10}", "{\"cursor\":20}" }, seen);
        }

        public class ChunkedHandlers
        {
            private readonly List<string> seen;
            public ChunkedHandlers(List<string> seen) { this.seen = seen; }

            [WorkerTask("chunked")]
            public object Chunked(TaskContext ctx, int total)
            {
                lock (seen) seen.Add(ctx.PreviousOutput.ToString(Newtonsoft.Json.Formatting.None));
                var cursor = (ctx.PreviousOutput["cursor"] == null ? 0 : (int)ctx.PreviousOutput["cursor"]) + 10;
                if (cursor < total) return new InProgress(1, new { cursor });
                return new Dictionary<string, object> { { "done", total } };
            }
        }

        [Test]
        public void LogLinesReachTheTaskLogAndAnExceptionFailsTheAttempt()
        {
            var host = NewHost()
                .Add("chatty", ctx =>
                {
                    ctx.Log("step 1");
                    TaskContext.Current.Log("step 2");
                    return new { ok = true };
                })
                .Add("crash", ctx => { throw new InvalidOperationException("disk full"); });
            host.Start();
            var a = Server.Enqueue("chatty", new JObject());
            var b = Server.Enqueue("crash", new JObject());
            Server.WaitResult(a);
            Assert.AreEqual(new[] { "step 1", "step 2" }, Server.Logs(a));
            var failed = Server.WaitResult(b);
            Assert.AreEqual("FAILED", (string)failed["status"]);
            Assert.AreEqual("InvalidOperationException: disk full", (string)failed["reasonForIncompletion"]);
            var trace = Server.Logs(b).Single();
            StringAssert.StartsWith("System.InvalidOperationException: disk full", trace);
        }

        [Test]
        public void TerminalErrorIsPostedAsSuch()
        {
            var host = NewHost().AddHandlers<LodgeHandlers>();
            host.Start();
            var taskId = Server.Enqueue("lodge", new JObject { ["reference"] = "R1" });
            var result = Server.WaitResult(taskId);
            Assert.AreEqual("FAILED_WITH_TERMINAL_ERROR", (string)result["status"]);
            Assert.AreEqual("return R1 was already lodged", (string)result["reasonForIncompletion"]);
            var invalid = Server.Enqueue("lodge", new JObject { ["ref"] = "R1" });
            var refused = Server.WaitResult(invalid);
            Assert.AreEqual("FAILED_WITH_TERMINAL_ERROR", (string)refused["status"]);
            Assert.AreEqual("invalid input for lodge: reference: field required", (string)refused["reasonForIncompletion"]);
        }

        public class LodgeHandlers
        {
            [WorkerTask("lodge")]
            public static void Lodge(string reference)
            {
                throw new TerminalError("return " + reference + " was already lodged");
            }
        }

        [Test]
        public void LargeOutputIsUploadedAndOnlyItsPathPosted()
        {
            var host = NewHost(o => o.PayloadThreshold = 2048).Add("export", ctx =>
                new { rows = Enumerable.Repeat(new string('x', 100), (int)ctx.Input["n"]).ToArray() });
            host.Start();
            var small = Server.Enqueue("export", new JObject { ["n"] = 2 });
            var big = Server.Enqueue("export", new JObject { ["n"] = 100 });
            Assert.AreEqual(2, ((JArray)Server.WaitResult(small)["outputData"]["rows"]).Count);
            var result = Server.WaitResult(big);
            var path = (string)result["externalOutputPayloadStoragePath"];
            Assert.AreEqual("{}", result["outputData"].ToString(Newtonsoft.Json.Formatting.None));
            StringAssert.StartsWith("uploads/export/", path);
            var uploaded = (JObject)WorkerJson.Parse(Encoding.UTF8.GetString(Server.Upload(path)));
            Assert.AreEqual(100, ((JArray)uploaded["rows"]).Count);
        }

        [Test]
        public void TransientFailuresAreRetriedAnd4xxAreNot()
        {
            var host = NewHost().Add("t", ctx => new { v = 1 });
            Server.FailNextResults(503, 500, 429);
            host.Start();
            var first = Server.Enqueue("t", new JObject());
            Assert.AreEqual(1, (int)Server.WaitResult(first)["outputData"]["v"]);
            Assert.AreEqual(0, Server.PendingResultFailures);

            Server.FailNextResults(400);
            var second = Server.Enqueue("t", new JObject());
            Assert.Throws<TimeoutException>(() => Server.WaitResult(second, seconds: 1));
            Assert.AreEqual(1, host.Outbox.Dropped);
            // a later task is not stuck behind the refused one
            var third = Server.Enqueue("t", new JObject());
            Assert.AreEqual("COMPLETED", (string)Server.WaitResult(third)["status"]);
        }

        [Test]
        public void AStaleAttempt409IsDropped()
        {
            var gate = new ManualResetEventSlim(false);
            var host = NewHost().Add("s", ctx => { gate.Wait(5000); return new { v = 1 }; });
            host.Start();
            var taskId = Server.Enqueue("s", new JObject());
            Assert.IsTrue(Server.WaitFor(() => Server.Polls("s").Any(p => p.Returned > 0)));
            lock (Server.Gate) Server.Leases[taskId] = "someone-else"; // the lease moved meanwhile
            gate.Set();
            Assert.IsTrue(Server.WaitFor(() => host.Outbox.Dropped == 1));
            Assert.IsEmpty(Server.ResultsFor(taskId));
            Assert.AreEqual(0, host.Outbox.Count);
        }

        [Test]
        public void AResultSurvivesATaskApiRestart()
        {
            var gate = new ManualResetEventSlim(false);
            var running = new ManualResetEventSlim(false);
            var host = NewHost().Add("r", ctx => { running.Set(); gate.Wait(10000); return new { state = "done" }; });
            host.Start();
            var taskId = Server.Enqueue("r", new JObject());
            // the handler has the task (the fake records a poll's tasks before it has sent them)
            Assert.IsTrue(running.Wait(10000), "the task reached the handler");
            Server.Stop(); // the Task API goes away with the task in flight
            gate.Set(); // the handler completes while it is down
            Assert.IsTrue(Server.WaitFor(() => host.Outbox.Count == 1),
                "queued in memory: " + string.Join("\n", WorkerLinesCopy()));
            Thread.Sleep(1000); // several failed retries
            Assert.IsEmpty(Server.ResultsFor(taskId));
            Server.Start(); // back on the same port, same state
            Assert.AreEqual("done", (string)Server.WaitResult(taskId)["outputData"]["state"]);
            Assert.IsTrue(Server.WaitFor(() => host.Outbox.Count == 0));
        }

        [Test]
        public void StopFinishesTheTaskInHandAndPostsIt()
        {
            var host = NewHost(o => o.Threads = 2).Add("slow_job", ctx =>
            {
                ctx.Log("started");
                Thread.Sleep(1500);
                return new { slept = 1.5 };
            });
            var cancel = new CancellationTokenSource();
            var run = host.RunAsync(cancel.Token);
            var taskId = Server.Enqueue("slow_job", new JObject());
            Assert.IsTrue(Server.WaitFor(() => Server.Logs(taskId).Count == 1));
            cancel.Cancel();
            var stoppedAt = DateTime.UtcNow;
            Assert.IsTrue(run.Wait(TimeSpan.FromSeconds(15)), "RunAsync did not finish");
            Assert.IsTrue(run.Result, "not every result was posted");
            var result = Server.WaitResult(taskId, seconds: 1);
            Assert.AreEqual("COMPLETED", (string)result["status"]);
            Assert.AreEqual(1.5, (double)result["outputData"]["slept"]);
            var polls = Server.Polls("slow_job");
            Assert.AreEqual(2, polls[0].Count);
            // polling stopped: a poller that had checked for the stop just before it came
            // may still open one poll, at once; none opens later (the task takes 1.5 s)
            var late = polls.Where(p => p.Started >= stoppedAt).ToList();
            Assert.IsTrue(late.Count <= 2, "polls after the stop: " + late.Count);
            Assert.IsTrue(late.All(p => p.Started < stoppedAt.AddMilliseconds(250)), "a poll opened late");
            lock (WorkerLines) Assert.IsTrue(WorkerLines.Any(l => l.Contains("stopping")));
        }

        [Test]
        public void ADomainPollsItsOwnQueue()
        {
            var host = NewHost(o => o.Domain = "eu").Add("d", ctx => new { where = "eu" });
            host.Start();
            var taskId = Server.Enqueue("d", new JObject(), domain: "eu");
            Assert.AreEqual("eu", (string)Server.WaitResult(taskId)["outputData"]["where"]);
            Assert.IsTrue(Server.Polls("d").All(p => p.Domain == "eu"));
        }

        [Test]
        public void ATokenIsSentAndA401IsRetriedOnceWithAFreshOne()
        {
            var fetched = 0;
            Server.RequiredToken = "good";
            var host = NewHost(o => o.TokenProvider = new ExpiringTokenProvider(
                () => new ExpiringToken(Interlocked.Increment(ref fetched) == 1 ? "stale" : "good", DateTimeOffset.UtcNow.AddHours(1))))
                .Add("a", ctx => new { ok = true });
            host.Start();
            var taskId = Server.Enqueue("a", new JObject());
            Assert.AreEqual("COMPLETED", (string)Server.WaitResult(taskId)["status"]);
            Assert.AreEqual(2, fetched, "one fetch after the 401, then cached");
            lock (Server.Gate)
            {
                Assert.AreEqual("Bearer stale", Server.AuthHeaders[0]);
                Assert.IsTrue(Server.AuthHeaders.Skip(1).All(h => h == "Bearer good"));
            }
        }
    }
}
