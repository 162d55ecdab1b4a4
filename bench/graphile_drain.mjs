// graphile-worker's drain of N no-op jobs with its batching options (a local queue, batched
// completion), as a baseline for bench/queue_throughput.py. The package is installed into a
// scratch folder at run time by the Python side, never into the project:
//   node bench/graphile_drain.mjs <scratch node_modules dir> <connection string> <jobs> <concurrency> <local queue size>
// Prints one JSON line: {"enqueue": jobs/s, "drain": jobs/s}.
import { createRequire } from "node:module";
import path from "node:path";

const [modules, connectionString, jobsArg, concurrencyArg, localQueueArg] = process.argv.slice(2);
const require = createRequire(path.join(modules, "noop.js"));
const { run, makeWorkerUtils } = require("graphile-worker");
const jobs = Number(jobsArg);

const utils = await makeWorkerUtils({ connectionString });
await utils.migrate();
let began = performance.now();
for (let start = 0; start < jobs; start += 1000) {
  const specs = [];
  for (let n = start; n < Math.min(jobs, start + 1000); n++) {
    specs.push({ identifier: "noop", payload: { n } });
  }
  await utils.addJobs(specs);
}
const enqueue = jobs / ((performance.now() - began) / 1000);
await utils.release();

let done = 0;
let finished;
const allDone = new Promise((resolve) => { finished = resolve; });
began = performance.now();
const runner = await run({
  preset: {
    worker: {
      connectionString,
      concurrentJobs: Number(concurrencyArg),
      maxPoolSize: 10,
      pollInterval: 1000,
      localQueue: { size: Number(localQueueArg) },
      completeJobBatchDelay: 0,
      failJobBatchDelay: 0,
    },
  },
  noHandleSignals: true,
  taskList: {
    noop: async () => {
      done += 1;
      if (done === jobs) finished();
    },
  },
});
await allDone;
const drain = jobs / ((performance.now() - began) / 1000);
await runner.stop();
console.log(JSON.stringify({ enqueue, drain }));
