using System;

namespace Stepway.Worker
{
    /// <summary>
    /// Marks a method as the handler of a WORKER task type:
    /// <c>[WorkerTask("parse_pdf")] public ParseResult ParsePdf(ParseInput input) =&gt; ...;</c>
    /// Parameters are bound from the task's <c>inputData</c> (see <see cref="TaskHandler"/>).
    /// The options here are overridden by <c>STEPWAY_TASK_&lt;TYPE&gt;_*</c> environment
    /// variables and override <see cref="WorkerOptions"/>.
    /// </summary>
    [AttributeUsage(AttributeTargets.Method, AllowMultiple = false, Inherited = true)]
    public sealed class WorkerTaskAttribute : Attribute
    {
        public WorkerTaskAttribute(string taskType)
        {
            if (string.IsNullOrWhiteSpace(taskType))
                throw new ArgumentException("a task type is required", nameof(taskType));
            TaskType = taskType;
        }

        /// <summary>The task type (the task definition's name) this method serves.</summary>
        public string TaskType { get; }

        /// <summary>Handler threads for this type; 0 = the worker's <see cref="WorkerOptions.Threads"/>.</summary>
        public int Threads { get; set; }

        /// <summary>Longest idle wait between polls, seconds; 0 = the worker's.</summary>
        public double PollIntervalSeconds { get; set; }

        /// <summary>Poll <c>&lt;domain&gt;-&lt;type&gt;</c>; null = the worker's domain.</summary>
        public string Domain { get; set; }

        /// <summary>Output bytes above which the output is uploaded; -1 = the worker's.</summary>
        public int PayloadThreshold { get; set; } = -1;
    }
}
