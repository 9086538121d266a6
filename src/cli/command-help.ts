import { effectgateVersion } from '../effectgate-version.js';
import {
  LIST_OPTIONS as APPROVALS_LIST_OPTIONS,
  USAGE as APPROVALS_USAGE,
  APPROVE_OPTIONS,
  DECIDE_OPTIONS,
} from './approvals-command.js';
import { AUDIT_OPTIONS, USAGE as AUDIT_USAGE } from './audit-command.js';
import { CA_BUNDLE_OPTIONS, CA_OPTIONS, USAGE as CA_USAGE } from './ca-command.js';
import { DEMO_OPTIONS, USAGE as DEMO_USAGE } from './demo-command.js';
import { GRANT_OPTIONS, GRANTS_OPTIONS } from './grants-command.js';
import { KEYS_OPTIONS, USAGE as KEYS_USAGE } from './keys-command.js';
import { MIGRATE_OPTIONS, USAGE as MIGRATE_USAGE } from './migrate-command.js';
import {
  LIST_OPTIONS as OPERATIONS_LIST_OPTIONS,
  USAGE as OPERATIONS_USAGE,
  RESOLVE_OPTIONS,
} from './operations-command.js';
import type { FlagTable } from './parse-flags.js';
import { POLICIES_OPTIONS, USAGE as POLICIES_USAGE } from './policies-command.js';
import { PROXY_OPTIONS, USAGE as PROXY_USAGE } from './proxy-command.js';
import { RECOVER_OPTIONS, USAGE as RECOVER_USAGE } from './recover-command.js';
import { RELEASE_OPTIONS, RUNS_LIST_OPTIONS, USAGE as RUNS_USAGE } from './runs-command.js';
import { TRAIL_OPTIONS, USAGE as TRAIL_USAGE } from './trail-command.js';

/** A command's usage (its `--help`) and the flag tables its subcommands parse with. */
export interface CommandSpec {
  readonly usage: string;
  readonly flags: readonly FlagTable[];
}

/**
 * Every command: `effectgate <command> --help` (or `-h`) prints its usage, with every flag and
 * its default, before any flag is parsed, so Node's parseArgs text never answers a request for
 * help. `flags` lets a test hold each usage to the flags parsed, so they cannot
 * drift apart.
 */
export const COMMANDS: Readonly<Record<string, CommandSpec>> = {
  proxy: { usage: PROXY_USAGE, flags: [PROXY_OPTIONS] },
  policies: { usage: POLICIES_USAGE.trimEnd(), flags: [POLICIES_OPTIONS] },
  operations: { usage: OPERATIONS_USAGE, flags: [OPERATIONS_LIST_OPTIONS, RESOLVE_OPTIONS] },
  approvals: {
    usage: APPROVALS_USAGE,
    flags: [APPROVALS_LIST_OPTIONS, DECIDE_OPTIONS, APPROVE_OPTIONS, GRANT_OPTIONS, GRANTS_OPTIONS],
  },
  trail: { usage: TRAIL_USAGE, flags: [TRAIL_OPTIONS] },
  recover: { usage: RECOVER_USAGE, flags: [RECOVER_OPTIONS] },
  runs: { usage: RUNS_USAGE, flags: [RUNS_LIST_OPTIONS, RELEASE_OPTIONS] },
  audit: { usage: AUDIT_USAGE, flags: [AUDIT_OPTIONS] },
  migrate: { usage: MIGRATE_USAGE, flags: [MIGRATE_OPTIONS] },
  ca: { usage: CA_USAGE, flags: [CA_OPTIONS, CA_BUNDLE_OPTIONS] },
  keys: { usage: KEYS_USAGE, flags: [KEYS_OPTIONS] },
  demo: { usage: DEMO_USAGE, flags: [DEMO_OPTIONS] },
};

/** The usage of `command` when `args` asks for help (before a `--`), else `null`. */
export function helpFor(command: string, args: readonly string[]): string | null {
  const usage = COMMANDS[command]?.usage;
  if (usage === undefined) return null;
  const end = args.indexOf('--');
  const asked = (end === -1 ? args : args.slice(0, end)).some((a) => a === '--help' || a === '-h');
  return asked ? usage : null;
}

/** `effectgate --version`: the package's version, read from its package.json. */
export function version(): string {
  return effectgateVersion();
}
