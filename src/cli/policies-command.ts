import { PolicyError } from '../errors.js';
import {
  type AnnotationReport,
  annotationWarnings,
  loadPolicies,
  loadToolsList,
  mcpEndpoint,
  type PolicySet,
  type ToolsList,
} from '../policy/index.js';
import { printable } from './cli-text.js';
import { type FlagTable, parseFlags } from './parse-flags.js';
import { runPolicyExamples } from './policy-examples-runner.js';

export const USAGE =
  'usage: effectgate policies check DIR [--json] [--strict]\n' +
  '       [--from-tools-list FILE [--mcp-host HOST] [--mcp-path /mcp]]\n' +
  '       effectgate policies test DIR [--json]\n' +
  'defaults: --mcp-host the one host the jsonrpc tools name, --mcp-path /mcp\n' +
  "test: sends each policy file's examples: through the gate (in process, fake destination,\n" +
  '      throwaway store) and checks tool, key and verdicts; exit 1 when one fails\n';

export const POLICIES_OPTIONS = {
  json: { type: 'boolean', default: false },
  strict: { type: 'boolean', default: false },
  'from-tools-list': { type: 'string' },
  'mcp-host': { type: 'string' },
  'mcp-path': { type: 'string' },
} as const satisfies FlagTable;

/** Exit code of `--strict` when the policies are valid but a tools/list check warned. */
const EXIT_WARNINGS = 3;

/**
 * `effectgate policies check DIR`: prints the tools it loaded, or every error with file:line (exit
 * 1). With `--from-tools-list`, also warns about MCP tools that may have effects and that no tool
 * classifies with a dedupe key, with YAML to start from (exit 3 under `--strict`).
 */
export async function runPolicies(argv: readonly string[]): Promise<number> {
  const { positionals, values } = parseFlags(
    { args: [...argv], allowPositionals: true, options: POLICIES_OPTIONS },
    USAGE.trimEnd(),
  );
  const [sub, dir] = positionals;
  const toolsFile = values['from-tools-list'];
  const needsList = values['mcp-host'] !== undefined || values['mcp-path'] !== undefined;
  if (sub === 'test' && dir !== undefined && positionals.length === 2) {
    if (values.strict || toolsFile !== undefined || needsList) {
      process.stderr.write(`policies test takes only --json\n${USAGE}`);
      return 2;
    }
    return runPoliciesTest(dir, values.json);
  }
  if (sub !== 'check' || dir === undefined || (needsList && toolsFile === undefined)) {
    process.stderr.write(USAGE);
    return 2;
  }
  const set = await loadOrReport(dir, values.json);
  if (set === null) return 1;
  // Read before printing anything, so a bad file (EG_ERR_CONFIG_INVALID, exit 1) prints no half report.
  let list: ToolsList | null = null;
  let report: AnnotationReport | null = null;
  if (toolsFile !== undefined) {
    list = await loadToolsList(toolsFile);
    report = annotationWarnings(
      set,
      list,
      mcpEndpoint(set, values['mcp-host'], values['mcp-path'] ?? '/mcp'),
    );
  }
  if (values.json) printJson(set, toolsFile, list, report);
  else {
    printTools(set);
    if (toolsFile !== undefined && list !== null && report !== null)
      printWarnings(set, toolsFile, list, report);
  }
  return values.strict && report !== null && report.warnings.length > 0 ? EXIT_WARNINGS : 0;
}

/** The set, or `null` after printing every issue (exit 1). */
async function loadOrReport(dir: string, json: boolean): Promise<PolicySet | null> {
  try {
    return await loadPolicies(dir);
  } catch (err) {
    if (err instanceof PolicyError) {
      if (json) process.stdout.write(`${JSON.stringify({ ok: false, issues: err.issues }, null, 2)}\n`);
      else process.stderr.write(`${err.message}\n${err.issues.length} error(s)\n`);
      return null;
    }
    throw err;
  }
}

/** `effectgate policies test DIR`: one line per example, exit 0 only when every one passed. */
async function runPoliciesTest(dir: string, json: boolean): Promise<number> {
  const set = await loadOrReport(dir, json);
  if (set === null) return 1;
  const results = await runPolicyExamples(set);
  const failed = results.filter((r) => !r.ok).length;
  if (json) {
    const out = { ok: failed === 0, passed: results.length - failed, failed, examples: results };
    process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
  } else {
    const lines = results.map((r) =>
      r.ok
        ? `ok ${r.file}:${r.line} ${printable(r.name)}`
        : `FAIL ${r.file}:${r.line} ${printable(r.name)}: ${r.failures.join('; ')}`,
    );
    lines.push(
      results.length === 0
        ? `no examples in ${set.files.length} file(s): add examples: to a policy file`
        : `${results.length - failed} passed, ${failed} failed`,
    );
    process.stdout.write(`${lines.join('\n')}\n`);
  }
  // No examples proves nothing: a test run that checked nothing must not read as green.
  return failed === 0 && results.length > 0 ? 0 : 1;
}

function printJson(
  set: PolicySet,
  file: string | undefined,
  list: ToolsList | null,
  report: AnnotationReport | null,
): void {
  const tools = set.tools.map((t) => ({
    id: t.id,
    source: t.source,
    match: t.match.explain(),
    effect: t.effect,
  }));
  const out: Record<string, unknown> = { ok: true, default: set.default, files: set.files, tools };
  if (report !== null && list !== null) {
    const { host, port, path } = report.endpoint;
    out['tools_list'] = {
      file,
      host,
      port,
      path,
      checked: report.checked,
      read_only: report.readOnly,
      next_cursor: list.nextCursor,
    };
    out['warnings'] = report.warnings.map((w) => ({
      tool: w.tool,
      reason: w.reason,
      annotations: w.annotations,
      classified_by: w.classifiedBy,
      suggestion: w.suggestion,
    }));
  }
  process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
}

function printTools(set: PolicySet): void {
  process.stdout.write(
    `${set.tools.length} tool(s) from ${set.files.length} file(s); default: ${set.default}\n`,
  );
  for (const t of set.tools) {
    const dedupe =
      t.dedupe === null ? 'recognition off' : `key ${t.dedupe.key.map((k) => k.expression).join(', ')}`;
    process.stdout.write(
      `  ${t.id}  ${t.effect}  ${t.match.explain()}  (${dedupe})  ${t.source.file}:${t.source.line}\n`,
    );
  }
}

function printWarnings(set: PolicySet, file: string, list: ToolsList, report: AnnotationReport): void {
  const { hostText, path } = report.endpoint;
  const skipped = report.readOnly.length > 0 ? `; ${report.readOnly.length} read-only skipped` : '';
  const out: string[] = [
    '',
    `tools/list ${printable(file)}: ${report.checked.length} MCP tool(s) may have effects${skipped}; ` +
      `tools/call as POST ${hostText} ${path}`,
  ];
  if (list.nextCursor !== null)
    out.push('  note: the file holds one page (nextCursor is set); check the other pages too');
  // What the gate does with an unclassified call today, so the warning says what is at stake.
  const unclassified =
    set.default === 'allow' ? 'default: allow sends it ungoverned' : 'default: block refuses it';
  if (report.warnings.length === 0) out.push('  every one is classified by a tool with a dedupe key');
  else {
    out.push(`warnings (${report.warnings.length}):`);
    for (const w of report.warnings) {
      const name = printable(w.tool);
      if (w.classifiedBy === null)
        out.push(`  ${name}: unclassified: no tool classifies its tools/call; ${unclassified}`);
      else {
        const { id, file: at, line } = w.classifiedBy;
        out.push(
          `  ${name}: no_dedupe: classified by ${id} (${at}:${line}), which has no dedupe (recognition off)`,
        );
      }
    }
    out.push('', 'suggestions (annotations are hints: review the effect, key and window before use):');
    for (const w of report.warnings) out.push('', w.suggestion.trimEnd());
  }
  process.stdout.write(`${out.join('\n')}\n`);
}
