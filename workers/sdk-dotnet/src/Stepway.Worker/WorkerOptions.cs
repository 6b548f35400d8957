using System;
using System.Collections;
using System.Collections.Generic;
using System.Globalization;
using System.Text.RegularExpressions;

namespace Stepway.Worker
{
    /// <summary>
    /// Everything a worker process runs with. <see cref="FromEnvironment"/> reads the same
    /// variables as the Python SDK (<c>workers/sdk/README.md</c>): <c>STEPWAY_SERVER_URL</c>,
    /// <c>STEPWAY_WORKER_ID</c>, <c>STEPWAY_THREADS</c>, <c>STEPWAY_POLL_INTERVAL</c> (seconds),
    /// <c>STEPWAY_DOMAIN</c>, <c>STEPWAY_LONG_POLL_MS</c>, <c>STEPWAY_PAYLOAD_THRESHOLD</c> (bytes),
    /// <c>STEPWAY_SHUTDOWN_GRACE</c> (seconds), <c>STEPWAY_RETRY_MAX</c> (seconds), the token
    /// (<c>STEPWAY_TOKEN</c>; <c>STEPWAY_API_SCOPE</c> needs a <see cref="TokenProvider"/>),
    /// and per task type <c>STEPWAY_TASK_&lt;TYPE&gt;_THREADS|_POLL_INTERVAL|_DOMAIN|_PAYLOAD_THRESHOLD</c>.
    /// Properties set after <see cref="FromEnvironment"/> win over the environment.
    /// Precedence per type: <c>STEPWAY_TASK_&lt;TYPE&gt;_*</c> &gt; <c>[WorkerTask]</c> options &gt;
    /// these options &gt; <c>STEPWAY_*</c> &gt; defaults.
    /// </summary>
    public sealed class WorkerOptions
    {
        public const string DefaultServerUrl = "http://127.0.0.1:8080";
        public const int DefaultPayloadThreshold = 10 * 1024;

        /// <summary>Task API base URL.</summary>
        public string ServerUrl { get; set; } = DefaultServerUrl;

        /// <summary>Sent with polls and results (the lease holder); default <c>&lt;host&gt;-&lt;pid&gt;</c>.</summary>
        public string WorkerId { get; set; } = DefaultWorkerId();

        /// <summary>Handler threads per task type.</summary>
        public int Threads { get; set; } = 1;

        /// <summary>Longest wait between two empty polls (the wait starts at 1 ms and doubles).</summary>
        public TimeSpan PollInterval { get; set; } = TimeSpan.FromSeconds(1);

        /// <summary>Poll <c>&lt;domain&gt;-&lt;type&gt;</c> queues.</summary>
        public string Domain { get; set; }

        /// <summary>Server-side long-poll timeout of a batch poll, milliseconds (the Task API allows at most 5000).</summary>
        public int LongPollMs { get; set; } = 5000;

        /// <summary>An output whose JSON is larger than this many bytes is uploaded, not posted.</summary>
        public int PayloadThreshold { get; set; } = DefaultPayloadThreshold;

        /// <summary>At shutdown: how long in-flight handlers and queued results get.</summary>
        public TimeSpan ShutdownGrace { get; set; } = TimeSpan.FromSeconds(30);

        /// <summary>First delay between two tries of a result post (it doubles).</summary>
        public TimeSpan RetryInitial { get; set; } = TimeSpan.FromMilliseconds(100);

        /// <summary>Longest delay between two tries of a result post.</summary>
        public TimeSpan RetryMax { get; set; } = TimeSpan.FromSeconds(10);

        /// <summary>HTTP timeout of every call except the long poll (which adds its own wait).</summary>
        public TimeSpan HttpTimeout { get; set; } = TimeSpan.FromSeconds(30);

        /// <summary>The bearer token source; null = from the environment (<c>STEPWAY_TOKEN</c>, else none).</summary>
        public ITokenProvider TokenProvider { get; set; }

        /// <summary>Run only these task types (null = every registered one).</summary>
        public ICollection<string> TaskTypes { get; set; }

        /// <summary>Where the worker's own log lines go (default: standard error).</summary>
        public Action<WorkerLogLevel, string> Logger { get; set; }

        /// <summary>The environment the per-type overrides and the token are read from
        /// (<see cref="FromEnvironment"/> fills it).</summary>
        public IDictionary<string, string> Environment { get; set; } = new Dictionary<string, string>();

        public static string DefaultWorkerId()
        {
            string host;
            try { host = System.Net.Dns.GetHostName(); }
            catch (Exception) { host = System.Environment.MachineName; }
            return host + "-" + System.Diagnostics.Process.GetCurrentProcess().Id.ToString(CultureInfo.InvariantCulture);
        }

        /// <summary>Options from the process environment (or from <paramref name="env"/>).</summary>
        public static WorkerOptions FromEnvironment(IDictionary<string, string> env = null)
        {
            if (env == null)
            {
                env = new Dictionary<string, string>();
                foreach (DictionaryEntry entry in System.Environment.GetEnvironmentVariables())
                    env[(string)entry.Key] = (string)entry.Value;
            }
            var options = new WorkerOptions { Environment = new Dictionary<string, string>(env) };
            var url = Get(env, "STEPWAY_SERVER_URL");
            if (url != null) options.ServerUrl = url;
            var workerId = Get(env, "STEPWAY_WORKER_ID");
            if (workerId != null) options.WorkerId = workerId;
            var domain = Get(env, "STEPWAY_DOMAIN");
            if (domain != null) options.Domain = domain;
            var threads = ParseInt(env, "STEPWAY_THREADS");
            if (threads.HasValue) options.Threads = threads.Value;
            var interval = ParseDouble(env, "STEPWAY_POLL_INTERVAL");
            if (interval.HasValue) options.PollInterval = TimeSpan.FromSeconds(interval.Value);
            var longPoll = ParseInt(env, "STEPWAY_LONG_POLL_MS");
            if (longPoll.HasValue) options.LongPollMs = longPoll.Value;
            var threshold = ParseInt(env, "STEPWAY_PAYLOAD_THRESHOLD");
            if (threshold.HasValue) options.PayloadThreshold = threshold.Value;
            var grace = ParseDouble(env, "STEPWAY_SHUTDOWN_GRACE");
            if (grace.HasValue) options.ShutdownGrace = TimeSpan.FromSeconds(grace.Value);
            var retryMax = ParseDouble(env, "STEPWAY_RETRY_MAX");
            if (retryMax.HasValue) options.RetryMax = TimeSpan.FromSeconds(retryMax.Value);
            return options.Checked();
        }

        /// <summary>Throws <see cref="ArgumentException"/> naming the bad option.</summary>
        public WorkerOptions Checked()
        {
            if (Threads < 1) throw new ArgumentException("Threads must be at least 1");
            if (PollInterval <= TimeSpan.Zero) throw new ArgumentException("PollInterval must be positive");
            if (LongPollMs < 0) throw new ArgumentException("LongPollMs must not be negative");
            if (ServerUrl == null || !(ServerUrl.StartsWith("http://", StringComparison.Ordinal) || ServerUrl.StartsWith("https://", StringComparison.Ordinal)))
                throw new ArgumentException("server URL '" + ServerUrl + "' must be http(s)");
            if (string.IsNullOrWhiteSpace(WorkerId)) throw new ArgumentException("WorkerId must not be empty");
            return this;
        }

        /// <summary><c>STEPWAY_TASK_&lt;TYPE&gt;_</c>: the type upper-cased, other characters as <c>_</c>.</summary>
        public static string TypeEnvPrefix(string taskType)
        {
            return "STEPWAY_TASK_" + Regex.Replace(taskType, "[^A-Za-z0-9]", "_").ToUpperInvariant() + "_";
        }

        /// <summary>The settings one task type runs with.</summary>
        public TypeOptions ForType(TaskHandler handler)
        {
            var prefix = TypeEnvPrefix(handler.TaskType);
            var env = Environment ?? new Dictionary<string, string>();
            var envThreads = ParseInt(env, prefix + "THREADS");
            var envInterval = ParseDouble(env, prefix + "POLL_INTERVAL");
            var envThreshold = ParseInt(env, prefix + "PAYLOAD_THRESHOLD");
            string envDomain;
            var hasEnvDomain = env.TryGetValue(prefix + "DOMAIN", out envDomain);
            var threads = envThreads > 0 ? envThreads.Value : handler.Threads > 0 ? handler.Threads : Threads;
            var interval = envInterval > 0 ? TimeSpan.FromSeconds(envInterval.Value)
                : handler.PollIntervalSeconds > 0 ? TimeSpan.FromSeconds(handler.PollIntervalSeconds)
                : PollInterval;
            string domain;
            if (hasEnvDomain) domain = string.IsNullOrWhiteSpace(envDomain) ? null : envDomain.Trim();
            else domain = !string.IsNullOrEmpty(handler.Domain) ? handler.Domain : Domain;
            var threshold = envThreshold.HasValue ? envThreshold.Value
                : handler.PayloadThreshold >= 0 ? handler.PayloadThreshold
                : PayloadThreshold;
            if (threads < 1) throw new ArgumentException(handler.TaskType + ": threads must be at least 1");
            return new TypeOptions(handler.TaskType, threads, interval, domain, threshold);
        }

        private static string Get(IDictionary<string, string> env, string key)
        {
            string raw;
            if (!env.TryGetValue(key, out raw) || raw == null) return null;
            raw = raw.Trim();
            return raw.Length == 0 ? null : raw;
        }

        private static double? ParseDouble(IDictionary<string, string> env, string key)
        {
            var raw = Get(env, key);
            if (raw == null) return null;
            double value;
            if (!double.TryParse(raw, NumberStyles.Float, CultureInfo.InvariantCulture, out value))
                throw new ArgumentException(key + "='" + raw + "' is not a number");
            return value;
        }

        private static int? ParseInt(IDictionary<string, string> env, string key)
        {
            var value = ParseDouble(env, key);
            if (!value.HasValue) return null;
            if (value.Value != Math.Floor(value.Value) || value.Value < 0 || value.Value > int.MaxValue)
                throw new ArgumentException(key + "='" + env[key] + "' is not a non-negative integer");
            return (int)value.Value;
        }
    }

    /// <summary>The settings one task type runs with (see <see cref="WorkerOptions.ForType"/>).</summary>
    public sealed class TypeOptions
    {
        public TypeOptions(string taskType, int threads, TimeSpan pollInterval, string domain, int payloadThreshold)
        {
            TaskType = taskType;
            Threads = threads;
            PollInterval = pollInterval;
            Domain = domain;
            PayloadThreshold = payloadThreshold;
        }

        public string TaskType { get; }
        public int Threads { get; }
        public TimeSpan PollInterval { get; }
        public string Domain { get; }
        public int PayloadThreshold { get; }
    }

    public enum WorkerLogLevel
    {
        Debug,
        Info,
        Warning,
        Error,
    }
}
