using System;
using System.Collections.Generic;
using System.Linq;
using System.Reflection;
using System.Threading;
using System.Threading.Tasks;
using Newtonsoft.Json.Linq;

namespace Stepway.Worker
{
    /// <summary>
    /// Runs task handlers: per task type a poller and a pool of handler threads, results
    /// posted with retries, graceful stop.
    /// <code>
    /// new WorkerHost()                      // options from STEPWAY_* environment variables
    ///     .AddHandlers(new ConnectorHandlers())
    ///     .Run();                           // polls until SIGTERM/Ctrl-C, then finishes the tasks in hand
    /// </code>
    /// </summary>
    public sealed class WorkerHost : IDisposable
    {
        private readonly List<TaskHandler> handlers = new List<TaskHandler>();
        private readonly ManualResetEventSlim stopRequested = new ManualResetEventSlim(false);
        private readonly ManualResetEventSlim stopped = new ManualResetEventSlim(false);
        private readonly object gate = new object();
        private readonly TaskClient givenClient;
        private List<TypeRunner> runners;
        private bool started;
        private bool stopCalled;
        private bool stopResult;

        /// <summary>A host with <see cref="WorkerOptions.FromEnvironment"/>.</summary>
        public WorkerHost() : this(null) { }

        /// <param name="options">null = <see cref="WorkerOptions.FromEnvironment"/></param>
        /// <param name="client">a Task API client to use instead of one made from the options</param>
        public WorkerHost(WorkerOptions options, TaskClient client = null)
        {
            Options = options ?? WorkerOptions.FromEnvironment();
            givenClient = client;
            Log = new WorkerLog(Options.Logger);
        }

        public WorkerOptions Options { get; }
        public WorkerLog Log { get; }
        public TaskClient Client { get; private set; }
        public Outbox Outbox { get; private set; }

        /// <summary>Set when the host stops polling.</summary>
        internal ManualResetEventSlim Stopping { get; } = new ManualResetEventSlim(false);

        public IList<TaskHandler> Handlers => handlers.AsReadOnly();

        // --- handlers -----------------------------------------------------------------------

        public WorkerHost AddHandler(TaskHandler handler)
        {
            if (handler == null) throw new ArgumentNullException(nameof(handler));
            lock (gate)
            {
                if (started) throw new InvalidOperationException("the host is running: add handlers before Start");
                var existing = handlers.FirstOrDefault(h => h.TaskType == handler.TaskType);
                if (existing != null)
                    throw new ArgumentException("task type '" + handler.TaskType + "' already has a handler: " + existing);
                handlers.Add(handler);
            }
            return this;
        }

        /// <summary>A handler for a function of the context.</summary>
        public WorkerHost Add(string taskType, Func<TaskContext, object> fn) => AddHandler(TaskHandler.FromFunc(taskType, fn));

        /// <summary>The <c>[WorkerTask]</c> methods of an object (instance and static).</summary>
        public WorkerHost AddHandlers(object instance)
        {
            foreach (var h in TaskHandler.FromObject(instance)) AddHandler(h);
            return this;
        }

        /// <summary>The <c>[WorkerTask]</c> methods of a type (see <see cref="TaskHandler.FromType"/>).</summary>
        public WorkerHost AddHandlers(Type type)
        {
            foreach (var h in TaskHandler.FromType(type)) AddHandler(h);
            return this;
        }

        public WorkerHost AddHandlers<T>() => AddHandlers(typeof(T));

        /// <summary>The <c>[WorkerTask]</c> methods of every type of an assembly.</summary>
        public WorkerHost AddHandlers(Assembly assembly)
        {
            foreach (var type in assembly.GetTypes())
            {
                if (type.IsGenericTypeDefinition || !TaskHandler.Methods(type).Any()) continue;
                AddHandlers(type);
            }
            return this;
        }

        // --- running ------------------------------------------------------------------------

        /// <summary>Starts polling (returns at once).</summary>
        public WorkerHost Start()
        {
            lock (gate)
            {
                if (started) return this;
                Options.Checked();
                var chosen = Options.TaskTypes == null
                    ? handlers.ToList()
                    : handlers.Where(h => Options.TaskTypes.Contains(h.TaskType)).ToList();
                if (chosen.Count == 0)
                    throw new InvalidOperationException("no task handlers to run: add some with [WorkerTask] methods");
                var typeOptions = chosen.Select(h => Options.ForType(h)).ToList();
                Client = givenClient ?? new TaskClient(
                    Options.ServerUrl,
                    Options.TokenProvider ?? TokenProviders.FromEnvironment(Options.Environment),
                    Options.HttpTimeout);
                Outbox = new Outbox(Client, Options.RetryInitial, Options.RetryMax, Log);
                runners = chosen.Select((h, i) => new TypeRunner(this, h, typeOptions[i])).ToList();
                started = true;
            }
            Outbox.Start();
            foreach (var runner in runners) runner.Start();
            Log.Info("worker " + Options.WorkerId + " polling "
                + string.Join(", ", runners.Select(r => r.Options.TaskType
                    + (r.Options.Domain != null ? "@" + r.Options.Domain : "") + " x" + r.Options.Threads))
                + " at " + Options.ServerUrl);
            return this;
        }

        /// <summary>Asks <see cref="Run"/>/<see cref="RunAsync"/> to stop (safe from a signal handler).</summary>
        public void RequestStop() => stopRequested.Set();

        /// <summary>Stops polling, lets in-flight handlers finish and post their results, within
        /// <paramref name="grace"/> (default <see cref="WorkerOptions.ShutdownGrace"/>). True when
        /// everything finished and every result was settled.</summary>
        public bool Stop(TimeSpan? grace = null)
        {
            var limit = grace ?? Options.ShutdownGrace;
            bool first;
            lock (gate)
            {
                if (!started) return true;
                first = !stopCalled;
                stopCalled = true;
            }
            if (!first)
            {
                // another thread is stopping the host (RunAsync and a Dispose, say)
                stopped.Wait(limit + TimeSpan.FromSeconds(5));
                return stopResult;
            }
            var deadline = DateTime.UtcNow + limit;
            Stopping.Set();
            foreach (var runner in runners) runner.JoinPoller(deadline);
            var finished = true;
            foreach (var runner in runners) finished &= runner.Join(deadline);
            if (!finished)
                Log.Warning("shutdown: handlers still running after " + limit.TotalSeconds + " s, abandoned");
            var left = deadline - DateTime.UtcNow;
            var drained = Outbox.Drain(left > TimeSpan.Zero ? left : TimeSpan.Zero);
            if (!drained) Log.Error("shutdown: " + Outbox.Count + " results could not be posted");
            Outbox.Stop();
            if (givenClient == null) Client.Dispose();
            stopResult = finished && drained;
            stopped.Set();
            return stopResult;
        }

        /// <summary>Polls until SIGTERM or Ctrl-C (or <see cref="RequestStop"/>), then stops
        /// gracefully. True when every task in hand finished and its result was posted (use it
        /// as the exit code: 0 when true).</summary>
        public bool Run()
        {
            using (var signals = new ShutdownSignals(this))
            {
                Start();
                stopRequested.Wait();
                Log.Info("worker " + Options.WorkerId + " stopping");
                var ok = Stop();
                Environment.ExitCode = ok ? 0 : 1;
                signals.Done();
                return ok;
            }
        }

        /// <summary>Polls until <paramref name="cancellation"/> is cancelled (or
        /// <see cref="RequestStop"/>), then stops gracefully; the task's result is as
        /// <see cref="Run"/>'s.</summary>
        public Task<bool> RunAsync(CancellationToken cancellation)
        {
            Start();
            var registration = cancellation.Register(RequestStop);
            return Task.Factory.StartNew(() =>
            {
                using (registration)
                {
                    stopRequested.Wait();
                    Log.Info("worker " + Options.WorkerId + " stopping");
                    return Stop();
                }
            }, CancellationToken.None, TaskCreationOptions.LongRunning, TaskScheduler.Default);
        }

        public void Dispose()
        {
            if (started && !stopped.IsSet) Stop();
        }

        /// <summary>The handler's view of a polled Task JSON, with its log sink and uploader.</summary>
        internal TaskContext BuildContext(JObject task, string taskType)
        {
            var ctx = TaskContext.FromTask(task, taskType, Options.WorkerId);
            var client = Client;
            var taskId = ctx.TaskId;
            ctx.LogSink = line =>
            {
                try
                {
                    client.Log(taskId, line);
                    return true;
                }
                catch (Exception exc)
                {
                    Log.Debug("log line of task " + taskId + " not posted: " + exc.Message);
                    return false;
                }
            };
            ctx.Uploader = (data, name, contentType) => ResultDelivery.Upload(client, taskType, taskId, data, name, contentType);
            return ctx;
        }
    }
}
