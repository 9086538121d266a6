import { hostname } from 'node:os';

/**
 * The default identity of a gate on its store, stable across restarts so a gate that starts again
 * recovers its previous life's in-flight attempts at once (docs/design.md §3): the host name (a pod's
 * name in Kubernetes) and what tells two gates on one host apart, the proxy's listen address or,
 * in process, the scope. A listen port of 0 names no stable address, so the process id is added
 * (such a gate is recovered by the stale sweep instead).
 *
 * Two live gates must never share an id: the second one's start would take the first one's
 * in-flight attempts for a previous life's and mark them unknown (safe, but it puts needless
 * retries on hold). Replicas on one host each get their own `--instance-id`.
 */
export function defaultInstanceId(
  from: { readonly listen: { readonly host: string; readonly port: number } } | { readonly scope: string },
): string {
  const host = hostname();
  if ('scope' in from) return `${host}/in-process/${from.scope}`;
  const { host: address, port } = from.listen;
  const where = address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
  return port === 0 ? `${host}/${where}/pid-${process.pid}` : `${host}/${where}`;
}
