import { EffectgateError } from '../errors.js';

/** Scope of a sidecar gate (docs/design.md §4.2): from flags or env, never from a request header. */
export interface ScopeConfig {
  readonly tenant: string;
  readonly area: string;
  readonly agent: string;
}

const SCOPE_PART = /^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}$/;

/** Validates one scope part: 1–128 printable characters from a conservative set. */
export function checkScopePart(name: string, value: unknown): string {
  if (typeof value !== 'string' || !SCOPE_PART.test(value)) {
    throw new EffectgateError(
      'EG_ERR_CONFIG_INVALID',
      `${name} must be 1–128 characters of letters, digits and . _ : @ / - (starting with a letter or digit); got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

export function checkScope(scope: unknown): ScopeConfig {
  if (scope === null || typeof scope !== 'object') {
    throw new EffectgateError('EG_ERR_CONFIG_INVALID', 'scope must be an object { tenant, area, agent }');
  }
  const s = scope as Record<string, unknown>;
  return Object.freeze({
    tenant: checkScopePart('scope.tenant', s['tenant']),
    area: checkScopePart('scope.area', s['area']),
    agent: checkScopePart('scope.agent', s['agent']),
  });
}

/** A positive integer option, refused clearly otherwise. */
export function checkPositiveInt(name: string, value: unknown): number {
  const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n <= 0) {
    throw new EffectgateError(
      'EG_ERR_CONFIG_INVALID',
      `${name} must be a positive integer; got ${JSON.stringify(value)}`,
    );
  }
  return n;
}

/** A non-negative integer option (0 switches something off), refused clearly otherwise. */
export function checkCount(name: string, value: unknown): number {
  if (value === 0 || value === '0') return 0;
  try {
    return checkPositiveInt(name, value);
  } catch {
    throw new EffectgateError(
      'EG_ERR_CONFIG_INVALID',
      `${name} must be 0 or a positive integer; got ${JSON.stringify(value)}`,
    );
  }
}

/** `host:port` for --listen / --admin; IPv6 as `[::1]:8080`. */
export function parseListen(name: string, value: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(value);
  const port = m ? Number(m[3]) : Number.NaN;
  if (!m || port > 65535) {
    throw new EffectgateError(
      'EG_ERR_CONFIG_INVALID',
      `${name} must be host:port (e.g. 127.0.0.1:8080); got ${JSON.stringify(value)}`,
    );
  }
  return { host: (m[1] ?? m[2]) as string, port };
}

/** Comma-separated port list, e.g. `443,80,8443`. */
export function parsePortList(name: string, value: string): number[] {
  return value.split(',').map((p) => {
    const n = Number(p.trim());
    if (!Number.isInteger(n) || n < 1 || n > 65535) {
      throw new EffectgateError('EG_ERR_CONFIG_INVALID', `${name}: ${JSON.stringify(p)} is not a port`);
    }
    return n;
  });
}

/** Letters, digits and `. _ : @ / [ ] -`, at most 200: host names, addresses and pod names fit. */
export function checkInstanceId(value: unknown): string {
  if (typeof value !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._:@/[\]-]{0,199}$/.test(value)) {
    throw new EffectgateError(
      'EG_ERR_CONFIG_INVALID',
      `instance id must be 1–200 characters of letters, digits and . _ : @ / [ ] - (starting with a letter or digit); got ${JSON.stringify(value)}`,
    );
  }
  return value;
}
