import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { PolicyError } from '../../../src/errors.js';
import { POLICY_FIELDS, parsePolicyFiles } from '../../../src/policy/index.js';
import { PolicyReader } from '../../../src/policy/policy-reader.js';

/*
 * docs/policy-reference.md against the parser's own field tables (POLICY_FIELDS): a field a
 * section reader accepts that the reference does not document fails here, so a new field cannot
 * ship undocumented; and the reference's complete example must load.
 */
const docs = readFileSync(new URL('../../../docs/policy-reference.md', import.meta.url), 'utf8');

/** The `## <section>` block of the reference; the top-level section is titled `top level`. */
function sectionOf(path: string): string | null {
  const title = path === '' ? 'top level' : path;
  const start = docs.indexOf(`\n## ${title}\n`);
  if (start === -1) return null;
  const end = docs.indexOf('\n## ', start + 1);
  return docs.slice(start, end === -1 ? undefined : end);
}

/** Field names of the table rows of a section: lines starting with `` | `name` | ``. */
function documentedFields(section: string): string[] {
  return [...section.matchAll(/^\| `([a-z_]+)` \|/gm)].map((m) => m[1]!);
}

function completeExample(): string {
  const at = docs.indexOf('\n## Complete example\n');
  const block = /```yaml\n([\s\S]*?)```/.exec(docs.slice(at));
  if (at === -1 || block === null) throw new Error('docs/policy-reference.md has no complete example');
  return block[1]!;
}

describe('docs/policy-reference.md', () => {
  afterEach(() => vi.restoreAllMocks());

  it.each(Object.entries(POLICY_FIELDS))(
    'documents every field of section "%s", and only those',
    (path, fields) => {
      const section = sectionOf(path);
      expect(section, `no "## ${path || 'top level'}" section`).not.toBeNull();
      expect([...documentedFields(section!)].sort(), path || 'top level').toEqual([...fields].sort());
    },
  );

  it('has a section only for mappings the parser reads', () => {
    const titles = [...docs.matchAll(/^## (.+)$/gm)].map((m) => m[1]!);
    const sections = Object.keys(POLICY_FIELDS).map((p) => (p === '' ? 'top level' : p));
    const fieldSections = titles.filter((t) => /^(top level|[a-z_]+(\[\])?(\.[a-z_]+(\[\])?)*)$/.test(t));
    expect(fieldSections.sort()).toEqual([...sections].sort());
  });

  it('loads its complete example, which reads every section of POLICY_FIELDS', () => {
    // Every mapping the parser reads goes through PolicyReader.fields with its section's list:
    // seeing each list once proves the example exercises every section (and that no reader uses
    // a list POLICY_FIELDS does not hold).
    const seen = new Set<readonly string[]>();
    const fields = PolicyReader.prototype.fields;
    vi.spyOn(PolicyReader.prototype, 'fields').mockImplementation(function (
      this: PolicyReader,
      slot,
      known,
      required,
    ) {
      seen.add(known);
      return fields.call(this, slot, known, required);
    });
    let set: ReturnType<typeof parsePolicyFiles>;
    try {
      set = parsePolicyFiles([{ file: 'policy-reference.md', text: completeExample() }]);
    } catch (err) {
      throw new Error(err instanceof PolicyError ? err.message : String(err));
    }
    expect(set.tools.map((t) => t.id)).toEqual([
      'github.create_issue',
      'mcp.create_ticket',
      'linear.issue_create',
    ]);
    const tables = Object.values(POLICY_FIELDS);
    for (const known of seen) expect(tables, `a reader's list ${known.join(', ')}`).toContain(known);
    for (const [path, known] of Object.entries(POLICY_FIELDS))
      expect(seen.has(known), `the example never reads section "${path || 'top level'}"`).toBe(true);
  });

  it('gives the defaults the parser applies', () => {
    const set = parsePolicyFiles([
      {
        file: 'defaults.yaml',
        text: 'version: 1\ntools:\n  - id: t\n    match: { hosts: [a.example], method: POST, path: /x }\n    effect: create\n    dedupe: { key: [$.body.k], window: 1h }\n',
      },
    ]);
    const tool = set.tools[0]!;
    expect(set.default).toBe('allow');
    expect(set.loopBreaker.maxDuplicateSkips).toBe(3);
    expect([...set.egress.deny]).toEqual(['link_local', 'gate']);
    expect(tool.dedupe).toMatchObject({
      pendingTtlMs: 120_000,
      waitMs: 2_000,
      onMissing: 'block',
      onExpired: 'unknown',
    });
    expect(tool.idempotency).toBeNull();
    expect(tool.retry.budget).toBe(3);
    expect([200, 404, 503, 302].map((s) => tool.outcome.classify(s))).toEqual([
      'succeeded',
      'failed',
      'unknown',
      'unknown',
    ]);
    expect(tool.outcome.toolError).toBe('failed');
    expect(tool.verdict.protocol).toBe('http');
    expect(tool.reconcile).toBeNull();
    const idem = parsePolicyFiles([
      {
        file: 'i.yaml',
        text: 'version: 1\ntools:\n  - id: t\n    match: { hosts: [a.example], method: POST, path: /x }\n    effect: create\n    idempotency: {}\n',
      },
    ]).tools[0]!;
    expect(idem.idempotency).toEqual({
      header: 'Idempotency-Key',
      body: null,
      format: 'token',
      maxLength: null,
      retentionMs: null,
      agentKey: 'keep',
      honored: false,
    });
    expect(idem.response.replayedHeader).toBe('idempotent-replayed');
  });
});
