/**
 * The body-analysis worker (`ProposalPool`): compiles its own copy of the gate's policies from
 * their texts and runs `propose()` for each request it is given, answering with plain data (the
 * tool by id, the body left behind). Nothing here touches the store, the network or DNS: the host
 * names a request's address belongs to come with the request.
 */
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { Classifier, parsePolicyFiles } from '../policy/index.js';
import { propose } from './proposal.js';
import { ANALYSIS_NICE } from './proposal-pool.js';
import { toWire, type WorkerJob, type WorkerReply, type WorkerSetup } from './proposal-wire.js';
import { RouteClassifier } from './route-classifier.js';

// On Linux the nice value is per thread: this lowers the priority of this worker alone, so that
// when the cores are busy the event loop (every other client) runs first and large-body analysis
// waits (`man 2 setpriority`, BUGS). Elsewhere it would lower the whole process: not done there.
try {
  if (process.platform === 'linux') setPriority(0, ANALYSIS_NICE);
} catch {
  // Not permitted here: the worker runs at the process's priority.
}

const setup = workerData as WorkerSetup;
const policies = parsePolicyFiles(setup.sources);
const classifier = new Classifier(policies);
/** The names of the request being analysed (set per job: the worker runs one job at a time). */
let names: readonly string[] = [];
const routes = new RouteClassifier(classifier, { namesFor: () => names });
const ctx = {
  classifier,
  routes,
  scope: setup.scope,
  authorityKey: setup.authorityKey,
  maxDuplicateSkips: setup.maxDuplicateSkips,
  bodyLimits: setup.bodyLimits,
};

parentPort?.on('message', (job: WorkerJob) => {
  let reply: WorkerReply;
  try {
    names = job.names;
    reply = { id: job.id, ok: true, proposed: toWire(propose(ctx, job.request)) };
  } catch (err) {
    reply = { id: job.id, ok: false, error: err instanceof Error ? err.message : String(err) };
  } finally {
    names = [];
  }
  parentPort?.postMessage(reply);
});
