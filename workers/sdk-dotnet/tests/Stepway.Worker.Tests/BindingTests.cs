using System;
using System.Collections.Generic;
using System.Threading.Tasks;
using Newtonsoft.Json;
using Newtonsoft.Json.Linq;
using NUnit.Framework;

namespace Stepway.Worker.Tests
{
    /// <summary>Input binding and result mapping without HTTP (TaskHandler.Execute).</summary>
    [TestFixture]
    public class BindingTests
    {
        public class ParseInput
        {
            [JsonProperty(Required = Required.Always)]
            public string Url { get; set; }
            public int MaxPages { get; set; } = 100;
        }

        public class ParseResult
        {
            public string Text { get; set; }
            public int Pages { get; set; }
            [JsonProperty("page_count_raw")]
            public int Raw { get; set; }
            public Dictionary<string, int> WordsByPage { get; set; }
        }

        public class Handlers
        {
            [WorkerTask("parse_pdf")]
            public ParseResult ParsePdf(ParseInput input) =>
                new ParseResult
                {
                    Text = "text of " + input.Url,
                    Pages = input.MaxPages,
                    Raw = 7,
                    WordsByPage = new Dictionary<string, int> { { "Page1", 3 } },
                };

            [WorkerTask("by_name")]
            public object ByName(TaskContext ctx, string documentUrl, int pageLimit, double factor = 1.5, bool? strict = null) =>
                new Dictionary<string, object>
                {
                    { "documentUrl", documentUrl }, { "pageLimit", pageLimit }, { "factor", factor },
                    { "strict", strict }, { "task", ctx.TaskId },
                };

            [WorkerTask("whole_dict")]
            public IDictionary<string, object> WholeDict(Dictionary<string, object> input) =>
                new Dictionary<string, object> { { "keys", string.Join(",", input.Keys) } };

            [WorkerTask("scalar")]
            public int Scalar(int a, int b) => a + b;

            [WorkerTask("nothing")]
            public void Nothing() { }

            [WorkerTask("async_typed")]
            public async Task<ParseResult> AsyncTyped(string url)
            {
                await Task.Delay(10);
                return new ParseResult { Text = url, Pages = 1 };
            }

            [WorkerTask("async_void")]
            public async Task AsyncPlain()
            {
                await Task.Delay(10);
            }

            [WorkerTask("async_fails")]
            public async Task<int> AsyncFails()
            {
                await Task.Delay(10);
                throw new TerminalError("no such customer");
            }
        }

        private static Dictionary<string, TaskHandler> handlers;

        private static Outcome Run(string taskType, JObject input)
        {
            if (handlers == null)
            {
                handlers = new Dictionary<string, TaskHandler>();
                foreach (var h in TaskHandler.FromObject(new Handlers())) handlers[h.TaskType] = h;
            }
            var ctx = new TaskContext("task-1", taskType) { Input = input };
            return handlers[taskType].Execute(ctx);
        }

        private static string Compact(JToken token) => token.ToString(Formatting.None);

        [Test]
        public void AModelParameterTakesTheWholeInputAndATypedResultIsCamelCased()
        {
            var outcome = Run("parse_pdf", new JObject { ["url"] = "https://x/a.pdf", ["maxPages"] = 3 });
            Assert.AreEqual("COMPLETED", outcome.Status);
            Assert.AreEqual(
                "{\"text\":\"text of https://x/a.pdf\",\"pages\":3,\"page_count_raw\":7,\"wordsByPage\":{\"Page1\":3}}",
                Compact(outcome.Output));
        }

        [Test]
        public void AMissingRequiredModelFieldIsATerminalErrorNamingIt()
        {
            var outcome = Run("parse_pdf", new JObject { ["maxPages"] = 3 });
            Assert.AreEqual("FAILED_WITH_TERMINAL_ERROR", outcome.Status);
            StringAssert.StartsWith("invalid input for parse_pdf: ", outcome.Reason);
            StringAssert.Contains("'url'", outcome.Reason);
        }

        [Test]
        public void ParametersBindByNameSnakeCaseOrIgnoringCaseWithDefaults()
        {
            var camel = Run("by_name", new JObject { ["documentUrl"] = "u", ["pageLimit"] = "4" });
            Assert.AreEqual("{\"documentUrl\":\"u\",\"pageLimit\":4,\"factor\":1.5,\"strict\":null,\"task\":\"task-1\"}", Compact(camel.Output));
            var snake = Run("by_name", new JObject { ["document_url"] = "s", ["PAGELIMIT"] = 2, ["factor"] = 2, ["strict"] = true });
            Assert.AreEqual("{\"documentUrl\":\"s\",\"pageLimit\":2,\"factor\":2.0,\"strict\":true,\"task\":\"task-1\"}", Compact(snake.Output));
        }

        [Test]
        public void MissingOrInvalidParametersAreATerminalErrorNamingEach()
        {
            var outcome = Run("by_name", new JObject { ["pageLimit"] = "many", ["strict"] = "perhaps" });
            Assert.AreEqual("FAILED_WITH_TERMINAL_ERROR", outcome.Status);
            StringAssert.StartsWith("invalid input for by_name: documentUrl: field required; pageLimit: ", outcome.Reason);
            StringAssert.Contains("; strict: ", outcome.Reason);
            var nulled = Run("by_name", new JObject { ["documentUrl"] = "u", ["pageLimit"] = null });
            Assert.AreEqual("invalid input for by_name: pageLimit: must not be null", nulled.Reason);
        }

        [Test]
        public void ADictionaryParameterTakesTheWholeInput()
        {
            var outcome = Run("whole_dict", new JObject { ["a"] = 1, ["b"] = new JObject() });
            Assert.AreEqual("{\"keys\":\"a,b\"}", Compact(outcome.Output));
        }

        [Test]
        public void ScalarAndVoidResults()
        {
            Assert.AreEqual("{\"result\":5}", Compact(Run("scalar", new JObject { ["a"] = 2, ["b"] = 3 }).Output));
            var nothing = Run("nothing", new JObject { ["ignored"] = 1 });
            Assert.AreEqual("COMPLETED", nothing.Status);
            Assert.AreEqual("{}", Compact(nothing.Output));
        }

        [Test]
        public void AsyncHandlersAreAwaited()
        {
            Assert.AreEqual("{\"text\":\"u\",\"pages\":1,\"page_count_raw\":0,\"wordsByPage\":null}",
                Compact(Run("async_typed", new JObject { ["url"] = "u" }).Output));
            var plain = Run("async_void", new JObject());
            Assert.AreEqual("COMPLETED", plain.Status);
            Assert.AreEqual("{}", Compact(plain.Output));
            var failed = Run("async_fails", new JObject());
            Assert.AreEqual("FAILED_WITH_TERMINAL_ERROR", failed.Status);
            Assert.AreEqual("no such customer", failed.Reason);
        }

        [Test]
        public void DateLikeStringsStayStrings()
        {
            var handler = TaskHandler.FromFunc("echo", ctx => ctx.Input);
            var input = (JObject)WorkerJson.Parse("{\"at\":\"2024-01-31T10:00:00Z\"}");
            var outcome = handler.Execute(new TaskContext("t", "echo") { Input = input });
            Assert.AreEqual("{\"at\":\"2024-01-31T10:00:00Z\"}", Compact(outcome.Output));
        }

        [Test]
        public void TwoHandlersForOneTypeAreRefused()
        {
            var host = new WorkerHost(new WorkerOptions());
            host.Add("x", ctx => null);
            var error = Assert.Throws<ArgumentException>(() => host.Add("x", ctx => null));
            StringAssert.Contains("task type 'x' already has a handler", error.Message);
        }
    }
}
