// Conductor's official JavaScript SDK (@io-orkes/conductor-javascript) used as a JS team
// uses it, unmodified, against a Stepway platform: OrkesClients for the clients,
// MetadataClient to register task and workflow definitions, WorkflowExecutor to start,
// execute, read and steer runs, TaskManager / TaskHandler running plain worker objects
// ({taskDefName, execute}) that poll and answer tasks, TaskClient for tasks and queues.
//
// One scenario per call; prints one JSON line with what the SDK read back (a call that
// threw is recorded as "error: <message>" where the scenario goes on past it).
// CommonJS, so that NODE_PATH finds the installed client.
// Usage: node sdk.cjs <serverUrl ending in /api> <scenario> <unique prefix>
const {
  ConductorWorkflow,
  NonRetryableException,
  OrkesClients,
  TaskHandler,
  TaskManager,
  getTaskContext,
  simpleTask,
  switchTask,
  taskDefinition,
} = require("@io-orkes/conductor-javascript");

const [serverUrl, scenario, prefix] = process.argv.slice(2);
const OWNER = "js-team@example.com";
const SETTLE_MS = 20000;
const ENDED = new Set(["COMPLETED", "FAILED", "TIMED_OUT", "TERMINATED"]);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A task definition as a JS team registers one: no retry delay, short timeouts. */
const taskDef = (name, fields = {}) =>
  taskDefinition({
    name,
    ownerEmail: OWNER,
    retryCount: 0,
    retryDelaySeconds: 0,
    responseTimeoutSeconds: 30,
    timeoutSeconds: 60,
    ...fields,
  });

/** A WAIT task without a duration: it waits until completed through the API. */
const waitTask = (ref) => ({
  name: ref,
  taskReferenceName: ref,
  type: "WAIT",
  inputParameters: {},
});

const workflowDef = (name, tasks, fields = {}) => ({
  name,
  version: 1,
  schemaVersion: 2,
  ownerEmail: OWNER,
  timeoutSeconds: 0,
  tasks,
  ...fields,
});

/** A worker completing each task with `output(task)`. */
const completing = (taskDefName, output) => ({
  taskDefName,
  execute: async (task) => ({ status: "COMPLETED", outputData: output(task) }),
});

/** The parts of a Workflow the tests assert on. */
const view = (run) => ({
  workflowId: run.workflowId,
  status: run.status,
  reasonForIncompletion: run.reasonForIncompletion ?? null,
  output: run.output ?? null,
  tasks: (run.tasks ?? []).map((t) => ({
    ref: t.referenceTaskName,
    type: t.taskType,
    status: t.status,
    taskId: t.taskId,
    retryCount: t.retryCount,
    retried: t.retried ?? null,
    retriedTaskId: t.retriedTaskId ?? null,
    reason: t.reasonForIncompletion ?? null,
    input: t.inputData ?? null,
    output: t.outputData ?? null,
    workerId: t.workerId ?? null,
    pollCount: t.pollCount ?? null,
    callbackAfterSeconds: t.callbackAfterSeconds ?? null,
  })),
});

/** The call's answer (null for none), or "error: <message>" when the SDK threw. */
async function attempt(call) {
  try {
    const answer = await call();
    return answer === undefined ? null : answer;
  } catch (error) {
    return `error: ${error.message ?? error}`;
  }
}

/** getWorkflow until `until(run)` holds, the run ended, or `ms` passed. */
async function waitFor(executor, workflowId, until, ms = SETTLE_MS) {
  const deadline = Date.now() + ms;
  for (;;) {
    const run = await executor.getWorkflow(workflowId, true);
    if (until(run) || ENDED.has(run.status) || Date.now() > deadline) return run;
    await sleep(50);
  }
}

const ended = (run) => ENDED.has(run.status);
const taskIs = (ref, status) => (run) =>
  (run.tasks ?? []).some((t) => t.referenceTaskName === ref && t.status === status);

/** Run `body` while a TaskManager polls for `workers`; stop polling afterwards. */
async function withWorkers(client, workerID, workers, body) {
  const manager = new TaskManager(client, workers, {
    options: { workerID, pollInterval: 50, concurrency: 1 },
  });
  manager.startPolling();
  try {
    return await body();
  } finally {
    await manager.stopPolling();
  }
}

const logLines = async (tasks, taskId) => {
  const logs = await attempt(() => tasks.getTaskLogs(taskId));
  return Array.isArray(logs) ? logs.map((entry) => entry.log) : logs;
};

// --- workers complete a workflow ---------------------------------------------------------

/** Two SIMPLE tasks in sequence, their outputs passed on with ${...}, then a SWITCH on
 * the second one's output whose case forks two branches joined by a JOIN. */
async function flow({ client, executor, metadata }) {
  const add = `${prefix}_add`;
  const mul = `${prefix}_mul`;
  const tag = `${prefix}_tag`;
  await metadata.registerTasks([taskDef(add), taskDef(mul), taskDef(tag)]);
  const name = `${prefix}_flow`;
  const tagged = (ref) => simpleTask(ref, tag, { side: ref, value: "${second.output.product}" });
  const fan = {
    name: "fan",
    taskReferenceName: "fan",
    type: "FORK_JOIN",
    forkTasks: [[tagged("left")], [tagged("right")]],
  };
  const join = {
    name: "fan_join",
    taskReferenceName: "fan_join",
    type: "JOIN",
    joinOn: ["left", "right"],
  };
  const definition = workflowDef(
    name,
    [
      simpleTask("first", add, { a: "${workflow.input.a}", b: "${workflow.input.b}" }),
      simpleTask("second", mul, { x: "${first.output.sum}", factor: 3 }),
      switchTask("route", "${second.output.parity}", { even: [fan, join] }, [tagged("odd")]),
    ],
    {
      inputParameters: ["a", "b"],
      outputParameters: {
        sum: "${first.output.sum}",
        product: "${second.output.product}",
        joined: "${fan_join.output}",
      },
    },
  );
  await metadata.registerWorkflowDef(definition, true);

  const executed = [];
  const recorded = (taskDefName, output) => ({
    taskDefName,
    execute: async (task) => {
      executed.push({ type: task.taskType, ref: task.referenceTaskName, input: task.inputData });
      return { status: "COMPLETED", outputData: output(task.inputData) };
    },
  });
  const workers = [
    recorded(add, ({ a, b }) => ({ sum: a + b })),
    recorded(mul, ({ x, factor }) => {
      const product = x * factor;
      return { product, parity: product % 2 ? "odd" : "even" };
    }),
    recorded(tag, ({ side, value }) => ({ tagged: `${side}:${value}` })),
  ];
  const workflowId = await executor.startWorkflow({ name, version: 1, input: { a: 2, b: 4 } });
  const run = await withWorkers(client, "js-flow-worker", workers, () =>
    waitFor(executor, workflowId, ended),
  );
  executed.sort((x, y) => x.ref.localeCompare(y.ref));
  const registered = await metadata.getWorkflowDef(name, 1);
  return {
    workflowId,
    run: view(run),
    executed,
    registered: { name: registered.name, refs: registered.tasks.map((t) => t.taskReferenceName) },
  };
}

/** A worker that throws on a task's first attempt (retryCount 0) and succeeds on its
 * retry; the task definition allows one retry. */
async function failOnce({ client, executor, metadata, tasks }) {
  const flaky = `${prefix}_flaky`;
  await metadata.registerTask(taskDef(flaky, { retryCount: 1 }));
  const name = `${prefix}_retry`;
  await metadata.registerWorkflowDef(
    workflowDef(name, [simpleTask("flaky", flaky, { n: "${workflow.input.n}" })], {
      outputParameters: { tries: "${flaky.output.tries}", n: "${flaky.output.n}" },
    }),
    true,
  );
  const attempts = [];
  const worker = {
    taskDefName: flaky,
    execute: async (task) => {
      attempts.push({ taskId: task.taskId, retryCount: task.retryCount });
      if (task.retryCount === 0) throw new Error("first try fails");
      const outputData = { tries: task.retryCount + 1, n: task.inputData.n };
      return { status: "COMPLETED", outputData };
    },
  };
  const workflowId = await executor.startWorkflow({ name, version: 1, input: { n: 7 } });
  const run = await withWorkers(client, "js-flaky-worker", [worker], () =>
    waitFor(executor, workflowId, ended),
  );
  const failed = (run.tasks ?? []).find((t) => t.status === "FAILED");
  const failedLogs = failed ? await logLines(tasks, failed.taskId) : null;
  return { workflowId, run: view(run), attempts, failedLogs };
}

/** A worker that answers IN_PROGRESS with callbackAfterSeconds (and a log line through
 * its TaskContext) the first time it sees a task, and COMPLETED the next time. */
async function inProgress({ client, executor, metadata, tasks }) {
  const slow = `${prefix}_slow`;
  await metadata.registerTask(taskDef(slow));
  const name = `${prefix}_in_progress`;
  await metadata.registerWorkflowDef(
    workflowDef(name, [simpleTask("slow", slow, {})], {
      outputParameters: { progress: "${slow.output.progress}" },
    }),
    true,
  );
  const handouts = [];
  const worker = {
    taskDefName: slow,
    execute: async (task) => {
      handouts.push({ taskId: task.taskId, pollCount: task.pollCount, at: Date.now() });
      if (handouts.filter((h) => h.taskId === task.taskId).length === 1) {
        getTaskContext()?.addLog("started, checking back in 2 s");
        return { status: "IN_PROGRESS", callbackAfterSeconds: 2, outputData: { progress: 50 } };
      }
      return { status: "COMPLETED", outputData: { progress: 100 } };
    },
  };
  const workflowId = await executor.startWorkflow({ name, version: 1, input: {} });
  const answered = (run) => handouts.length > 0 && run.tasks?.[0]?.outputData?.progress === 50;
  const [middle, run] = await withWorkers(client, "js-slow-worker", [worker], async () => [
    await waitFor(executor, workflowId, answered, 10000),
    await waitFor(executor, workflowId, ended),
  ]);
  return {
    workflowId,
    middle: view(middle),
    run: view(run),
    handouts: handouts.map((h) => ({ ...h, afterMs: h.at - handouts[0].at })),
    logs: run.tasks?.length ? await logLines(tasks, run.tasks[0].taskId) : null,
  };
}

// --- steering runs -----------------------------------------------------------------------

/** A worker task, a WAIT task, a worker task: pause, complete the WAIT while paused,
 * resume; each status the SDK reads back. */
async function pauseResume({ client, executor, metadata }) {
  const step = `${prefix}_step`;
  await metadata.registerTask(taskDef(step));
  const name = `${prefix}_pause`;
  const steps = [
    simpleTask("step", step, { n: 1 }),
    waitTask("hold"),
    simpleTask("after", step, { n: 2 }),
  ];
  await metadata.registerWorkflowDef(
    workflowDef(name, steps, {
      outputParameters: { approved: "${hold.output.approved}", n: "${after.output.n}" },
    }),
    true,
  );
  const worker = completing(step, (task) => ({ n: task.inputData.n }));
  const workflowId = await executor.startWorkflow({ name, version: 1, input: {} });
  return withWorkers(client, "js-step-worker", [worker], async () => {
    const out = { workflowId };
    await waitFor(executor, workflowId, taskIs("hold", "IN_PROGRESS"));
    out.pause = await attempt(() => executor.pause(workflowId));
    out.afterPause = (await executor.getWorkflow(workflowId, false)).status;
    out.statusSummary = await attempt(
      async () => (await executor.getWorkflowStatus(workflowId, false, false)).status,
    );
    out.completeHold = await attempt(() =>
      executor.updateTaskByRefName("hold", workflowId, "COMPLETED", { approved: true }),
    );
    await sleep(1500); // a paused run schedules nothing: "after" must not come
    out.whilePaused = view(await executor.getWorkflow(workflowId, true));
    out.resume = await attempt(() => executor.resume(workflowId));
    out.afterResume = (await executor.getWorkflow(workflowId, false)).status;
    out.run = view(await waitFor(executor, workflowId, ended));
    return out;
  });
}

/** Terminate a run waiting on a WAIT task, then restart it and let it complete. */
async function terminateRestart({ client, executor, metadata }) {
  const step = `${prefix}_step`;
  await metadata.registerTask(taskDef(step));
  const name = `${prefix}_restart`;
  await metadata.registerWorkflowDef(
    workflowDef(name, [simpleTask("step", step, { n: "${workflow.input.n}" }), waitTask("hold")], {
      outputParameters: { n: "${step.output.n}", approved: "${hold.output.approved}" },
    }),
    true,
  );
  const worker = completing(step, (task) => ({ n: task.inputData.n }));
  const workflowId = await executor.startWorkflow({ name, version: 1, input: { n: 5 } });
  return withWorkers(client, "js-step-worker", [worker], async () => {
    const out = { workflowId };
    out.before = view(await waitFor(executor, workflowId, taskIs("hold", "IN_PROGRESS")));
    out.terminate = await attempt(() => executor.terminate(workflowId, "enough for now"));
    out.terminated = view(await executor.getWorkflow(workflowId, true));
    out.restart = await attempt(() => executor.restart(workflowId, false));
    out.afterRestart = (await executor.getWorkflow(workflowId, false)).status;
    out.restarted = view(await waitFor(executor, workflowId, taskIs("hold", "IN_PROGRESS")));
    out.completeHold = await attempt(() =>
      executor.updateTaskByRefName("hold", workflowId, "COMPLETED", { approved: "yes" }),
    );
    out.run = view(await waitFor(executor, workflowId, ended));
    return out;
  });
}

/** A worker that throws NonRetryableException on its run's first try: the run FAILS;
 * the SDK's retry() retries the failed task, which then completes. */
async function retryFailed({ client, executor, metadata }) {
  const picky = `${prefix}_picky`;
  await metadata.registerTask(taskDef(picky, { retryCount: 2 }));
  const name = `${prefix}_retry_failed`;
  await metadata.registerWorkflowDef(
    workflowDef(name, [simpleTask("picky", picky, { order: "${workflow.input.order}" })], {
      outputParameters: { accepted: "${picky.output.accepted}" },
    }),
    true,
  );
  const failedRuns = new Set();
  const worker = {
    taskDefName: picky,
    execute: async (task) => {
      if (!failedRuns.has(task.workflowInstanceId)) {
        failedRuns.add(task.workflowInstanceId);
        throw new NonRetryableException("order not found yet");
      }
      return { status: "COMPLETED", outputData: { accepted: task.inputData.order } };
    },
  };
  const workflowId = await executor.startWorkflow({ name, version: 1, input: { order: "A-1" } });
  return withWorkers(client, "js-picky-worker", [worker], async () => {
    const out = { workflowId };
    out.failed = view(await waitFor(executor, workflowId, ended));
    out.retry = await attempt(() => executor.retry(workflowId, false));
    out.afterRetry = (await executor.getWorkflow(workflowId, false)).status;
    out.run = view(await waitFor(executor, workflowId, ended));
    return out;
  });
}

/** Reruns a completed run from its first task with a new input for that task
 * (RerunWorkflowRequest.taskInput): it and the task after it run again. */
async function rerun({ client, executor, metadata }) {
  const step = `${prefix}_double`;
  await metadata.registerTask(taskDef(step));
  const name = `${prefix}_rerun`;
  const steps = [
    simpleTask("first", step, { n: "${workflow.input.n}" }),
    simpleTask("second", step, { n: "${first.output.doubled}" }),
  ];
  await metadata.registerWorkflowDef(
    workflowDef(name, steps, { outputParameters: { result: "${second.output.doubled}" } }),
    true,
  );
  const worker = completing(step, (task) => ({ doubled: task.inputData.n * 2 }));
  const workflowId = await executor.startWorkflow({ name, version: 1, input: { n: 1 } });
  return withWorkers(client, "js-double-worker", [worker], async () => {
    const out = { workflowId };
    out.before = view(await waitFor(executor, workflowId, ended));
    const first = out.before.tasks.find((t) => t.ref === "first");
    out.rerun = await attempt(() =>
      executor.reRun(workflowId, { reRunFromTaskId: first.taskId, taskInput: { n: 5 } }),
    );
    // the rerun answers once the run is RUNNING again: until it completed with the new
    // result (or SETTLE_MS)
    const rerunDone = (run) => run.status === "COMPLETED" && run.output?.result === 20;
    out.run = view(await waitFor(executor, workflowId, rerunDone, 15000));
    out.rerunTask = await attempt(async () => {
      const task = await executor.getTask(first.taskId);
      return { status: task.status, inputData: task.inputData, outputData: task.outputData };
    });
    return out;
  });
}

/** The steering calls Conductor refuses (or takes) on runs that are not in the state
 * they act on: each call's answer (null, or the error the SDK threw) and the run after. */
async function refusals({ executor, metadata }) {
  const name = `${prefix}_refusals`;
  await metadata.registerWorkflowDef(workflowDef(name, [waitTask("hold")]), true);
  const start = async () => {
    const id = await executor.startWorkflow({ name, version: 1, input: {} });
    await waitFor(executor, id, taskIs("hold", "IN_PROGRESS"));
    return id;
  };
  const state = async (id) => {
    const run = await executor.getWorkflow(id, false);
    return { status: run.status, reason: run.reasonForIncompletion ?? null };
  };
  const out = {};
  const running = await start();
  out.retryRunning = await attempt(() => executor.retry(running, false));
  out.restartRunning = await attempt(() => executor.restart(running, false));
  out.resumeRunning = await attempt(() => executor.resume(running));
  out.running = await state(running);
  out.failHold = await attempt(() =>
    executor.updateTaskByRefName("hold", running, "FAILED", { why: "rejected" }),
  );
  out.failed = (await waitFor(executor, running, ended)).status;
  out.terminateFailed = await attempt(() => executor.terminate(running, "cleaning up"));
  out.afterTerminateFailed = await state(running);
  out.pauseEnded = await attempt(() => executor.pause(running));

  const done = await start();
  await executor.updateTaskByRefName("hold", done, "COMPLETED", {});
  out.completed = (await waitFor(executor, done, ended)).status;
  out.terminateCompleted = await attempt(() => executor.terminate(done, "too late"));
  out.afterTerminateCompleted = await state(done);

  const stopped = await start();
  out.terminate = await attempt(() => executor.terminate(stopped, "first stop"));
  out.terminateAgain = await attempt(() => executor.terminate(stopped, "second stop"));
  out.stopped = await state(stopped);
  return out;
}

// --- what else a JS team calls -----------------------------------------------------------

/** The ConductorWorkflow builder (register, execute, startWorkflow) with workers run by
 * the SDK's TaskHandler; WorkflowExecutor.executeWorkflow and startWorkflowByName. */
async function execute({ client, executor }) {
  const greet = `${prefix}_greet`;
  const wf = new ConductorWorkflow(executor, `${prefix}_built`)
    .description("built with the JS SDK")
    .ownerEmail(OWNER)
    .add(simpleTask("greet", greet, { name: "${workflow.input.name}" }))
    .outputParameters({ greeting: "${greet.output.greeting}" });
  await wf.register(true);
  const worker = completing(greet, (task) => ({ greeting: `Hello, ${task.inputData.name}` }));
  const handler = new TaskHandler({
    client,
    scanForDecorated: false,
    workers: [{ ...worker, pollInterval: 50 }],
  });
  await handler.startWorkers();
  try {
    const out = {};
    const built = await wf.execute({ name: "Ada" });
    const { status, output } = built;
    out.built = { status, output, workflowId: built.workflowId ?? null };
    const direct = await executor.executeWorkflow(
      { name: wf.getName(), version: 1, input: { name: "Bo" } },
      wf.getName(),
      1,
      `${prefix}-request`,
    );
    out.direct = {
      status: direct.status,
      output: direct.output,
      workflowId: direct.workflowId ?? null,
      requestId: direct.requestId ?? null,
    };
    const started = await wf.startWorkflow({ name: "Cy" }, `${prefix}-order`);
    out.started = view(await waitFor(executor, started, ended));
    out.byName = await executor.startWorkflowByName(
      wf.getName(),
      { name: "Di" },
      1,
      `${prefix}-by-name`,
    );
    const byName = await waitFor(executor, out.byName, ended);
    out.byNameRun = {
      status: byName.status,
      output: byName.output,
      correlationId: byName.correlationId,
    };
    return out;
  } finally {
    await handler.stopWorkers();
  }
}

/** What a JS team reads about its definitions, tasks, queues, workers and runs:
 * registering twice, the task definition, queue sizes, poll data, a task by id, task
 * logs, the status summary, search. */
async function lookups({ client, executor, metadata, tasks }) {
  const job = `${prefix}_job`;
  await metadata.registerTask(taskDef(job, { description: "a JS job" }));
  const name = `${prefix}_lookups`;
  const def = workflowDef(name, [simpleTask("job", job, { x: "${workflow.input.x}" })], {
    outputParameters: { y: "${job.output.y}" },
  });
  const out = {};
  // registered once, again without overwrite (Conductor: 409), then with overwrite
  out.register = await attempt(() => metadata.registerWorkflowDef(def));
  out.registerAgain = await attempt(() =>
    metadata.registerWorkflowDef({ ...def, description: "again" }),
  );
  out.overwrite = await attempt(() =>
    metadata.registerWorkflowDef({ ...def, description: "overwritten" }, true),
  );
  out.workflowDef = await attempt(async () => {
    const d = await metadata.getWorkflowDef(name, 1);
    const refs = d.tasks.map((t) => t.taskReferenceName);
    return { name: d.name, version: d.version, description: d.description ?? null, refs };
  });
  out.taskDef = await attempt(async () => {
    const d = await metadata.getTask(job);
    const { retryCount, responseTimeoutSeconds, description } = d;
    return { name: d.name, retryCount, responseTimeoutSeconds, description };
  });

  const workflowId = await executor.startWorkflow({
    name,
    version: 1,
    input: { x: 20 },
    correlationId: `${prefix}-c`,
  });
  out.workflowId = workflowId;
  await waitFor(executor, workflowId, taskIs("job", "SCHEDULED"));
  // the row is written before its message is sent (as Conductor creates a task and then
  // pushes it): the size is read again until the message is there, for a while
  const queued = () => tasks.getQueueSizeForTask([job]);
  for (let i = 0; i < 100 && (await queued())[job] !== 1; i++) await sleep(50);
  out.queuedBefore = await attempt(queued);
  const worker = {
    taskDefName: job,
    execute: async (task) => {
      getTaskContext()?.addLog(`doubling ${task.inputData.x}`);
      return { status: "COMPLETED", outputData: { y: task.inputData.x * 2 } };
    },
  };
  const run = await withWorkers(client, "js-lookups-worker", [worker], () =>
    waitFor(executor, workflowId, ended),
  );
  out.run = view(run);
  out.queuedAfter = await attempt(() => tasks.getQueueSizeForTask([job]));
  out.pollData = await attempt(async () =>
    (await tasks.getTaskPollData(job)).map((p) => ({
      queueName: p.queueName,
      workerId: p.workerId,
      polled: p.lastPollTime > 0,
    })),
  );

  const taskId = run.tasks?.[0]?.taskId;
  const pick = (t) => ({
    taskId: t.taskId,
    status: t.status,
    outputData: t.outputData,
    workerId: t.workerId,
    referenceTaskName: t.referenceTaskName,
    workflowInstanceId: t.workflowInstanceId,
  });
  out.taskByClient = await attempt(async () => pick(await tasks.getTask(taskId)));
  out.taskByExecutor = await attempt(async () => pick(await executor.getTask(taskId)));
  out.addLog = await attempt(() => tasks.addTaskLog(taskId, "checked by the JS team"));
  out.logs = await logLines(tasks, taskId);
  out.status = await attempt(async () => {
    const s = await executor.getWorkflowStatus(workflowId, true, true);
    const { status, output, correlationId } = s;
    return { workflowId: s.workflowId, status, output, correlationId };
  });
  out.search = await attempt(async () => {
    const query = `workflowType IN (${name}) AND status IN (COMPLETED)`;
    const found = await executor.search(0, 10, query, "*");
    return {
      totalHits: found.totalHits,
      results: found.results.map((s) => ({
        workflowId: s.workflowId,
        status: s.status,
        correlationId: s.correlationId,
      })),
    };
  });
  return out;
}

const SCENARIOS = {
  flow,
  failOnce,
  inProgress,
  pauseResume,
  terminateRestart,
  retryFailed,
  rerun,
  refusals,
  execute,
  lookups,
};

async function main() {
  const run = SCENARIOS[scenario];
  if (!run) throw new Error(`no scenario ${scenario}: one of ${Object.keys(SCENARIOS).join(", ")}`);
  const clients = await OrkesClients.from({ serverUrl });
  const out = await run({
    client: clients.getClient(),
    executor: clients.getWorkflowClient(),
    metadata: clients.getMetadataClient(),
    tasks: clients.getTaskClient(),
  });
  console.log(JSON.stringify(out));
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
