import { readFileSync } from 'node:fs';
import { USAGE as APPROVALS_USAGE } from './approvals-command.js';
import { USAGE as AUDIT_USAGE } from './audit-command.js';
import { USAGE as CA_USAGE } from './ca-command.js';
import { USAGE as DEMO_USAGE } from './demo-command.js';
import { USAGE as OPERATIONS_USAGE } from './operations-command.js';
import { USAGE as POLICIES_USAGE } from './policies-command.js';
import { PROXY_OPTIONS } from './proxy-command.js';
import { USAGE as RECOVER_USAGE } from './recover-command.js';
import { USAGE as RUNS_USAGE } from './runs-command.js';
import { USAGE as TRAIL_USAGE } from './trail-command.js';

/**
 * `effectgate <command> --help` (or `-h`) for every command: its usage, with every flag, printed
 * before any flag is parsed, so Node's parseArgs text never answers a request for help (issue 14
 * item 5). The proxy's is made from its own flag table, so a new flag is never left out.
 */
const COMMAND_USAGE: Readonly<Record<string, string>> = {
  proxy: proxyUsage(),
  policies: POLICIES_USAGE,
  operations: OPERATIONS_USAGE,
  approvals: APPROVALS_USAGE,
  trail: TRAIL_USAGE,
  recover: RECOVER_USAGE,
  runs: RUNS_USAGE,
  audit: AUDIT_USAGE,
  migrate: 'usage: effectgate migrate [--store URL]   (default: DATABASE_URL, else pglite:./.effectgate)',
  ca: CA_USAGE,
  demo: DEMO_USAGE,
};

/** The usage of `command` when `args` asks for help (before a `--`), else `null`. */
export function helpFor(command: string, args: readonly string[]): string | null {
  const usage = COMMAND_USAGE[command];
  if (usage === undefined) return null;
  const end = args.indexOf('--');
  const asked = (end === -1 ? args : args.slice(0, end)).some((a) => a === '--help' || a === '-h');
  return asked ? usage : null;
}

/** `effectgate --version`: the package's version, read from its package.json. */
export function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  return pkg.version;
}

function proxyUsage(): string {
  const flags = Object.entries(PROXY_OPTIONS).map(([name, o]) => {
    const value = o.type === 'boolean' ? '' : ` ${name.replace(/-/g, '_').toUpperCase()}`;
    const fallback = 'default' in o && o.type !== 'boolean' ? ` (default ${String(o.default)})` : '';
    return `  --${name}${value}${fallback}`;
  });
  return `usage: effectgate proxy [flags]\n${flags.join('\n')}\n(see README.md "Commands" for what each does)`;
}
