using System;
using System.Linq;
using System.Threading;
using Newtonsoft.Json;
using Stepway.Worker;

namespace Stepway.Worker.E2e
{
    /// <summary>The task types tests/e2e/test_dotnet_worker.py runs against `stepway dev`
    /// (and tests/e2e/test_tracing.py against a traced platform).</summary>
    public class E2eHandlers
    {
        public class GreetInput
        {
            [JsonProperty(Required = Required.Always)]
            public string Name { get; set; }
            public int Times { get; set; } = 1;
        }

        public class Greeting
        {
            public string Message { get; set; }
            public string Worker { get; set; }
        }

        [WorkerTask("cs_greet")]
        public Greeting Greet(GreetInput input, TaskContext ctx)
        {
            ctx.Log("greeting " + input.Name);
            var message = string.Join(" ", Enumerable.Repeat("Hello, " + input.Name + "!", input.Times));
            return new Greeting { Message = message, Worker = "dotnet" };
        }

        [WorkerTask("cs_count_words")]
        public object CountWords(string text) =>
            new { words = text.Split(new[] { ' ' }, StringSplitOptions.RemoveEmptyEntries).Length, text };

        /// <summary>Works in chunks of 10 with an IN_PROGRESS callback after each.</summary>
        [WorkerTask("cs_chunked")]
        public object Chunked(TaskContext ctx, int total)
        {
            var cursor = (ctx.PreviousOutput["cursor"] == null ? 0 : (int)ctx.PreviousOutput["cursor"]) + 10;
            ctx.Log("cursor " + cursor);
            if (cursor < total) return new InProgress(1, new { cursor });
            return new { done = total, polls = ctx.PollCount };
        }

        [WorkerTask("cs_reject")]
        public void Reject(string reference)
        {
            throw new TerminalError("return " + reference + " was already lodged");
        }

        /// <summary>Fails its first attempt (retried by the engine), completes the next.</summary>
        [WorkerTask("cs_flaky")]
        public object Flaky(TaskContext ctx)
        {
            if (ctx.Attempt == 1) throw new TimeoutException("the ledger did not answer");
            return new { attempt = ctx.Attempt };
        }

        /// <summary>Echoes its text and the trace context it was handed.</summary>
        [WorkerTask("cs_traced_echo")]
        public object TracedEcho(string text, TaskContext ctx) => new { said = text, traceparent = ctx.TraceParent };

        [WorkerTask("cs_slow")]
        public object Slow(TaskContext ctx, double seconds)
        {
            ctx.Log("started");
            Thread.Sleep(TimeSpan.FromSeconds(seconds));
            return new { slept = seconds };
        }
    }

    public static class Program
    {
        /// <summary><c>mono E2eWorker.exe [taskType ...]</c>: serve these types (default: all).</summary>
        public static int Main(string[] args)
        {
            var options = WorkerOptions.FromEnvironment();
            if (args.Length > 0) options.TaskTypes = args;
            using (var host = new WorkerHost(options))
            {
                host.AddHandlers(typeof(Program).Assembly);
                return host.Run() ? 0 : 1;
            }
        }
    }
}
