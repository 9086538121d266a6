/**
 * Runs the Python client scripts beside this file (one per library) with Debian's Python, where
 * Debian's packages of the libraries are installed, or with the virtual environment that holds
 * the MCP Python SDK (both made by scripts/ensure-clients.mjs), and reads the JSON line each
 * prints per call (report.py).
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';

const run = promisify(execFile);
const DIR = new URL('./', import.meta.url).pathname;
const ROOT = new URL('../../../', import.meta.url).pathname;

/** Debian's interpreter: the packages below are installed for it, not for another Python on PATH. */
export const PYTHON = '/usr/bin/python3';
/** The MCP Python SDK is not packaged by Debian: a virtual environment with it, beside the npm cache. */
export const MCP_PYTHON = `${ROOT}node_modules/.cache/effectgate-python-mcp/bin/python`;

/** One call as the client library surfaced it. */
export interface ClientCall {
  readonly status: number | null;
  readonly verdict: string | null;
  readonly operation: string | null;
  /** The exception's class name, or null when the library returned a result. */
  readonly error: string | null;
  /** What the library put in front of its user: the exception text, with the body's detail. */
  readonly surfaced: string | null;
  readonly body: Record<string, unknown> | null;
}

/**
 * Why a client cannot run here (no Debian Python, or its module does not import), or null. A
 * suite skips that client with this reason rather than passing without it.
 */
export function pythonModuleMissing(module: string, python: string = PYTHON): string | null {
  if (!existsSync(python)) return `${python} not found (run node scripts/ensure-clients.mjs)`;
  try {
    execFileSync(python, ['-c', `import ${module}`], { stdio: 'ignore', timeout: 30_000 });
    return null;
  } catch {
    return `${python} cannot import ${module} (run node scripts/ensure-clients.mjs)`;
  }
}

/** Runs `script` with `args` and `env` (added to this process's), bounded by `timeoutMs`. */
export async function runPythonClient<T = ClientCall>(
  script: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  options: { readonly python?: string; readonly timeoutMs?: number } = {},
): Promise<T[]> {
  const timeoutMs = options.timeoutMs ?? 60_000;
  try {
    const { stdout } = await run(options.python ?? PYTHON, [`${DIR}${script}`, ...args], {
      env: { ...process.env, ...env },
      timeout: timeoutMs,
    });
    return stdout
      .trim()
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as T);
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${script} ${args.join(' ')} failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`);
  }
}
