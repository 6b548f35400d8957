// Conductor's official JavaScript client (@io-orkes/conductor-javascript) searching the
// runs of a workflow with each `sort` given in argv ("-": none): prints
// {sort: [workflowId...]} as JSON, or {sort: "error: <message>"} for a search the server
// refused. CommonJS, so that NODE_PATH finds the installed client.
// Usage: node search.cjs <serverUrl ending in /api> <workflowType> <sort>...
const { createConductorClient, WorkflowExecutor } = require("@io-orkes/conductor-javascript");

async function main() {
  const [serverUrl, workflowType, ...sorts] = process.argv.slice(2);
  const executor = new WorkflowExecutor(await createConductorClient({ serverUrl }));
  const out = {};
  for (const sort of sorts) {
    const key = sort === "-" ? "(none)" : sort;
    try {
      const found = await executor.search(
        0, 10, `workflowType IN (${workflowType})`, "*", sort === "-" ? undefined : sort,
      );
      out[key] = found.results.map((summary) => summary.workflowId);
    } catch (error) {
      out[key] = `error: ${error.message ?? error}`;
    }
  }
  console.log(JSON.stringify(out));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
