/**
 * No Docker engine runs here, so the image and the sidecar manifest are checked by parsing: every
 * COPY source exists, the commands use only real `effectgate proxy` flags, and the policy shipped
 * in the ConfigMap loads.
 */
import { existsSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { PROXY_OPTIONS } from '../../src/cli/proxy-command.js';
import { parsePolicyFiles } from '../../src/policy/index.js';

const root = new URL('../../', import.meta.url).pathname;
const read = (p: string): string => readFileSync(`${root}${p}`, 'utf8');
const checkProxyArgs = (args: string[]): void => {
  expect(args[0]).toBe('proxy');
  parseArgs({ args: args.slice(1), options: PROXY_OPTIONS, strict: true });
};

describe('docker/Dockerfile', () => {
  const lines = read('docker/Dockerfile').split('\n');

  it('copies only files that exist in the repository', () => {
    const copies = lines.filter((l) => l.startsWith('COPY ') && !l.includes('--from='));
    expect(copies.length).toBeGreaterThan(2);
    for (const line of copies) {
      const parts = line.split(/\s+/).slice(1, -1);
      for (const src of parts) expect(existsSync(`${root}${src}`), src).toBe(true);
    }
  });

  it('starts the proxy with valid flags on all interfaces inside the container', () => {
    const entry = JSON.parse(
      lines.find((l) => l.startsWith('ENTRYPOINT '))!.slice('ENTRYPOINT '.length),
    ) as string[];
    const cmd = JSON.parse(lines.find((l) => l.startsWith('CMD '))!.slice('CMD '.length)) as string[];
    expect(entry).toEqual(['node', '/app/bin/effectgate.js']);
    checkProxyArgs(cmd);
    expect(cmd).toContain('0.0.0.0:8080');
    expect(lines.some((l) => l.startsWith('USER ') && !l.includes('root'))).toBe(true);
  });
});

describe('docker/sidecar.yaml', () => {
  const docs = parseAllDocuments(read('docker/sidecar.yaml')).map((d) => {
    expect(d.errors).toEqual([]);
    // biome-ignore lint/suspicious/noExplicitAny: parsed manifests are walked by shape
    return d.toJS() as Record<string, any>;
  });

  it('ships a policy that loads', () => {
    const cm = docs.find((d) => d['kind'] === 'ConfigMap')!;
    const files = Object.entries(cm['data'] as Record<string, string>).map(([file, text]) => ({
      file,
      text,
    }));
    const set = parsePolicyFiles(files);
    expect(set.tools.map((t) => t.id)).toEqual(['github.create_issue']);
  });

  it('runs the gate as a sidecar with valid flags, the agent pointed at it, probes on the admin port', () => {
    const deploy = docs.find((d) => d['kind'] === 'Deployment')!;
    // biome-ignore lint/suspicious/noExplicitAny: parsed manifests are walked by shape
    const containers = deploy['spec']['template']['spec']['containers'] as Record<string, any>[];
    const gate = containers.find((c) => c['name'] === 'effectgate')!;
    const agent = containers.find((c) => c['name'] === 'agent')!;
    checkProxyArgs(gate['args']);
    expect(gate['readinessProbe']['httpGet']['path']).toBe('/readyz');
    expect(gate['livenessProbe']['httpGet']['path']).toBe('/healthz');
    const env = Object.fromEntries(
      (agent['env'] as { name: string; value: string }[]).map((e) => [e.name, e.value]),
    );
    expect(env['HTTP_PROXY']).toBe('http://127.0.0.1:8080');
    expect(gate['args']).toContain('--listen=127.0.0.1:8080');
  });
});
