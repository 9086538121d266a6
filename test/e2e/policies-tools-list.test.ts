/** `effectgate policies check --from-tools-list` as users run it (the built bin). */
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/proxy-process.js';

const LIST = 'test/fixtures/tools-list/ticket-server.json';
const dir = mkdtempSync(join(tmpdir(), 'effectgate-tools-list-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface JsonOut {
  ok: boolean;
  tools: { id: string }[];
  tools_list: { host: string; port: number; path: string; checked: string[]; read_only: string[] };
  warnings: {
    tool: string;
    reason: string;
    annotations: Record<string, unknown>;
    classified_by: { id: string } | null;
    suggestion: string;
  }[];
}

describe('effectgate policies check --from-tools-list', () => {
  it('lists the tools, then warns under a heading with YAML to start from, and exits 0', async () => {
    const r = await runCli(['policies', 'check', 'policies/', '--from-tools-list', LIST]);
    expect(r.code, r.stderr).toBe(0);
    const [tools, warnings] = r.stdout.split(/\n(?=tools\/list )/);
    expect(tools).toContain('mcp.create_ticket');
    expect(warnings).toMatch(
      /4 MCP tool\(s\) may have effects; 1 read-only skipped; tools\/call as POST mcp\.example\.com \/mcp/,
    );
    expect(warnings).toContain('warnings (3):');
    expect(warnings).toMatch(/^ {2}delete_ticket: unclassified: .*default: allow sends it ungoverned$/m);
    expect(warnings).not.toMatch(/^ {2}(create_ticket|list_tickets):/m);
    expect(warnings).toMatch(/- id: mcp\.delete_ticket\n(.*\n)*? {4}effect: destroy/);
    expect(warnings).toMatch(/- id: mcp\.close_ticket\n(.*\n)*? {4}effect: create/);
  });

  it('exits 3 on warnings under --strict', async () => {
    const r = await runCli(['policies', 'check', 'policies/', '--from-tools-list', LIST, '--strict']);
    expect(r.code, r.stderr).toBe(3);
  });

  it('adds the warnings to --json, and its suggestions make a set the check passes', async () => {
    const r = await runCli(['policies', 'check', 'policies/', '--from-tools-list', LIST, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as JsonOut;
    expect(out.ok).toBe(true);
    expect(out.tools_list).toMatchObject({
      host: 'mcp.example.com',
      port: 443,
      path: '/mcp',
      read_only: ['list_tickets'],
    });
    expect(out.warnings.map((w) => [w.tool, w.reason])).toEqual([
      ['close_ticket', 'unclassified'],
      ['delete_ticket', 'unclassified'],
      ['add_comment', 'unclassified'],
    ]);
    expect(out.warnings[2]!.annotations).toEqual({
      readOnlyHint: false,
      destructiveHint: true,
      idempotentHint: false,
      openWorldHint: true,
      title: null,
    });

    const fixed = join(dir, 'fixed');
    rmSync(fixed, { recursive: true, force: true });
    mkdirSync(fixed);
    for (const f of ['github.yaml', 'mcp.yaml']) copyFileSync(join('policies', f), join(fixed, f));
    writeFileSync(
      join(fixed, 'suggested.yaml'),
      `version: 1\ntools:\n${out.warnings.map((w) => w.suggestion).join('')}`,
    );
    const again = await runCli(['policies', 'check', fixed, '--from-tools-list', LIST, '--strict']);
    expect(again.code, again.stdout + again.stderr).toBe(0);
    expect(again.stdout).toContain('every one is classified by a tool with a dedupe key');
  });

  it('tells no_dedupe from unclassified with --mcp-host, and suggests a dedupe block', async () => {
    const r = await runCli([
      'policies',
      'check',
      'test/fixtures/policies/mcp-tools.yaml',
      '--from-tools-list',
      LIST,
      '--mcp-host',
      'mcp.example.com',
      '--mcp-path',
      '/mcp',
      '--json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as JsonOut;
    expect(out.warnings.map((w) => [w.tool, w.reason, w.classified_by?.id])).toEqual([
      ['close_ticket', 'no_dedupe', 'mcp.close_ticket'],
      // mcp.other (no body conditions, no dedupe) takes every other call on POST /mcp.
      ['delete_ticket', 'no_dedupe', 'mcp.other'],
      ['add_comment', 'no_dedupe', 'mcp.other'],
    ]);
    expect(out.warnings[0]!.suggestion).toMatch(/# Add to tool mcp\.close_ticket/);
    expect(out.warnings[1]!.suggestion).toContain('- id: mcp.delete_ticket');
  });

  it('exits 1 with FILE: … when the file is missing, not JSON, too large or not a tools/list', async () => {
    const notJson = join(dir, 'not.json');
    writeFileSync(notJson, 'tools: []');
    const huge = join(dir, 'huge.json');
    writeFileSync(huge, Buffer.alloc(4 * 1024 * 1024 + 1, 0x20));
    const wrong = join(dir, 'wrong.json');
    writeFileSync(wrong, '{"jsonrpc":"2.0","id":1,"result":{"resources":[]}}');
    const cases: [string, RegExp][] = [
      [join(dir, 'missing.json'), /missing\.json: cannot read: ENOENT/],
      [notJson, /not\.json: not JSON/],
      [huge, /huge\.json: file is 4194305 bytes; .*limited to 4194304 bytes/],
      [wrong, /wrong\.json: expected a tools\/list result/],
    ];
    for (const [file, message] of cases) {
      const r = await runCli(['policies', 'check', 'policies/', '--from-tools-list', file]);
      expect(r.code, file).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(message);
    }
  });

  it('needs --mcp-host when the jsonrpc tools name no single host', async () => {
    const r = await runCli([
      'policies',
      'check',
      'test/fixtures/policies/routes.yaml',
      '--from-tools-list',
      LIST,
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/--mcp-host is required/);
  });

  it('refuses --mcp-host without --from-tools-list (usage, exit 2)', async () => {
    const r = await runCli(['policies', 'check', 'policies/', '--mcp-host', 'mcp.example.com']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--from-tools-list FILE');
  });
});
