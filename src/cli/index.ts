import { isEffectgateError } from '../errors.js';
import { runApprovals } from './approvals-command.js';
import { runAudit } from './audit-command.js';
import { runCa } from './ca-command.js';
import { helpFor, version } from './command-help.js';
import { runDemo } from './demo-command.js';
import { runKeys } from './keys-command.js';
import { runMigrate } from './migrate-command.js';
import { runOperations } from './operations-command.js';
import { UsageError } from './parse-flags.js';
import { runPolicies } from './policies-command.js';
import { runProxy } from './proxy-command.js';
import { runRecover } from './recover-command.js';
import { runRuns } from './runs-command.js';
import { runTrail } from './trail-command.js';

const USAGE = `usage: effectgate <command> [options]

commands:
  proxy              run the forward proxy (--listen, --admin, --policies, --store, --tenant/--area/--agent |
                     --agents, --ca-dir, --upstream-ca, …; every flag with its default: effectgate proxy --help)
  demo               a walk-through on this machine: a fake issue tracker, the proxy, a duplicate, a lost
                     response, a held retry and its approval (--no-wait; --api-only: only the tracker)
  policies check DIR validate tool classifications; prints the tools or the errors (exit 1); --json;
                     --from-tools-list FILE also warns about MCP tools that may have effects and that no
                     tool classifies with a dedupe key, with YAML to start from (--mcp-host HOST, default
                     the one host the jsonrpc tools name; --mcp-path /mcp; --strict: exit 3 on warnings)
  trail <operation-id>  the operation's intent and state, then its timeline: decisions, attempts,
                     observations, approvals (--json; --run RUN for a run's decisions;
                     --tool T --key '["v1","v2"]' to find one by its key values)
  operations         counts per state, then the operations (--state S, --tool T, --tenant T,
                     --since 24h|ISO, --limit N, --json)
  operations resolve <id> --as succeeded|failed|duplicate_effect_confirmed --by WHO --reason TEXT [--ref URL]
                     settle an unknown operation with what you found at the destination
  approvals list     the approval cards (--state S, --limit N, --json)
  approvals approve|deny|revoke <id> --by WHO --reason TEXT [--ttl 1h|permanent]
                     decide one (approve allows exactly one retry, for --ttl, default 1h)
  runs               the runs the loop breaker knows, halted first (--halted, --limit N, --json)
  runs release <run-id> --by WHO --reason TEXT [--tenant T --area A --agent G]
                     let a halted run go on (recorded; its duplicate counts start again)
  recover            mark attempts left without an outcome by a dead gate unknown (--stale-after 30s,
                     --json; --policies DIR only for operations older than migration 0003)
  audit verify       verify the hash-chained event log and its signed checkpoints (exit 1 naming the first
                     bad event or checkpoint; --audit-key-file FILE: the key to check signatures against;
                     --witness FILE: a kept checkpoint the store must still hold; --file FILE verifies an
                     export offline, no store needed)
  audit checkpoint   the latest signed checkpoint, for a witness to keep (> kept.note)
  audit export       the event log as JSON Lines on stdout (--out FILE: mode 0600, --force to replace)
  audit prune        --before TIME --archive FILE: archive (verified) and remove older events
  migrate            apply pending store migrations
  ca init --dir DIR  create the local CA for HTTPS interception (ca.pem, ca-key.pem; --force)
  ca bundle          --ca-dir DIR --out FILE [--system FILE]: the system roots plus DIR/ca.pem (never
                     the key), for SSL_CERT_FILE / REQUESTS_CA_BUNDLE, which replace the system roots
  keys authority     --out FILE [--store postgres://…]: the authority key of a PostgreSQL store (the one
                     an older version kept in the database, else a new one) to FILE, mode 0600, for
                     --authority-key-file (an embedded store keeps it beside itself, in DIR.keys/)
  keys audit         --out FILE: a new audit signing key to FILE (mode 0600) for --audit-key-file, its
                     verifier key to FILE.pub and stdout, for witnesses and audit verify --audit-key-file
  demo               a walk-through on a fake issue tracker: allow, duplicate, lost response, hold,
                     approval, trail; then the admin UI until Ctrl-C (--no-wait, --port PORT)

Store: --store postgres://… | pglite:DIR (default: DATABASE_URL, else pglite:./.effectgate)
effectgate <command> --help: that command's flags; effectgate --version: the version`;

/** The `effectgate` command. Returns the exit code; never calls process.exit itself. */
export async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  const help = command === undefined ? null : helpFor(command, rest);
  if (help !== null) {
    process.stdout.write(`${help}\n`);
    return 0;
  }
  try {
    switch (command) {
      case '--version':
      case '-V':
      case 'version':
        process.stdout.write(`effectgate ${version()}\n`);
        return 0;
      case 'proxy':
        return await runProxy(rest);
      case 'policies':
        return await runPolicies(rest);
      case 'operations':
        return await runOperations(rest);
      case 'approvals':
        return await runApprovals(rest);
      case 'trail':
        return await runTrail(rest);
      case 'recover':
        return await runRecover(rest);
      case 'runs':
        return await runRuns(rest);
      case 'audit':
        return await runAudit(rest);
      case 'migrate':
        return await runMigrate(rest);
      case 'ca':
        return await runCa(rest);
      case 'keys':
        return await runKeys(rest);
      case 'demo':
        return await runDemo(rest);
      case undefined:
      case '-h':
      case '--help':
      case 'help':
        process.stdout.write(`${USAGE}\n`);
        return command === undefined ? 2 : 0;
      default:
        process.stderr.write(`effectgate: unknown command ${JSON.stringify(command)}\n${USAGE}\n`);
        return 2;
    }
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`effectgate: ${err.message}\n${err.usage}\n`);
      return 2;
    }
    if (isEffectgateError(err)) {
      process.stderr.write(`effectgate: ${err.code}: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}
