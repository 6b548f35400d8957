using System;
using System.Reflection;
using System.Threading;

namespace Stepway.Worker
{
    /// <summary>
    /// SIGTERM and Ctrl-C ask a running <see cref="WorkerHost"/> to stop. .NET (Core) raises
    /// <c>AppDomain.ProcessExit</c> on SIGTERM; the handler holds the exit until the host has
    /// stopped. Mono does not, so there SIGTERM is read with Mono.Posix's <c>UnixSignal</c>
    /// (found by reflection: this package targets netstandard2.0 and does not reference it).
    /// </summary>
    internal sealed class ShutdownSignals : IDisposable
    {
        private const string MonoPosix = ", Mono.Posix, Version=4.0.0.0, Culture=neutral, PublicKeyToken=0738eb9f132ed756";
        private readonly WorkerHost host;
        private readonly ManualResetEventSlim done = new ManualResetEventSlim(false);
        private Thread monoWatcher;

        public ShutdownSignals(WorkerHost host)
        {
            this.host = host;
            Console.CancelKeyPress += OnCancelKeyPress;
            AppDomain.CurrentDomain.ProcessExit += OnProcessExit;
            if (Type.GetType("Mono.Runtime") != null) WatchMonoSigterm();
        }

        /// <summary>The host has stopped: a pending ProcessExit may let the process go.</summary>
        public void Done() => done.Set();

        public void Dispose()
        {
            done.Set();
            Console.CancelKeyPress -= OnCancelKeyPress;
            AppDomain.CurrentDomain.ProcessExit -= OnProcessExit;
        }

        private void OnCancelKeyPress(object sender, ConsoleCancelEventArgs e)
        {
            e.Cancel = true;
            host.RequestStop();
        }

        private void OnProcessExit(object sender, EventArgs e)
        {
            host.RequestStop();
            done.Wait(host.Options.ShutdownGrace + TimeSpan.FromSeconds(5));
        }

        private void WatchMonoSigterm()
        {
            var signalType = Type.GetType("Mono.Unix.UnixSignal" + MonoPosix);
            var signumType = Type.GetType("Mono.Unix.Native.Signum" + MonoPosix);
            if (signalType == null || signumType == null)
            {
                host.Log.Warning("Mono.Posix is missing: SIGTERM will not stop the worker gracefully");
                return;
            }
            var signals = Array.CreateInstance(signalType, 1);
            signals.SetValue(Activator.CreateInstance(signalType, Enum.Parse(signumType, "SIGTERM")), 0);
            var waitAny = signalType.GetMethod("WaitAny", new[] { signals.GetType(), typeof(int) });
            monoWatcher = new Thread(() =>
            {
                try
                {
                    while (!done.IsSet)
                    {
                        var index = (int)waitAny.Invoke(null, new object[] { signals, 200 });
                        if (index >= 0 && index < signals.Length)
                        {
                            host.RequestStop();
                            return;
                        }
                    }
                }
                finally
                {
                    // gives SIGTERM its default action back
                    ((IDisposable)signals.GetValue(0)).Dispose();
                }
            }) { IsBackground = true, Name = "stepway-sigterm" };
            monoWatcher.Start();
        }
    }
}
