/** Every command answers a bad command line the same way, in its own words. */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../../src/cli/index.js';
import { parseFlags, UsageError } from '../../../src/cli/parse-flags.js';

const OPTIONS = {
  store: { type: 'string' },
  json: { type: 'boolean', default: false },
  'stale-after': { type: 'string', default: '30s' },
  color: { type: 'boolean' },
} as const;

function refusal(args: string[], extra: { allowPositionals?: boolean } = {}): UsageError {
  try {
    parseFlags({ args, options: OPTIONS, allowNegative: true, ...extra }, 'usage: test');
  } catch (err) {
    if (err instanceof UsageError) return err;
    throw err;
  }
  throw new Error(`${args.join(' ')} was accepted`);
}

describe('parseFlags', () => {
  it('parses what parseArgs parses', () => {
    const { values } = parseFlags(
      { args: ['--store', 'pglite:x', '--no-color'], options: OPTIONS, allowNegative: true },
      'usage: test',
    );
    expect(values).toEqual({ store: 'pglite:x', json: false, 'stale-after': '30s', color: false });
  });

  it.each([
    [['--stor', 'x'], 'unknown flag --stor (did you mean --store?)'],
    [['--STORE=x'], 'unknown flag --STORE (did you mean --store?)'],
    [['--stale_afer', '1s'], 'unknown flag --stale_afer (did you mean --stale-after?)'],
    [['--frobnicate'], 'unknown flag --frobnicate'],
    [['-x'], 'unknown flag -x'],
    [['--no-store'], 'unknown flag --no-store'],
    [['--store'], '--store needs a value (one starting with "-" is written --store=VALUE)'],
    [['--store', '--json'], '--store needs a value (one starting with "-" is written --store=VALUE)'],
    [['--json=yes'], '--json takes no value (got "yes")'],
    [['stray'], 'unexpected argument "stray"'],
  ])('%j is refused: %s', (args, message) => {
    const err = refusal(args);
    expect(err.message).toBe(message);
    expect(err.usage).toBe('usage: test');
    expect(err.code).toBe('EG_ERR_CONFIG_INVALID');
  });

  it('takes positionals when the command does', () => {
    expect(refusal(['stray', '--jsn'], { allowPositionals: true }).message).toBe(
      'unknown flag --jsn (did you mean --json?)',
    );
  });
});

describe('effectgate <command> with an unknown flag', () => {
  afterEach(() => vi.restoreAllMocks());

  it.each([
    [['proxy', '--listn', '127.0.0.1:0'], '--listen', 'usage: effectgate proxy'],
    [['proxy', 'stray'], null, 'usage: effectgate proxy'],
    [['policies', 'check', 'policies/', '--jsn'], '--json', 'usage: effectgate policies'],
    [['operations', '--stat', 'unknown'], '--state', 'usage: effectgate operations'],
    [['operations', 'resolve', 'x', '--reasn', 'r'], '--reason', 'usage: effectgate operations'],
    [['approvals', 'list', '--limt', '3'], '--limit', 'usage: effectgate approvals'],
    [['approvals', 'approve', 'x', '--tl', '1h'], '--ttl', 'usage: effectgate approvals'],
    [['approvals', 'deny', 'x', '--ttl', '1h'], null, 'usage: effectgate approvals'],
    [['approvals', 'revoke', 'x', '--bye', 'me'], '--by', 'usage: effectgate approvals'],
    [['approvals', 'grant', '--rn', 'r'], '--run', 'usage: effectgate approvals'],
    [['approvals', 'grants', '--rnu', 'r'], '--run', 'usage: effectgate approvals'],
    [['trail', 'x', '--jsno'], '--json', 'usage: effectgate trail'],
    [['recover', '--stale-aftr', '1s'], '--stale-after', 'usage: effectgate recover'],
    [['audit', 'verify', '--fiel', 'x'], '--file', 'usage: effectgate audit'],
    [['audit', 'export', '--otu', 'x'], '--out', 'usage: effectgate audit'],
    [['audit', 'prune', '--befor', 'x'], '--before', 'usage: effectgate audit'],
    [['migrate', '--stroe', 'x'], '--store', 'usage: effectgate migrate'],
    [['ca', 'init', '--dri', 'x'], '--dir', 'usage: effectgate ca'],
  ])('%j: exit 2, did you mean %s, then the usage', async (argv, near, usage) => {
    let stderr = '';
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
      stderr += String(chunk);
      return true;
    });
    const stdout = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    expect(await main(argv)).toBe(2);
    expect(stdout).not.toHaveBeenCalled();
    expect(stderr).toMatch(/^effectgate: (unknown flag|unexpected argument) /);
    if (near !== null) expect(stderr).toContain(`(did you mean ${near}?)`);
    expect(stderr).toContain(usage);
    // Never Node's own text: no ERR_PARSE_ARGS code, no advice about '--'.
    expect(stderr).not.toMatch(/ERR_PARSE_ARGS|Unknown option|To specify|Unexpected argument/);
  });
});
