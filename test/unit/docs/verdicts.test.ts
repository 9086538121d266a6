import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { TRANSPORT_PROBLEMS } from '../../../src/engine/problem-response.js';
import { renderVerdict } from '../../../src/engine/verdict-response.js';
import { ERROR_CODES } from '../../../src/errors.js';
import { EXPECTED_VERDICTS, parsePolicyFiles } from '../../../src/policy/index.js';
import { ENFORCED_VERDICTS, type EnforcedVerdict } from '../../../src/store/index.js';
import { httpText, VERDICT_EXAMPLES } from './verdict-examples.js';

/*
 * docs/verdicts.md against the gate's renderers: every example block is rendered again from the
 * same facts (verdict-examples.ts) and must match in status, headers and body; every verdict, every
 * JSON-RPC error code and every problem slug the gate answers agents with must appear on the page.
 */
// The verdicts a gate answers with (`pass` is policies test's word for no verdict at all).
const VERDICT_SET = EXPECTED_VERDICTS.filter((v): v is EnforcedVerdict =>
  (ENFORCED_VERDICTS as readonly string[]).includes(v),
);
const docs = readFileSync(new URL('../../../docs/verdicts.md', import.meta.url), 'utf8');

const blocks = new Map(
  [...docs.matchAll(/<!-- example: ([a-z-]+) -->\n```http\n([\s\S]*?)\n```/g)].map((m) => [m[1]!, m[2]!]),
);

interface ShownResponse {
  readonly status: number;
  readonly headers: readonly string[];
  readonly body: unknown;
}

function parseShown(text: string): ShownResponse {
  const [head, ...rest] = text.split('\n\n');
  const [statusLine, ...headers] = head!.split('\n');
  return {
    status: Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine!)?.[1]),
    headers: [...headers].sort(),
    body: JSON.parse(rest.join('\n\n')),
  };
}

describe('docs/verdicts.md', () => {
  it('shows exactly the examples verdict-examples.ts renders', () => {
    expect([...blocks.keys()].sort()).toEqual(Object.keys(VERDICT_EXAMPLES).sort());
  });

  it.each(Object.entries(VERDICT_EXAMPLES))('example %s matches what the gate renders', (name, make) => {
    const shown = blocks.get(name);
    expect(shown, `no example block "${name}"`).toBeDefined();
    expect(parseShown(shown!), `regenerate it with httpText(): ${name}`).toEqual(
      parseShown(httpText(make())),
    );
  });

  it.each([...VERDICT_SET])('documents the verdict %s', (verdict) => {
    expect(docs).toContain(`| \`${verdict}\` |`);
    expect(docs).toMatch(new RegExp(`^## ${verdict}\\b`, 'm'));
  });

  it('lists the JSON-RPC error code of every verdict', () => {
    const mcp = parsePolicyFiles([
      {
        file: 'm.yaml',
        text: 'version: 1\ntools:\n  - id: m\n    match: { hosts: [m.example], method: POST, path: /mcp }\n    effect: create\n    verdict: { protocol: jsonrpc }\n',
      },
    ]).tools[0]!;
    for (const verdict of VERDICT_SET) {
      const rendered = renderVerdict(
        { verdict, status: 409, title: 't', detail: 'd', tool: mcp, decisionId: 'd', operationId: null },
        {},
        1,
      );
      const code = (JSON.parse(new TextDecoder().decode(rendered.body)) as { error: { code: number } }).error
        .code;
      expect(docs, verdict).toMatch(new RegExp(`^\\| \`${verdict}\`[^\\n]*\\| \`${code}\` \\|$`, 'm'));
    }
  });

  it('names every problem slug the gate and the proxy answer with', () => {
    const slugs = new Set<string>(Object.keys(TRANSPORT_PROBLEMS));
    for (const entry of Object.values(ERROR_CODES)) {
      if ('variants' in entry) for (const v of Object.values(entry.variants)) slugs.add(v.type);
    }
    for (const stage of ['engine', 'proxy']) {
      const dir = new URL(`../../../src/${stage}/`, import.meta.url);
      for (const file of readdirSync(dir).filter((f) => f.endsWith('.ts'))) {
        const text = readFileSync(new URL(file, dir), 'utf8');
        for (const m of text.matchAll(/problem: '([a-z_]+)'/g)) slugs.add(m[1]!);
        for (const m of text.matchAll(/codedProblem\('(EG_ERR_[A-Z_]+)'/g))
          slugs.add(ERROR_CODES[m[1] as keyof typeof ERROR_CODES].type);
      }
    }
    for (const slug of slugs) expect(docs, slug).toMatch(new RegExp(`\\| \`${slug}\` \\|`));
  });
});
