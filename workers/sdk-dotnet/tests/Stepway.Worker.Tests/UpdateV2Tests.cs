using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using Newtonsoft.Json.Linq;
using NUnit.Framework;

namespace Stepway.Worker.Tests
{
    /// <summary>A final result goes to <c>POST /api/tasks/update-v2</c>, which answers with the
    /// next task of the type (executed in the same slot) or 204 (poll as usual): a busy worker
    /// makes about one request per task (as the Python SDK's workers/sdk/tests/test_loop.py).</summary>
    [TestFixture]
    public class UpdateV2Tests : WorkerFixture
    {
        private const string Trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

        public class Doubler
        {
            [WorkerTask("double")]
            public object Double(TaskContext ctx, int n) => new { doubled = n * 2, trace = ctx.TraceParent };
        }

        [Test]
        public void ABusyWorkerMakesAboutOneRequestPerTask()
        {
            var host = NewHost(o => o.Threads = 2).AddHandlers(new Doubler());
            var ids = Enumerable.Range(0, 12).Select(i => Server.Enqueue("double", new JObject { ["n"] = i }, traceparent: Trace)).ToList();
            host.Start();
            for (var i = 0; i < ids.Count; i++)
            {
                var result = Server.WaitResult(ids[i]);
                Assert.AreEqual("COMPLETED", (string)result["status"]);
                // the same binding and TaskContext whether polled or handed out by update-v2
                Assert.AreEqual(i * 2, (int)result["outputData"]["doubled"]);
                Assert.AreEqual(Trace, (string)result["outputData"]["trace"]);
            }
            var polls = Server.Polls("double");
            var posts = Server.AllResultPosts();
            // one result post per task, each to update-v2 and with the task's traceparent
            Assert.AreEqual(ids.Count, posts.Count);
            Assert.IsTrue(posts.All(p => p.Path == "/api/tasks/update-v2" && p.Answer == 200));
            Assert.IsTrue(posts.All(p => p.TraceParents.SequenceEqual(new[] { Trace })));
            // the tasks came with the results, not by polls
            var handed = posts.Count(p => p.HandedOut != null);
            Assert.AreEqual(ids.Count, handed + polls.Sum(p => p.Returned));
            Assert.That(handed, Is.GreaterThanOrEqualTo(ids.Count - 4));
            Assert.That(polls.Count, Is.LessThanOrEqualTo(4), "polls: " + polls.Count);
            // update-v2 hands out only to a slot that just freed itself: never more than 2 held
            Assert.IsTrue(polls.All(p => p.Count + p.HeldAtPoll <= 2));
        }

        [Test]
        public void ATaskHandedBackIsExecutedAndItsResultPosted()
        {
            var release = new ManualResetEventSlim(false);
            var seen = new List<string>();
            var host = NewHost().Add("chain", ctx =>
            {
                lock (seen) seen.Add(ctx.TaskId);
                if ((string)ctx.Input["name"] == "first") release.Wait(5000);
                return new { name = (string)ctx.Input["name"] };
            });
            host.Start();
            var first = Server.Enqueue("chain", new JObject { ["name"] = "first" }, traceparent: Trace);
            Assert.IsTrue(Server.WaitFor(() => { lock (seen) return seen.Count == 1; }), "the first task reached the handler");
            // queued while the first runs: the poller waits for the slot, update-v2 takes it
            var second = Server.Enqueue("chain", new JObject { ["name"] = "second" });
            release.Set();
            Assert.AreEqual("second", (string)Server.WaitResult(second)["outputData"]["name"]);
            var firstPost = Server.ResultPostsFor(first).Single();
            Assert.AreEqual("/api/tasks/update-v2", firstPost.Path);
            Assert.AreEqual(second, firstPost.HandedOut);
            Assert.AreEqual(new[] { Trace }, firstPost.TraceParents);
            var secondPost = Server.ResultPostsFor(second).Single();
            Assert.AreEqual("/api/tasks/update-v2", secondPost.Path);
            Assert.IsEmpty(secondPost.TraceParents);
            Assert.AreEqual(1, Server.Polls("chain").Sum(p => p.Returned));
            lock (seen) Assert.AreEqual(new[] { first, second }, seen);
        }

        [Test]
        public void A204FallsBackToPolling()
        {
            var host = NewHost().Add("sparse", ctx => new { ok = true });
            host.Start();
            var first = Server.Enqueue("sparse", new JObject());
            Server.WaitResult(first);
            Assert.IsTrue(Server.WaitFor(() => Server.ResultPostsFor(first).Count == 1));
            var post = Server.ResultPostsFor(first).Single();
            Assert.AreEqual("/api/tasks/update-v2", post.Path);
            Assert.IsNull(post.HandedOut, "nothing was queued: 204");
            Thread.Sleep(300); // well past update-v2's 100 ms: the poller has the slot again
            var second = Server.Enqueue("sparse", new JObject());
            Assert.AreEqual("COMPLETED", (string)Server.WaitResult(second)["status"]);
            Assert.AreEqual(2, Server.Polls("sparse").Sum(p => p.Returned));
        }

        [Test]
        public void InProgressResultsAndAFailedTryGoToThePlainPost()
        {
            var host = NewHost().AddHandlers(new LoopTests.ChunkedHandlers(new List<string>()));
            host.Start();
            var taskId = Server.Enqueue("chunked", new JObject { ["total"] = 20 });
            Server.WaitResult(taskId, "COMPLETED");
            Assert.IsTrue(Server.WaitFor(() => Server.ResultPostsFor(taskId).Count == 2));
            Assert.AreEqual(new[] { "IN_PROGRESS /api/tasks", "COMPLETED /api/tasks/update-v2" },
                Server.ResultPostsFor(taskId).Select(p => p.Status + " " + p.Path));

            // a try that fails is retried by the outbox with the plain post, which takes no task
            Server.FailNextResults(503);
            var retried = Server.Enqueue("chunked", new JObject { ["total"] = 5 }, traceparent: Trace);
            Server.WaitResult(retried, "COMPLETED");
            Assert.IsTrue(Server.WaitFor(() => host.Outbox.Count == 0));
            var posts = Server.ResultPostsFor(retried);
            Assert.AreEqual(new[] { "/api/tasks/update-v2 503", "/api/tasks 200" }, posts.Select(p => p.Path + " " + p.Answer));
            Assert.IsTrue(posts.All(p => p.TraceParents.SequenceEqual(new[] { Trace })));
        }

        [Test]
        public void WhileStoppingTheResultTakesNoTask()
        {
            var started = new ManualResetEventSlim(false);
            var host = NewHost().Add("last", ctx => { started.Set(); Thread.Sleep(800); return new { ok = true }; });
            var cancel = new CancellationTokenSource();
            var run = host.RunAsync(cancel.Token);
            var taskId = Server.Enqueue("last", new JObject());
            Assert.IsTrue(started.Wait(5000));
            var left = Server.Enqueue("last", new JObject());
            cancel.Cancel();
            Assert.IsTrue(run.Wait(TimeSpan.FromSeconds(15)), "RunAsync did not finish");
            Assert.IsTrue(run.Result, "not every result was posted");
            var post = Server.ResultPostsFor(taskId).Single();
            Assert.AreEqual("/api/tasks", post.Path);
            Assert.AreEqual(200, post.Answer);
            Assert.IsEmpty(Server.ResultPostsFor(left), "the queued task stays for another worker");
        }
    }
}
