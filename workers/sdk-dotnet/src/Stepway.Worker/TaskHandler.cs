using System;
using System.Collections;
using System.Collections.Generic;
using System.Linq;
using System.Reflection;
using System.Threading;
using System.Threading.Tasks;
using Newtonsoft.Json.Linq;

namespace Stepway.Worker
{
    /// <summary>
    /// A registered task handler: how its parameters are bound from <c>inputData</c>, how its
    /// return value becomes the result, and its per-type options.
    ///
    /// Binding: a <see cref="TaskContext"/> parameter gets the context. A single other
    /// parameter whose type is an object type (a class with properties, <c>JObject</c> or a
    /// dictionary) receives the whole input, unless the input has a key of its name. Other
    /// parameters are bound by name from the input: the exact name, then its
    /// <c>snake_case</c> form, then ignoring case; an optional parameter that is missing
    /// takes its default; a missing required one, or a value that does not convert, is a
    /// FAILED_WITH_TERMINAL_ERROR naming the field.
    ///
    /// Result: <see cref="InProgress"/> posts IN_PROGRESS; <c>void</c>/null posts <c>{}</c>;
    /// an object, dictionary or <c>JObject</c> is the output; any other value
    /// <c>{"result": value}</c>. <c>Task</c>/<c>Task&lt;T&gt;</c> are awaited. A thrown
    /// <see cref="TerminalError"/> posts FAILED_WITH_TERMINAL_ERROR, any other exception
    /// FAILED with <c>"&lt;Type&gt;: &lt;message&gt;"</c> and the stack trace as a task log line.
    /// </summary>
    public sealed class TaskHandler
    {
        internal const int MaxReason = 2000;

        private readonly Func<TaskContext, object> call;

        private TaskHandler(string taskType, Func<TaskContext, object> call, string description)
        {
            if (string.IsNullOrWhiteSpace(taskType)) throw new ArgumentException("a task type is required");
            TaskType = taskType;
            this.call = call;
            Description = description;
            PayloadThreshold = -1;
        }

        public string TaskType { get; }

        /// <summary>The method this handler runs, for messages.</summary>
        public string Description { get; }

        /// <summary>0 = the worker's.</summary>
        public int Threads { get; set; }

        /// <summary>Seconds; 0 = the worker's.</summary>
        public double PollIntervalSeconds { get; set; }

        /// <summary>null = the worker's.</summary>
        public string Domain { get; set; }

        /// <summary>-1 = the worker's.</summary>
        public int PayloadThreshold { get; set; }

        public override string ToString() => "TaskHandler(" + TaskType + ", " + Description + ")";

        /// <summary>A handler for a function of the context (no binding: read
        /// <see cref="TaskContext.Input"/>). Its return value is treated like a method's.</summary>
        public static TaskHandler FromFunc(string taskType, Func<TaskContext, object> fn)
        {
            if (fn == null) throw new ArgumentNullException(nameof(fn));
            return new TaskHandler(taskType, ctx => Unwrap(fn(ctx)), "function");
        }

        /// <summary>A handler for a <c>[WorkerTask]</c> method; <paramref name="target"/> is
        /// null for a static method.</summary>
        public static TaskHandler FromMethod(MethodInfo method, object target, WorkerTaskAttribute attribute)
        {
            if (method == null) throw new ArgumentNullException(nameof(method));
            if (attribute == null) throw new ArgumentNullException(nameof(attribute));
            if (!method.IsStatic && target == null)
                throw new ArgumentException(method.DeclaringType.Name + "." + method.Name + " is an instance method: give the instance");
            if (method.ContainsGenericParameters)
                throw new ArgumentException(method.DeclaringType.Name + "." + method.Name + ": a generic method cannot be a task handler");
            var binder = new InputBinder(attribute.TaskType, method);
            var handler = new TaskHandler(
                attribute.TaskType,
                ctx =>
                {
                    var args = binder.Bind(ctx);
                    // a TargetInvocationException is unwrapped by Execute
                    var value = method.Invoke(target, args);
                    if (value is Task && !(method.ReturnType.IsGenericType))
                    {
                        ((Task)value).GetAwaiter().GetResult();
                        return null;
                    }
                    return Unwrap(value);
                },
                method.DeclaringType.Name + "." + method.Name)
            {
                Threads = attribute.Threads,
                PollIntervalSeconds = attribute.PollIntervalSeconds,
                Domain = attribute.Domain,
                PayloadThreshold = attribute.PayloadThreshold,
            };
            return handler;
        }

        /// <summary>Every <c>[WorkerTask]</c> method of an object's type (instance and static).</summary>
        public static IList<TaskHandler> FromObject(object instance)
        {
            if (instance == null) throw new ArgumentNullException(nameof(instance));
            return Scan(instance.GetType(), instance);
        }

        /// <summary>Every <c>[WorkerTask]</c> method of a type: static ones, and instance ones
        /// on an instance made with the type's parameterless constructor.</summary>
        public static IList<TaskHandler> FromType(Type type)
        {
            if (type == null) throw new ArgumentNullException(nameof(type));
            var needsInstance = Methods(type).Any(m => !m.IsStatic);
            object instance = null;
            if (needsInstance)
            {
                if (type.IsAbstract || type.GetConstructor(Type.EmptyTypes) == null)
                    throw new ArgumentException(type.Name + " has [WorkerTask] instance methods but no public parameterless constructor: add an instance instead");
                instance = Activator.CreateInstance(type);
            }
            return Scan(type, instance);
        }

        private static IList<TaskHandler> Scan(Type type, object instance)
        {
            var found = new List<TaskHandler>();
            foreach (var method in Methods(type))
            {
                var attribute = method.GetCustomAttribute<WorkerTaskAttribute>(true);
                found.Add(FromMethod(method, method.IsStatic ? null : instance, attribute));
            }
            return found;
        }

        internal static IEnumerable<MethodInfo> Methods(Type type)
        {
            const BindingFlags flags = BindingFlags.Public | BindingFlags.NonPublic | BindingFlags.Instance | BindingFlags.Static;
            return type.GetMethods(flags).Where(m => m.GetCustomAttribute<WorkerTaskAttribute>(true) != null);
        }

        private static object Unwrap(object value)
        {
            var task = value as Task;
            if (task == null) return value;
            task.GetAwaiter().GetResult();
            var type = task.GetType();
            while (type != null && !(type.IsGenericType && type.GetGenericTypeDefinition() == typeof(Task<>)))
                type = type.BaseType;
            if (type == null) return null;
            var result = type.GetProperty("Result").GetValue(task);
            // an async method declared as Task runs as a Task<VoidTaskResult>
            return result != null && result.GetType().FullName == "System.Threading.Tasks.VoidTaskResult" ? null : result;
        }

        /// <summary>Runs the handler on the context's input and turns what happens into an
        /// <see cref="Outcome"/>. Never throws.</summary>
        public Outcome Execute(TaskContext ctx)
        {
            var previous = TaskContext.Enter(ctx);
            object value;
            try
            {
                value = call(ctx);
            }
            catch (Exception raw)
            {
                var exc = Innermost(raw);
                if (exc is InputBindingException)
                    return new Outcome(TaskStatuses.FailedWithTerminalError, reason: Cut(exc.Message));
                if (exc is TerminalError)
                    return new Outcome(TaskStatuses.FailedWithTerminalError,
                        reason: Cut(string.IsNullOrEmpty(exc.Message) ? exc.GetType().Name : exc.Message));
                var failed = new Outcome(TaskStatuses.Failed,
                    reason: Cut(string.IsNullOrEmpty(exc.Message) ? exc.GetType().Name : exc.GetType().Name + ": " + exc.Message));
                failed.Logs.Add(exc.ToString());
                return failed;
            }
            finally
            {
                TaskContext.Leave(previous);
            }
            try
            {
                var progress = value as InProgress;
                if (progress != null)
                {
                    return new Outcome(TaskStatuses.InProgress, WorkerJson.ToOutput(progress.Output))
                    {
                        CallbackAfterSeconds = progress.CallbackAfterSeconds,
                        ExtendLease = progress.ExtendLease,
                    };
                }
                return new Outcome(TaskStatuses.Completed, WorkerJson.ToOutput(value));
            }
            catch (Exception exc)
            {
                var failed = new Outcome(TaskStatuses.Failed, reason: Cut("output of " + TaskType + " is not JSON: " + exc.Message));
                failed.Logs.Add(exc.ToString());
                return failed;
            }
        }

        private static Exception Innermost(Exception exc)
        {
            while (true)
            {
                var aggregate = exc as AggregateException;
                if (aggregate != null && aggregate.InnerExceptions.Count == 1)
                {
                    exc = aggregate.InnerExceptions[0];
                    continue;
                }
                var invocation = exc as TargetInvocationException;
                if (invocation != null && invocation.InnerException != null)
                {
                    exc = invocation.InnerException;
                    continue;
                }
                return exc;
            }
        }

        internal static string Cut(string text) => text.Length <= MaxReason ? text : text.Substring(0, MaxReason);
    }

    /// <summary>The input does not fit the handler's parameters (posted as a terminal error).</summary>
    public sealed class InputBindingException : Exception
    {
        public InputBindingException(string message) : base(message) { }
    }

    /// <summary>Binds <c>inputData</c> to a method's parameters (see <see cref="TaskHandler"/>).</summary>
    internal sealed class InputBinder
    {
        private readonly string taskType;
        private readonly ParameterInfo[] parameters;
        private readonly ParameterInfo whole;

        public InputBinder(string taskType, MethodInfo method)
        {
            this.taskType = taskType;
            parameters = method.GetParameters();
            var valueParameters = new List<ParameterInfo>();
            foreach (var p in parameters)
            {
                if (p.ParameterType == typeof(TaskContext)) continue;
                if (p.ParameterType.IsByRef || p.IsOut)
                    throw new ArgumentException(method.Name + ": ref/out parameter " + p.Name + " cannot be bound from task input");
                if (p.ParameterType == typeof(CancellationToken))
                    throw new ArgumentException(method.Name + ": CancellationToken parameters are not supported");
                valueParameters.Add(p);
            }
            if (valueParameters.Count == 1 && IsObjectType(valueParameters[0].ParameterType))
                whole = valueParameters[0];
        }

        private static bool IsObjectType(Type type)
        {
            if (type == typeof(JObject)) return true;
            if (type == typeof(string) || type.IsPrimitive || type.IsEnum || type.IsArray) return false;
            if (type == typeof(decimal) || type == typeof(DateTime) || type == typeof(DateTimeOffset) || type == typeof(Guid) || type == typeof(TimeSpan) || type == typeof(Uri)) return false;
            if (Nullable.GetUnderlyingType(type) != null) return false;
            if (typeof(JToken).IsAssignableFrom(type)) return false;
            if (typeof(IDictionary).IsAssignableFrom(type)) return true;
            if (type.IsGenericType && type.GetInterfaces().Concat(new[] { type }).Any(i => i.IsGenericType && i.GetGenericTypeDefinition() == typeof(IDictionary<,>))) return true;
            if (typeof(IEnumerable).IsAssignableFrom(type)) return false;
            return type.IsClass || (type.IsValueType && !type.IsPrimitive);
        }

        public object[] Bind(TaskContext ctx)
        {
            var input = ctx.Input ?? new JObject();
            var serializer = WorkerJson.CreateSerializer();
            var args = new object[parameters.Length];
            var errors = new List<string>();
            for (var i = 0; i < parameters.Length; i++)
            {
                var p = parameters[i];
                if (p.ParameterType == typeof(TaskContext))
                {
                    args[i] = ctx;
                    continue;
                }
                var token = Find(input, p.Name);
                if (p == whole && token == null)
                {
                    try
                    {
                        args[i] = p.ParameterType == typeof(JObject) ? input.DeepClone() : input.ToObject(p.ParameterType, serializer);
                    }
                    catch (Exception exc)
                    {
                        errors.Add(Describe(exc));
                    }
                    continue;
                }
                if (token == null)
                {
                    if (p.IsOptional)
                        args[i] = p.HasDefaultValue && p.DefaultValue != null ? p.DefaultValue : Default(p.ParameterType);
                    else
                        errors.Add(p.Name + ": field required");
                    continue;
                }
                if (token.Type == JTokenType.Null)
                {
                    if (p.ParameterType.IsValueType && Nullable.GetUnderlyingType(p.ParameterType) == null)
                        errors.Add(p.Name + ": must not be null");
                    else
                        args[i] = null;
                    continue;
                }
                try
                {
                    args[i] = p.ParameterType == typeof(JToken) || p.ParameterType == typeof(object) && token is JContainer
                        ? token.DeepClone()
                        : token.ToObject(p.ParameterType, serializer);
                }
                catch (Exception exc)
                {
                    errors.Add(p.Name + ": " + Describe(exc));
                }
            }
            if (errors.Count > 0)
                throw new InputBindingException(TaskHandler.Cut("invalid input for " + taskType + ": " + string.Join("; ", errors)));
            return args;
        }

        private static object Default(Type type) => type.IsValueType ? Activator.CreateInstance(type) : null;

        private static string Describe(Exception exc)
        {
            var inner = exc;
            while (inner.InnerException != null && (inner is System.Reflection.TargetInvocationException || inner.Message.StartsWith("Error converting value", StringComparison.Ordinal)))
                inner = inner.InnerException;
            return inner == exc ? exc.Message : exc.Message + " (" + inner.Message + ")";
        }

        /// <summary>The input value of a parameter: the exact name, its snake_case form,
        /// then the first key equal ignoring case.</summary>
        internal static JToken Find(JObject input, string name)
        {
            JToken token;
            if (input.TryGetValue(name, out token)) return token;
            var snake = WorkerJson.SnakeCase(name);
            if (snake != name && input.TryGetValue(snake, out token)) return token;
            foreach (var property in input.Properties())
            {
                if (string.Equals(property.Name, name, StringComparison.OrdinalIgnoreCase)) return property.Value;
            }
            return null;
        }
    }
}
