/**
 * Hot reload of `effectgate proxy`'s policies: on SIGHUP, and with `--watch`
 * when a file under `--policies` changes. The set is loaded by the same `loadPolicies` the start
 * uses; an invalid one is refused with its `file:line:column` issues and the previous set keeps
 * serving. A valid one is handed to `gate.reload()`, which lets requests in flight finish under
 * the set they started with.
 *
 * The `egress` block is not reloaded: the proxy checks it when it connects, so a new block would
 * reach neither the keep-alive connections its upstream pools hold nor the CONNECT tunnels already
 * open, and a tightened deny list half applied is worse than one refused. A reload that changes it
 * is refused as a whole, naming the file, and says a restart applies it.
 */
import { type FSWatcher, watch } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import type { PolicyReloadResult, PrometheusMetrics } from '../admin/index.js';
import type { Gate, ReloadReport } from '../engine/index.js';
import { loadPolicies, type PolicySet, policySources } from '../policy/index.js';
import type { EffectgateLogger } from './logger.js';

/** How long a burst of file events (an editor's write, rename and chmod) is waited out. */
export const WATCH_DEBOUNCE_MS = 200;

export interface PolicyReloaderOptions {
  /** `--policies`: a folder or one file, as the start loaded it. */
  readonly path: string;
  readonly gate: Gate;
  readonly logger: EffectgateLogger;
  /** Where reloads are counted (`--admin`); none without an admin server. */
  readonly metrics: PrometheusMetrics | null;
  /** `--watch`: reload when a file under `path` changes, not only on SIGHUP. */
  readonly watch: boolean;
  readonly debounceMs?: number;
}

/** What one reload did; `refused` carries the message that was logged. */
export type ReloadOutcome =
  | { readonly result: 'applied'; readonly report: ReloadReport }
  | { readonly result: 'refused'; readonly message: string };

export class PolicyReloader {
  readonly #o: PolicyReloaderOptions;
  readonly #onSignal = (): void => void this.reload('SIGHUP');
  #watcher: FSWatcher | null = null;
  #timer: NodeJS.Timeout | null = null;
  /** The reload running now, and whether another was asked for meanwhile (coalesced into one). */
  #running: Promise<ReloadOutcome> | null = null;
  #again: string | null = null;
  #closed = false;

  constructor(options: PolicyReloaderOptions) {
    this.#o = options;
  }

  /** Listens for SIGHUP and, with `watch`, for file changes (a watch that cannot start is logged, not fatal). */
  async start(): Promise<void> {
    process.on('SIGHUP', this.#onSignal);
    if (!this.#o.watch) return;
    try {
      this.#watcher = await this.#watch();
    } catch (err) {
      this.#o.logger.warn(
        { policies: this.#o.path, err: err instanceof Error ? err.message : String(err) },
        'cannot watch the policies: reload with SIGHUP (kill -HUP) instead',
      );
    }
  }

  /** Stops listening; a reload already running finishes (the gate refuses it once it closes). */
  close(): void {
    this.#closed = true;
    process.off('SIGHUP', this.#onSignal);
    this.#watcher?.close();
    this.#watcher = null;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
  }

  /**
   * Loads the policies again and applies them, or refuses them and keeps the set serving now.
   * A reload asked for while one runs is run once more after it, so the last change always lands.
   */
  reload(trigger: string): Promise<ReloadOutcome> {
    if (this.#running !== null) {
      this.#again = trigger;
      return this.#running;
    }
    this.#running = this.#reload(trigger).finally(() => {
      this.#running = null;
      const again = this.#again;
      this.#again = null;
      if (again !== null && !this.#closed) void this.reload(again);
    });
    return this.#running;
  }

  async #reload(trigger: string): Promise<ReloadOutcome> {
    const { gate, logger, path } = this.#o;
    let next: PolicySet;
    try {
      next = await loadPolicies(path);
    } catch (err) {
      // PolicyError's message is its issues, one `file:line:column: field: message` a line.
      return this.#refused(trigger, err instanceof Error ? err.message : String(err));
    }
    const egress = egressChange(gate.policies, next);
    if (egress !== null) return this.#refused(trigger, egress);
    let report: ReloadReport;
    try {
      report = await gate.reload(next);
    } catch (err) {
      return this.#refused(trigger, err instanceof Error ? err.message : String(err));
    }
    this.#count('applied');
    logger.info(
      {
        trigger,
        tools: report.tools,
        tool_ids: next.tools.map((t) => t.id),
        generation: report.generation,
        digest: report.digest,
        previous: report.previous,
      },
      'policies reloaded',
    );
    return { result: 'applied', report };
  }

  #refused(trigger: string, message: string): ReloadOutcome {
    this.#count('refused');
    this.#o.logger.error(
      { trigger, generation: this.#o.gate.generation.generation, policies: this.#o.path, issues: message },
      'policies not reloaded, the previous set keeps serving',
    );
    return { result: 'refused', message };
  }

  #count(result: PolicyReloadResult): void {
    this.#o.metrics?.policyReload(result);
  }

  /**
   * Watches the folder (recursively where the platform can; only its own files are loaded, so a
   * change deeper down reloads the same set, harmlessly), or a single file's folder filtered on
   * its name: editors and Kubernetes ConfigMaps replace a file by renaming another over it, which
   * a watch on the file itself would not follow.
   */
  async #watch(): Promise<FSWatcher> {
    const { path } = this.#o;
    const isDir = (await stat(path)).isDirectory();
    const folder = isDir ? path : dirname(path);
    const only = isDir ? null : basename(path);
    const onEvent = (_event: string, name: string | Buffer | null): void => {
      if (only !== null && name !== null && name.toString() !== only) return;
      this.#schedule();
    };
    let watcher: FSWatcher;
    try {
      watcher = watch(folder, { recursive: isDir, persistent: false }, onEvent);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ERR_FEATURE_UNAVAILABLE_ON_PLATFORM') throw err;
      watcher = watch(folder, { persistent: false }, onEvent);
    }
    watcher.on('error', (err) =>
      this.#o.logger.warn(
        { policies: path, err: err.message },
        'watching the policies failed: reload with SIGHUP (kill -HUP) from now on',
      ),
    );
    return watcher;
  }

  #schedule(): void {
    if (this.#closed) return;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = null;
      void this.reload('watch');
    }, this.#o.debounceMs ?? WATCH_DEBOUNCE_MS);
  }
}

/** Why `next` cannot be applied for its `egress` block, or null when the block is the same. */
export function egressChange(current: PolicySet, next: PolicySet): string | null {
  const text = (p: PolicySet): string =>
    `deny [${[...p.egress.deny].sort().join(', ')}] allow [${[...p.egress.allow].sort().join(', ')}]`;
  if (text(current) === text(next)) return null;
  const declaring = [...egressFiles(next), ...egressFiles(current)];
  const where = declaring.length === 0 ? 'the policies' : [...new Set(declaring)].join(', ');
  return `egress in ${where} changed from ${text(current)} to ${text(next)}; the proxy checks egress when it connects, so open connections and tunnels would keep the old rules: restart effectgate proxy to apply an egress change`;
}

/** The files of a loaded set that declare `egress:` at their top level. */
function egressFiles(set: PolicySet): string[] {
  return (policySources(set) ?? []).filter((s) => /^egress\s*:/m.test(s.text)).map((s) => s.file);
}
