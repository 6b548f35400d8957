using Newtonsoft.Json.Linq;

namespace Stepway.Worker
{
    /// <summary>
    /// The <c>traceparent</c> a polled task carries: the W3C trace context of the engine's span
    /// that dispatched it (control_plane/services/wire.py). The SDK records no spans of its own:
    /// it posts the task's results with that value, unchanged, as their <c>traceparent</c>
    /// header, so the Task API's span for a result joins the run's trace, as the Python SDK
    /// does without an OpenTelemetry SDK configured (workers/sdk/stepway_worker/tracing.py).
    /// </summary>
    internal static class TraceContext
    {
        public const string Header = "traceparent";

        /// <summary>The task's <c>traceparent</c> when it is well formed, else null.</summary>
        public static string Of(JObject task)
        {
            var value = task == null ? null : task[Header];
            if (value == null || value.Type != JTokenType.String) return null;
            var text = (string)value;
            return IsWellFormed(text) ? text : null;
        }

        /// <summary>Version 00 only: <c>00-{trace-id}-{parent-id}-{flags}</c>, 32, 16 and 2
        /// lowercase hex digits, neither id all zeros, nothing before or after.</summary>
        public static bool IsWellFormed(string value)
        {
            if (value == null || value.Length != 55) return false;
            if (value[0] != '0' || value[1] != '0' || value[2] != '-' || value[35] != '-' || value[52] != '-') return false;
            return Hex(value, 3, 32, true) && Hex(value, 36, 16, true) && Hex(value, 53, 2, false);
        }

        private static bool Hex(string value, int start, int length, bool nonZero)
        {
            var zero = true;
            for (var i = start; i < start + length; i++)
            {
                var c = value[i];
                if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
                if (c != '0') zero = false;
            }
            return !(nonZero && zero);
        }
    }
}
