import type { GateLogger } from '../engine/index.js';

const LEVELS = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 } as const;

/** One JSON object per line on stderr; fields are built by the engine and never hold secrets. */
export function jsonLogger(level: string): GateLogger {
  const min = LEVELS[level as keyof typeof LEVELS] ?? LEVELS.info;
  const write = (lvl: keyof typeof LEVELS, fields: Record<string, unknown>, msg: string): void => {
    if (LEVELS[lvl] < min) return;
    process.stderr.write(
      `${JSON.stringify({ time: new Date().toISOString(), level: lvl, msg, ...fields })}\n`,
    );
  };
  return {
    info: (f, m) => write('info', f, m),
    warn: (f, m) => write('warn', f, m),
    error: (f, m) => write('error', f, m),
  };
}
