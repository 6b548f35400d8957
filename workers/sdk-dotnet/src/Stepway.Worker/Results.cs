using System;
using System.Collections.Generic;

namespace Stepway.Worker
{
    /// <summary>The result statuses a worker posts (Conductor's TaskResult status).</summary>
    public static class TaskStatuses
    {
        public const string Completed = "COMPLETED";
        public const string Failed = "FAILED";
        public const string FailedWithTerminalError = "FAILED_WITH_TERMINAL_ERROR";
        public const string InProgress = "IN_PROGRESS";
    }

    /// <summary>
    /// Throw from a handler to fail the task with FAILED_WITH_TERMINAL_ERROR: the engine
    /// does not retry it (bad input, a business rule that will not change). Any other
    /// exception fails the attempt (FAILED) and the engine retries it by the task definition.
    /// </summary>
    public class TerminalError : Exception
    {
        public TerminalError(string message) : base(message) { }
        public TerminalError(string message, Exception inner) : base(message, inner) { }
    }

    /// <summary>
    /// Return from a handler to post IN_PROGRESS: the Task API hands the task back after
    /// <see cref="CallbackAfterSeconds"/> with <see cref="Output"/> as the task's
    /// <c>outputData</c> (read it from <see cref="TaskContext.PreviousOutput"/>), so that a
    /// long job works in chunks and resumes from a cursor kept in the output.
    /// <c>callbackAfterSeconds = 0</c> is a progress report only: the task stays with this
    /// worker; <see cref="ExtendLease"/> then also restarts the response timeout.
    /// An IN_PROGRESS output is never offloaded: keep the resume state compact.
    /// </summary>
    public sealed class InProgress
    {
        public InProgress(int callbackAfterSeconds = 1, object output = null, bool extendLease = false)
        {
            CallbackAfterSeconds = Math.Max(0, callbackAfterSeconds);
            Output = output;
            ExtendLease = extendLease;
        }

        public int CallbackAfterSeconds { get; }

        /// <summary>A dictionary, a JObject or an object serialized like a handler's output.</summary>
        public object Output { get; }

        public bool ExtendLease { get; }
    }

    /// <summary>The result of running a handler once, before it is posted.</summary>
    public sealed class Outcome
    {
        public Outcome(string status, Newtonsoft.Json.Linq.JObject output = null, string reason = null)
        {
            Status = status;
            Output = output ?? new Newtonsoft.Json.Linq.JObject();
            Reason = reason;
        }

        public string Status { get; }
        public Newtonsoft.Json.Linq.JObject Output { get; }
        public string Reason { get; }
        public int CallbackAfterSeconds { get; set; }
        public bool ExtendLease { get; set; }

        /// <summary>Lines that travel with the result (an exception's stack trace).</summary>
        public List<string> Logs { get; } = new List<string>();
    }
}
