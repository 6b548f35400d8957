using System;
using System.Collections.Generic;
using NUnit.Framework;

namespace Stepway.Worker.Tests
{
    [TestFixture]
    public class OptionsTests
    {
        public class Typed
        {
            [WorkerTask("parse_pdf", Threads = 4, PollIntervalSeconds = 0.5, Domain = "eu", PayloadThreshold = 100)]
            public static void ParsePdf() { }

            [WorkerTask("plain")]
            public static void Plain() { }
        }

        private static TaskHandler Handler(string type)
        {
            foreach (var h in TaskHandler.FromType(typeof(Typed))) if (h.TaskType == type) return h;
            throw new InvalidOperationException(type);
        }

        [Test]
        public void OptionsComeFromTheEnvironmentWithPerTypeOverrides()
        {
            var env = new Dictionary<string, string>
            {
                { "STEPWAY_SERVER_URL", "https://tasks.example.com" },
                { "STEPWAY_WORKER_ID", "w-1" },
                { "STEPWAY_THREADS", "2" },
                { "STEPWAY_POLL_INTERVAL", "0.25" },
                { "STEPWAY_DOMAIN", "us" },
                { "STEPWAY_LONG_POLL_MS", "3000" },
                { "STEPWAY_PAYLOAD_THRESHOLD", "2048" },
                { "STEPWAY_SHUTDOWN_GRACE", "12" },
                { "STEPWAY_RETRY_MAX", "4" },
                { "STEPWAY_TASK_PARSE_PDF_THREADS", "8" },
                { "STEPWAY_TASK_PARSE_PDF_DOMAIN", "" },
            };
            var options = WorkerOptions.FromEnvironment(env);
            Assert.AreEqual("https://tasks.example.com", options.ServerUrl);
            Assert.AreEqual("w-1", options.WorkerId);
            Assert.AreEqual(2, options.Threads);
            Assert.AreEqual(TimeSpan.FromMilliseconds(250), options.PollInterval);
            Assert.AreEqual("us", options.Domain);
            Assert.AreEqual(3000, options.LongPollMs);
            Assert.AreEqual(2048, options.PayloadThreshold);
            Assert.AreEqual(TimeSpan.FromSeconds(12), options.ShutdownGrace);
            Assert.AreEqual(TimeSpan.FromSeconds(4), options.RetryMax);

            // STEPWAY_TASK_<TYPE>_* > [WorkerTask] options > WorkerOptions
            var pdf = options.ForType(Handler("parse_pdf"));
            Assert.AreEqual(8, pdf.Threads);
            Assert.IsNull(pdf.Domain, "an empty _DOMAIN means none");
            Assert.AreEqual(TimeSpan.FromMilliseconds(500), pdf.PollInterval);
            Assert.AreEqual(100, pdf.PayloadThreshold);
            var plain = options.ForType(Handler("plain"));
            Assert.AreEqual(2, plain.Threads);
            Assert.AreEqual("us", plain.Domain);
            Assert.AreEqual(2048, plain.PayloadThreshold);
        }

        [Test]
        public void DefaultsAndBadValues()
        {
            var options = WorkerOptions.FromEnvironment(new Dictionary<string, string>());
            Assert.AreEqual("http://127.0.0.1:8080", options.ServerUrl);
            Assert.AreEqual(1, options.Threads);
            Assert.AreEqual(5000, options.LongPollMs);
            Assert.AreEqual(10240, options.PayloadThreshold);
            StringAssert.Contains("-", options.WorkerId);
            var error = Assert.Throws<ArgumentException>(() =>
                WorkerOptions.FromEnvironment(new Dictionary<string, string> { { "STEPWAY_THREADS", "two" } }));
            Assert.AreEqual("STEPWAY_THREADS='two' is not a number", error.Message);
            error = Assert.Throws<ArgumentException>(() =>
                WorkerOptions.FromEnvironment(new Dictionary<string, string> { { "STEPWAY_SERVER_URL", "ftp://x" } }));
            StringAssert.Contains("must be http(s)", error.Message);
            Assert.AreEqual("STEPWAY_TASK_FETCH_BANK_FEED_", WorkerOptions.TypeEnvPrefix("fetch.bank-feed"));
        }

        [Test]
        public void TokenFromTheEnvironment()
        {
            Assert.IsNull(TokenProviders.FromEnvironment(new Dictionary<string, string>()).GetToken());
            Assert.AreEqual("s3cret", TokenProviders.FromEnvironment(new Dictionary<string, string> { { "STEPWAY_TOKEN", "s3cret" } }).GetToken());
            var error = Assert.Throws<InvalidOperationException>(() =>
                TokenProviders.FromEnvironment(new Dictionary<string, string> { { "STEPWAY_API_SCOPE", "api://stepway/.default" } }));
            StringAssert.Contains("WorkerOptions.TokenProvider", error.Message);
        }

        [Test]
        public void AnExpiringTokenIsRefreshedBeforeItExpires()
        {
            var now = new DateTimeOffset(2024, 1, 1, 0, 0, 0, TimeSpan.Zero);
            var fetched = 0;
            var provider = new ExpiringTokenProvider(
                () => new ExpiringToken("t" + (++fetched), now.AddMinutes(60)),
                TimeSpan.FromMinutes(5),
                () => now);
            Assert.AreEqual("t1", provider.GetToken());
            now = now.AddMinutes(54);
            Assert.AreEqual("t1", provider.GetToken());
            now = now.AddMinutes(2); // within 5 minutes of expiry
            Assert.AreEqual("t2", provider.GetToken());
            provider.Invalidate();
            Assert.AreEqual("t3", provider.GetToken());
        }
    }
}
