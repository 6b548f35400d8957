using System.Collections.Generic;
using System.Linq;
using Newtonsoft.Json.Linq;
using NUnit.Framework;

namespace Stepway.Worker.Tests
{
    /// <summary>A task's <c>traceparent</c> goes back, unchanged, as the <c>traceparent</c> header
    /// of every post of its result (as the Python SDK's does without an OpenTelemetry SDK,
    /// workers/sdk/tests/test_tracing.py); a missing or malformed one sends no header.</summary>
    [TestFixture]
    public class TraceContextTests : WorkerFixture
    {
        private const string Valid = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

        [Test]
        public void AValidTraceParentIsTheHeaderOfTheResultPostAndSeenByTheHandler()
        {
            var seen = new List<string>();
            var host = NewHost().Add("traced", ctx =>
            {
                lock (seen) seen.Add(ctx.TraceParent);
                return new { ok = true };
            });
            host.Start();
            var taskId = Server.Enqueue("traced", new JObject(), traceparent: Valid);
            Assert.AreEqual("COMPLETED", (string)Server.WaitResult(taskId)["status"]);
            var post = Server.ResultPostsFor(taskId).Single();
            Assert.AreEqual(new[] { Valid }, post.TraceParents);
            Assert.AreEqual(new[] { Valid }, seen);
            // sampled or not, the flags are passed on as they came
            var unsampled = Valid.Substring(0, 53) + "00";
            var other = Server.Enqueue("traced", new JObject(), traceparent: unsampled);
            Server.WaitResult(other);
            Assert.AreEqual(new[] { unsampled }, Server.ResultPostsFor(other).Single().TraceParents);
        }

        [Test]
        public void AMissingOrMalformedTraceParentSendsNoHeader()
        {
            var malformed = new JToken[]
            {
                "",
                "garbage",
                "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01", // uppercase hex
                "00-00000000000000000000000000000000-b7ad6b7169203331-01", // trace id all zeros
                "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", // parent id all zeros
                "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", // the forbidden version
                "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", // a version not taken
                Valid + "-extra", // version 00 has nothing after the flags
                " " + Valid,
                "00-0af7651916cd43dd8448eb211c80319-cb7ad6b7169203331-01", // dashes misplaced
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0g",
                "00_0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331_01",
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\nx-injected: 1",
                12,
                new JObject { ["traceparent"] = Valid },
                JValue.CreateNull(),
            };
            var seen = new List<string>();
            var host = NewHost().Add("untraced", ctx =>
            {
                lock (seen) seen.Add(ctx.TraceParent);
                return new { ok = true };
            });
            host.Start();
            var ids = malformed.Select(value => Server.Enqueue("untraced", new JObject(), traceparent: value)).ToList();
            ids.Add(Server.Enqueue("untraced", new JObject())); // none at all
            foreach (var id in ids)
            {
                Assert.AreEqual("COMPLETED", (string)Server.WaitResult(id)["status"], id);
                var post = Server.ResultPostsFor(id).Single();
                Assert.IsEmpty(post.TraceParents, id + ": " + string.Join(", ", post.TraceParents));
            }
            lock (seen) Assert.IsTrue(seen.Count == ids.Count && seen.All(s => s == null), string.Join(", ", seen));
        }

        [Test]
        public void ARetriedPostStillCarriesIt()
        {
            var host = NewHost().Add("retried", ctx => new { v = 1 });
            Server.FailNextResults(503, 500);
            host.Start();
            var taskId = Server.Enqueue("retried", new JObject(), traceparent: Valid);
            Assert.AreEqual(1, (int)Server.WaitResult(taskId)["outputData"]["v"]);
            var posts = Server.ResultPostsFor(taskId);
            Assert.AreEqual(new[] { 503, 500, 200 }, posts.Select(p => p.Answer).ToArray());
            Assert.IsTrue(posts.All(p => p.TraceParents.SequenceEqual(new[] { Valid })),
                string.Join(" | ", posts.Select(p => string.Join(", ", p.TraceParents))));
        }

        [Test]
        public void EveryPostOfACalledBackTaskCarriesIt()
        {
            var host = NewHost().AddHandlers(new LoopTests.ChunkedHandlers(new List<string>()));
            host.Start();
            var taskId = Server.Enqueue("chunked", new JObject { ["total"] = 20 }, traceparent: Valid);
            Server.WaitResult(taskId, "COMPLETED");
            var posts = Server.ResultPostsFor(taskId);
            Assert.AreEqual(new[] { "IN_PROGRESS", "COMPLETED" }, posts.Select(p => p.Status).ToArray());
            Assert.IsTrue(posts.All(p => p.TraceParents.SequenceEqual(new[] { Valid })));
        }

        [Test]
        public void ALargeOutputIsUploadedAndItsPathPostedWithIt()
        {
            var host = NewHost(o => o.PayloadThreshold = 1024).Add("big", ctx =>
                new { rows = Enumerable.Repeat(new string('x', 100), 50).ToArray() });
            host.Start();
            var taskId = Server.Enqueue("big", new JObject(), traceparent: Valid);
            var result = Server.WaitResult(taskId);
            StringAssert.StartsWith("uploads/big/", (string)result["externalOutputPayloadStoragePath"]);
            Assert.AreEqual(new[] { Valid }, Server.ResultPostsFor(taskId).Single().TraceParents);
        }

        [Test]
        public void TheClientSendsAWellFormedTraceParentOnly()
        {
            var taskId = Server.Enqueue("direct", new JObject());
            var other = Server.Enqueue("direct", new JObject());
            using (var client = new TaskClient(Server.Url))
            {
                Assert.AreEqual(2, client.Poll("direct", "test-worker", 2, 100).Count);
                client.Update(new JObject { ["taskId"] = taskId, ["status"] = "COMPLETED", ["workerId"] = "test-worker" }, Valid);
                client.Update(new JObject { ["taskId"] = other, ["status"] = "COMPLETED", ["workerId"] = "test-worker" }, "not-a-traceparent");
            }
            Assert.AreEqual(new[] { Valid }, Server.ResultPostsFor(taskId).Single().TraceParents);
            Assert.IsEmpty(Server.ResultPostsFor(other).Single().TraceParents);
        }
    }
}
