using System;
using System.Globalization;

namespace Stepway.Worker
{
    /// <summary>The worker's own log lines (not task logs): to <see cref="WorkerOptions.Logger"/>
    /// or standard error.</summary>
    public sealed class WorkerLog
    {
        private readonly Action<WorkerLogLevel, string> sink;

        public WorkerLog(Action<WorkerLogLevel, string> sink)
        {
            this.sink = sink ?? WriteToStandardError;
        }

        /// <summary>Info and above, one line each, to standard error.</summary>
        public static void WriteToStandardError(WorkerLogLevel level, string message)
        {
            if (level == WorkerLogLevel.Debug) return;
            var line = DateTime.UtcNow.ToString("yyyy-MM-dd'T'HH:mm:ss.fff'Z'", CultureInfo.InvariantCulture)
                + " " + level.ToString().ToUpperInvariant() + " stepway_worker: " + message;
            Console.Error.WriteLine(line);
        }

        public void Debug(string message) => Write(WorkerLogLevel.Debug, message);
        public void Info(string message) => Write(WorkerLogLevel.Info, message);
        public void Warning(string message) => Write(WorkerLogLevel.Warning, message);
        public void Error(string message) => Write(WorkerLogLevel.Error, message);

        private void Write(WorkerLogLevel level, string message)
        {
            try { sink(level, message); }
            catch (Exception) { }
        }
    }
}
