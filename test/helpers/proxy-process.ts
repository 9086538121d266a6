import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

const BIN = fileURLToPath(new URL('../../bin/effectgate.js', import.meta.url));

export interface ProxyProcess {
  readonly url: string;
  readonly port: number;
  /** `http://host:port` of the admin server when started with `--admin`, else `null`. */
  readonly adminUrl: string | null;
  readonly child: ChildProcess;
  /** Everything the process wrote to stderr so far (JSON log lines). */
  stderr(): string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Starts the real `effectgate proxy` (the built bin, as a user runs it) on a free loopback port
 * and resolves once it prints its listening line (and, with `--admin`, the admin server's).
 * `shellSetup` runs in `sh` first, in the same process (`ulimit -n 256`: the gate under a small
 * descriptor limit).
 */
export async function startProxyProcess(
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
  shellSetup?: string,
): Promise<ProxyProcess> {
  const argv = [BIN, 'proxy', '--listen', '127.0.0.1:0', ...args];
  const [command, commandArgs] =
    shellSetup === undefined
      ? [process.execPath, argv]
      : ['sh', ['-c', `${shellSetup} && exec "$0" "$@"`, process.execPath, ...argv]];
  const child = spawn(command, commandArgs, {
    env: { ...process.env, EFFECTGATE_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const withAdmin = args.some((a) => a === '--admin' || a.startsWith('--admin='));
  const { port, adminUrl } = await new Promise<{ port: number; adminUrl: string | null }>(
    (resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`proxy did not start in 60s\n${out}\n${err}`)), 60_000);
      child.stdout?.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /proxy listening on http:\/\/[^:]+:(\d+)/.exec(out);
        const a = /admin listening on (http:\/\/[^\s]+:\d+)/.exec(out);
        if (m && (!withAdmin || a)) {
          clearTimeout(timer);
          resolve({ port: Number(m[1]), adminUrl: a ? a[1]! : null });
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`proxy exited with ${code} before listening\n${out}\n${err}`));
      });
    },
  );
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    adminUrl,
    child,
    stderr: () => err,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode !== null) return child.exitCode;
      child.kill(signal);
      const [code] = (await once(child, 'exit')) as [number | null];
      return code;
    },
  };
}

/** Runs `effectgate <args>` to completion and returns its exit code and output. */
export async function runCli(
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
  cwd?: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(cwd === undefined ? {} : { cwd }),
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => {
    stdout += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}
