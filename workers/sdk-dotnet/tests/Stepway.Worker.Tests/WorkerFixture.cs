using System;
using System.Collections.Generic;
using NUnit.Framework;

namespace Stepway.Worker.Tests
{
    /// <summary>A fake Task API per test and hosts with fast settings, stopped after the test.</summary>
    public abstract class WorkerFixture
    {
        protected FakeTaskApi Server;
        protected readonly List<string> WorkerLines = new List<string>();
        private readonly List<WorkerHost> hosts = new List<WorkerHost>();

        [SetUp]
        public void StartServer()
        {
            Server = new FakeTaskApi();
            lock (WorkerLines) WorkerLines.Clear();
        }

        [TearDown]
        public void StopAll()
        {
            foreach (var host in hosts) host.Stop(TimeSpan.FromSeconds(2));
            hosts.Clear();
            Server.Dispose();
        }

        protected WorkerOptions FastOptions()
        {
            return new WorkerOptions
            {
                ServerUrl = Server.Url,
                WorkerId = "test-worker",
                LongPollMs = 200,
                PollInterval = TimeSpan.FromMilliseconds(50),
                RetryInitial = TimeSpan.FromMilliseconds(50),
                RetryMax = TimeSpan.FromMilliseconds(200),
                ShutdownGrace = TimeSpan.FromSeconds(5),
                HttpTimeout = TimeSpan.FromSeconds(5),
                Logger = (level, line) => { lock (WorkerLines) WorkerLines.Add(level + " " + line); },
            };
        }

        /// <summary>The worker's log lines so far (for failure messages).</summary>
        protected List<string> WorkerLinesCopy()
        {
            lock (WorkerLines) return new List<string>(WorkerLines);
        }

        /// <summary>A host (not started) that the teardown stops.</summary>
        protected WorkerHost NewHost(Action<WorkerOptions> configure = null)
        {
            var options = FastOptions();
            if (configure != null) configure(options);
            var host = new WorkerHost(options);
            hosts.Add(host);
            return host;
        }

        protected static Newtonsoft.Json.Linq.JObject Json(string text) =>
            (Newtonsoft.Json.Linq.JObject)WorkerJson.Parse(text.Replace('\'', '"'));
    }
}
