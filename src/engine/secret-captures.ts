import type { Tool } from '../policy/index.js';

/*
 * Path captures a tool declares secret (`redact: [$.path.name]`, e.g. a webhook token in the URL):
 * the trail shows them as `{name}`, so the secret never reaches the append-only store. Shared by
 * the recorded request path and the reconciliation endpoint.
 */

/** Per tool, which path captures its `redact` list names: worked out once, not per request. */
const secretCapturesOf = new WeakMap<Tool, Map<string, boolean>>();

/** True when the tool's `redact` list names the path capture `name`. */
export function isSecretCapture(tool: Tool, name: string): boolean {
  let known = secretCapturesOf.get(tool);
  if (known === undefined) {
    known = new Map();
    secretCapturesOf.set(tool, known);
  }
  let secret = known.get(name);
  if (secret === undefined) {
    secret = tool.redact.some((r) => r.evaluate({ path: { [name]: '' } }).length > 0);
    known.set(name, secret);
  }
  return secret;
}

/** The request path as the trail keeps it: every secret capture's segment replaced by `{name}`. */
export function redactedPath(path: string, tool: Tool, params: Readonly<Record<string, string>>): string {
  if (tool.redact.length === 0) return path;
  const secret = new Set<string>();
  for (const name in params) if (isSecretCapture(tool, name)) secret.add(name);
  if (secret.size === 0) return path;
  return path
    .split('/')
    .map((segment) => {
      let decoded: string;
      try {
        decoded = decodeURIComponent(segment);
      } catch {
        return segment;
      }
      for (const name of secret) if (params[name] === decoded) return `{${name}}`;
      return segment;
    })
    .join('/');
}
