/**
 * No Docker engine nor cluster runs here, so the image, compose.yaml and the kustomize base are
 * checked by parsing: every COPY source exists, every command uses only real `effectgate` flags,
 * ports, probes, mounts and the agent's environment agree with those flags, and the shipped
 * policies load. test/e2e/k8s-sidecar.test.ts runs the gate with the Deployment's own args.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments, parseDocument } from 'yaml';
import { CA_BUNDLE_OPTIONS } from '../../src/cli/ca-command.js';
import { MIGRATE_OPTIONS } from '../../src/cli/migrate-command.js';
import { PROXY_OPTIONS } from '../../src/cli/proxy-command.js';
import { parsePolicyFiles } from '../../src/policy/index.js';
import { CA_CERT_FILE, CA_KEY_FILE } from '../../src/proxy/index.js';

// biome-ignore lint/suspicious/noExplicitAny: parsed manifests are walked by shape
type Obj = Record<string, any>;

const root = new URL('../../', import.meta.url).pathname;
const read = (p: string): string => readFileSync(`${root}${p}`, 'utf8');

/** `effectgate proxy …` args, parsed against the real flag table (strict: an unknown flag throws). */
const proxyFlags = (args: string[]): Obj => {
  expect(args[0]).toBe('proxy');
  return parseArgs({ args: args.slice(1), options: PROXY_OPTIONS, strict: true, allowPositionals: false })
    .values;
};
const migrateFlags = (args: string[]): Obj => {
  expect(args[0]).toBe('migrate');
  return parseArgs({ args: args.slice(1), options: MIGRATE_OPTIONS, strict: true }).values;
};
/** `effectgate ca bundle …` args, parsed against the real flag table: the agent's trust bundle. */
const bundleFlags = (args: string[]): Obj => {
  expect(args.slice(0, 2)).toEqual(['ca', 'bundle']);
  const values = parseArgs({ args: args.slice(2), options: CA_BUNDLE_OPTIONS, strict: true }).values as Obj;
  expect(values['ca-dir'], '--ca-dir').toBeDefined();
  expect(values['out'], '--out').toBeDefined();
  return values;
};
const dirOf = (file: string): string => file.slice(0, file.lastIndexOf('/'));
const portOf = (listen: string): number => Number(listen.slice(listen.lastIndexOf(':') + 1));
const envOf = (c: Obj): Record<string, Obj> =>
  Object.fromEntries(((c['env'] ?? []) as Obj[]).map((e) => [e['name'] as string, e]));

/** The `match.hosts` entries of policy files as written (the compiled matcher keeps patterns). */
const rawHosts = (files: { text: string }[]): string[] =>
  files.flatMap((f) =>
    ((parseDocument(f.text).toJS() as Obj)['tools'] as Obj[]).flatMap((t) => t['match']['hosts'] as string[]),
  );

/** The agent's environment every proxy-aware client needs, whatever its language. */
const PROXY_VARS = ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy'];
/** Adds to Node's roots: the gate's CA alone is right. */
const NODE_CA_VAR = 'NODE_EXTRA_CA_CERTS';
/**
 * Replace the system roots (curl; OpenSSL, so Python's ssl and Go; Python requests): they must
 * name the combined bundle, or every HTTPS host the gate does not intercept fails to verify.
 */
const BUNDLE_VARS = ['CURL_CA_BUNDLE', 'SSL_CERT_FILE', 'REQUESTS_CA_BUNDLE'];

describe('docker/Dockerfile', () => {
  const text = read('docker/Dockerfile');
  // Continuation lines joined, so an instruction is one line.
  const lines = text.replace(/\\\n\s*/g, '').split('\n');
  const stages = text.split(/^FROM /m).slice(1);
  const runtime = stages.at(-1)!;
  const jsonAfter = (word: string, from: string[] = lines): string[] =>
    JSON.parse(from.find((l) => l.startsWith(`${word} `))!.slice(word.length + 1)) as string[];

  it('copies only files that exist in the repository', () => {
    const copies = lines.filter((l) => l.startsWith('COPY ') && !l.includes('--from='));
    expect(copies.length).toBeGreaterThan(2);
    for (const line of copies) {
      const parts = line.split(/\s+/).slice(1, -1);
      for (const src of parts) expect(existsSync(`${root}${src}`), src).toBe(true);
    }
  });

  it('builds in one stage and installs production dependencies only in the runtime stage', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    expect(stages[0]).toMatch(/^node:20-\S*slim AS build/);
    expect(runtime).toMatch(/^node:20-\S*slim/);
    expect(runtime).toMatch(/npm ci --omit=dev/);
    expect(runtime).toContain('COPY --from=build /app/dist ./dist');
    expect(runtime).not.toMatch(/--from=build \/app\/node_modules/);
    expect(runtime).toContain('rm -f ./policies/example-tracker.yaml');
  });

  it('runs as a non-root user in the runtime stage', () => {
    const users = runtime.split('\n').filter((l) => l.startsWith('USER '));
    expect(users.length).toBeGreaterThan(0);
    expect(users.at(-1)).not.toMatch(/USER (root|0)\b/);
  });

  it('starts the proxy with valid flags, without --store (DATABASE_URL, else pglite, decides)', () => {
    expect(jsonAfter('ENTRYPOINT')).toEqual(['node', '/app/bin/effectgate.js']);
    const cmd = jsonAfter('CMD');
    const flags = proxyFlags(cmd);
    expect(flags['store']).toBeUndefined();
    expect(cmd.join(' ')).not.toContain('store');
    expect(flags['listen']).toBe('0.0.0.0:8080');
    const exposed = lines
      .find((l) => l.startsWith('EXPOSE '))!
      .split(/\s+/)
      .slice(1)
      .map(Number);
    expect(exposed).toEqual([portOf(flags['listen']), portOf(flags['admin'])]);
  });

  it("checks health on /readyz of the CMD's admin port with node (no curl in a slim image)", () => {
    const line = lines.find((l) => l.startsWith('HEALTHCHECK '))!;
    const probe = JSON.parse(line.slice(line.indexOf('CMD ') + 4)) as string[];
    expect(probe.slice(0, 2)).toEqual(['node', '-e']);
    const admin = proxyFlags(jsonAfter('CMD'))['admin'] as string;
    expect(probe[2]).toContain(`http://127.0.0.1:${portOf(admin)}/readyz`);
  });
});

describe('compose.yaml', () => {
  const doc = parseDocument(read('compose.yaml'), { merge: true });
  const services = (doc.toJS() as Obj)['services'] as Record<string, Obj>;
  const gate = services['gate']!;
  const agent = services['agent']!;
  const gateFlags = proxyFlags(gate['command']);

  it('parses', () => {
    expect(doc.errors).toEqual([]);
    expect(Object.keys(services).sort()).toEqual([
      'agent',
      'authority-key',
      'ca-bundle',
      'ca-init',
      'gate',
      'migrate',
      'postgres',
      'tracker',
    ]);
  });

  it('migrates with a one-shot service the gate waits for, and the gate skips migrating', () => {
    expect(migrateFlags(services['migrate']!['command'])).toEqual({});
    expect(services['migrate']!['depends_on']['postgres']['condition']).toBe('service_healthy');
    expect(gate['depends_on']['migrate']['condition']).toBe('service_completed_successfully');
    expect(gate['depends_on']['ca-init']['condition']).toBe('service_completed_successfully');
    expect(gate['depends_on']['postgres']['condition']).toBe('service_healthy');
    expect(gateFlags['no-migrate']).toBe(true);
    // The same database for both, from the environment (the CLI's precedence, no --store).
    expect(gateFlags['store']).toBeUndefined();
    expect(gate['environment']['DATABASE_URL']).toMatch(/^postgres:\/\/.*@postgres:5432\//);
    expect(services['migrate']!['environment']['DATABASE_URL']).toBe(gate['environment']['DATABASE_URL']);
  });

  it('makes the authority and audit keys once, after migrating, into the volume the gate reads them from', () => {
    const init = services['authority-key']!['command'][0] as string;
    expect(init).toContain(`test -f ${gateFlags['authority-key-file']} ||`);
    expect(init).toContain(`keys authority --out ${gateFlags['authority-key-file']}`);
    expect(init).toContain(`test -f ${gateFlags['audit-key-file']} ||`);
    expect(init).toContain(`keys audit --out ${gateFlags['audit-key-file']}`);
    expect(services['authority-key']!['environment']['DATABASE_URL']).toBe(
      gate['environment']['DATABASE_URL'],
    );
    expect(services['authority-key']!['depends_on']['migrate']['condition']).toBe(
      'service_completed_successfully',
    );
    expect(gate['depends_on']['authority-key']['condition']).toBe('service_completed_successfully');
    expect(gate['volumes']).toContain(`keys:${dirOf(gateFlags['authority-key-file'])}:ro`);
  });

  it('generates the CA once into the volume the gate reads as --ca-dir', () => {
    const init = services['ca-init']!['command'][0] as string;
    expect(init).toContain('ca init --dir /ca');
    expect(init).toContain('test -f /ca/ca.pem ||');
    expect(gateFlags['ca-dir']).toBe('/ca');
    expect(gate['volumes']).toContain('ca:/ca:ro');
  });

  it('mounts policies that load and govern the sample destination', () => {
    const mount = (gate['volumes'] as string[]).find((v) => v.endsWith(`:${gateFlags['policies']}:ro`))!;
    const dir = mount.split(':')[0]!.replace(/^\.\//, '');
    const files = readdirSync(`${root}${dir}`).map((f) => ({ file: f, text: read(`${dir}/${f}`) }));
    const set = parsePolicyFiles(files);
    expect(set.tools.map((t) => t.id)).toEqual(['tracker.create_issue']);
    expect(rawHosts(files)).toEqual(['tracker:9090']);
    expect(agent['command'][0]).toContain('http://tracker:9090/repos/acme/api/issues');
  });

  it('probes /readyz on the admin port, and publishes it only on loopback', () => {
    expect(gate['healthcheck']['test'].join(' ')).toContain(`127.0.0.1:${portOf(gateFlags['admin'])}/readyz`);
    expect(gate['ports']).toEqual([`127.0.0.1:${portOf(gateFlags['admin'])}:${portOf(gateFlags['admin'])}`]);
    for (const name of ['postgres', 'tracker', 'gate'])
      expect(services[name]!['healthcheck'], name).toBeDefined();
  });

  /** `volume:path[:ro]` entries of a service, as `{ volume, path, ro }`. */
  const mounts = (service: Obj): { volume: string; path: string; ro: boolean }[] =>
    (service['volumes'] as string[]).map((v) => {
      const [volume, path, mode] = v.split(':');
      return { volume: volume!, path: path!, ro: mode === 'ro' };
    });
  const volumeAt = (service: Obj, path: string): string | undefined =>
    mounts(service).find((m) => m.path === path)?.volume;

  it("points the agent at the gate's --listen port, in both cases", () => {
    const env = agent['environment'] as Record<string, string>;
    for (const v of PROXY_VARS) expect(env[v], v).toBe(`http://gate:${portOf(gateFlags['listen'])}`);
    expect(env['NO_PROXY']).not.toContain('tracker');
    expect(env['no_proxy']).toBe(env['NO_PROXY']);
    expect(agent['depends_on']['gate']['condition']).toBe('service_healthy');
  });

  it("writes the agent's trust bundle in a one-shot service, with the CLI's real flags, from the certificate only", () => {
    const bundler = services['ca-bundle']!;
    const flags = bundleFlags(bundler['command']);
    expect(bundler['restart']).toBe('no');
    expect(bundler['depends_on']['ca-init']['condition']).toBe('service_completed_successfully');
    expect(agent['depends_on']['ca-bundle']['condition']).toBe('service_completed_successfully');
    // --ca-dir is the public copy ca-init makes (cp …/ca.pem /ca-public/ca.pem), not the CA volume.
    expect(volumeAt(bundler, flags['ca-dir'])).toBe('ca-public');
    expect(services['ca-init']!['command'][0]).toContain('cp /ca/ca.pem /ca-public/ca.pem');
    // --out lands on a writable volume the agent mounts.
    const out = mounts(bundler).find((m) => m.path === dirOf(flags['out']))!;
    expect(out.ro).toBe(false);
    const seen = mounts(agent).find((m) => m.volume === out.volume)!;
    expect(seen.ro).toBe(true);
    const env = agent['environment'] as Record<string, string>;
    for (const v of BUNDLE_VARS)
      expect(env[v], v).toBe(`${seen.path}${flags['out'].slice(dirOf(flags['out']).length)}`);
    // NODE_EXTRA_CA_CERTS adds to Node's roots: the CA certificate alone.
    const nodeCa = env[NODE_CA_VAR]!;
    expect(nodeCa.endsWith(`/${CA_CERT_FILE}`)).toBe(true);
    expect(volumeAt(agent, dirOf(nodeCa))).toBe('ca-public');
  });

  it('mounts the CA volume (the key) only in ca-init and the gate', () => {
    const holders = Object.entries(services)
      .filter(([, service]) => (service['volumes'] ?? []).some((v: string) => v.split(':')[0] === 'ca'))
      .map(([name]) => name);
    expect(holders.sort()).toEqual(['ca-init', 'gate']);
  });
});

describe('deploy/k8s (kustomize base)', () => {
  const dir = 'deploy/k8s';
  const kustomization = parseDocument(read(`${dir}/kustomization.yaml`)).toJS() as Obj;
  const docs: Obj[] = (kustomization['resources'] as string[]).flatMap((file) =>
    parseAllDocuments(read(`${dir}/${file}`)).map((d) => {
      expect(d.errors, file).toEqual([]);
      return d.toJS() as Obj;
    }),
  );
  const byKind = (kind: string): Obj => docs.find((d) => d['kind'] === kind)!;
  const pod = byKind('Deployment')['spec']['template']['spec'] as Obj;
  const gate = (pod['initContainers'] as Obj[]).find((c) => c['name'] === 'effectgate')!;
  const bundler = (pod['initContainers'] as Obj[]).find((c) => c['name'] === 'ca-bundle')!;
  const agent = (pod['containers'] as Obj[]).find((c) => c['name'] === 'agent')!;
  const flags = proxyFlags(gate['args']);
  const volumes = Object.fromEntries((pod['volumes'] as Obj[]).map((v) => [v['name'] as string, v]));
  const mountAt = (c: Obj, path: string): Obj =>
    (c['volumeMounts'] as Obj[]).find((m) => m['mountPath'] === path)!;

  it('lists every manifest in the folder, and nothing that is not there', () => {
    const yamls = readdirSync(`${root}${dir}`).filter(
      (f) => f.endsWith('.yaml') && f !== 'kustomization.yaml',
    );
    expect([...kustomization['resources']].sort()).toEqual(yamls.sort());
    expect(docs.map((d) => d['kind']).sort()).toEqual(['ConfigMap', 'Deployment', 'Job']);
  });

  it('ships a policy that loads', () => {
    const cm = byKind('ConfigMap');
    const files = Object.entries(cm['data'] as Record<string, string>).map(([file, text]) => ({
      file,
      text,
    }));
    expect(parsePolicyFiles(files).tools.map((t) => t.id)).toEqual(['github.create_issue']);
  });

  it('runs the gate as a native sidecar: an init container with restartPolicy Always', () => {
    expect(gate['restartPolicy']).toBe('Always');
    expect((pod['containers'] as Obj[]).map((c) => c['name'])).toEqual(['agent']);
  });

  it('gives the gate a CA, so the governed HTTPS host is intercepted rather than refused', () => {
    expect(flags['ca-dir']).toBeDefined();
    const ca = volumes[mountAt(gate, flags['ca-dir'])['name']]!;
    expect(ca['secret']['items'].map((i: Obj) => i['key']).sort()).toEqual(
      [CA_KEY_FILE, CA_CERT_FILE].sort(),
    );
    for (const item of ca['secret']['items'] as Obj[]) expect(item['path']).toBe(item['key']);
    expect(mountAt(gate, flags['policies'])['name']).toBe('policies');
    expect(volumes['policies']!['configMap']['name']).toBe(byKind('ConfigMap')['metadata']['name']);
  });

  it('gives every replica the one authority key from a Secret: owner and group may read it, nobody else', () => {
    const file = flags['authority-key-file'] as string;
    const volume = volumes[mountAt(gate, dirOf(file))['name']]!;
    expect(volume['secret']['secretName']).toBe('effectgate-authority');
    expect(volume['secret']['items']).toEqual([
      { key: 'authority.key', path: file.slice(dirOf(file).length + 1) },
    ]);
    expect(volume['secret']['defaultMode'] & 0o007).toBe(0);
    expect(pod['securityContext']['fsGroup']).toBeDefined();
  });

  it('gives every replica the one audit key from a Secret, mounted read-only where --audit-key-file points, as the authority key', () => {
    const file = flags['audit-key-file'] as string;
    expect(file).toBe('/etc/effectgate/audit/audit.key');
    // The flag, not also the variable: one place says where the key is.
    expect(envOf(gate)['EFFECTGATE_AUDIT_KEY_FILE']).toBeUndefined();
    const mount = mountAt(gate, dirOf(file));
    expect(mount).toEqual({ name: 'audit', mountPath: dirOf(file), readOnly: true });
    const volume = volumes[mount['name']]!;
    expect(volume['secret']['secretName']).toBe('effectgate-audit');
    expect(volume['secret']['items']).toEqual([
      { key: 'audit.key', path: file.slice(dirOf(file).length + 1) },
    ]);
    // Mounted exactly as the authority key: 0440, read through the pod's fsGroup.
    const authority = volumes[mountAt(gate, dirOf(flags['authority-key-file'] as string))['name']]!;
    expect(volume['secret']['defaultMode']).toBe(0o440);
    expect(volume['secret']['defaultMode']).toBe(authority['secret']['defaultMode']);
    expect(pod['securityContext']['fsGroup']).toBe(pod['securityContext']['runAsGroup']);
    // Only the gate holds the signer key: not the agent, the bundle step or the migrate Job.
    const job = byKind('Job')['spec']['template']['spec'] as Obj;
    const holders = [...pod['initContainers'], ...pod['containers'], ...job['containers']]
      .filter((c: Obj) => ((c['volumeMounts'] ?? []) as Obj[]).some((m) => m['name'] === mount['name']))
      .map((c: Obj) => c['name']);
    expect(holders).toEqual(['effectgate']);
    expect(job['volumes']).toBeUndefined();
    expect(migrateFlags(job['containers'][0]['args'])).toEqual({});
  });

  it('declares ports matching --listen and --admin, probes on the admin port', () => {
    const ports = Object.fromEntries((gate['ports'] as Obj[]).map((p) => [p['name'], p['containerPort']]));
    expect(ports).toEqual({ proxy: portOf(flags['listen']), admin: portOf(flags['admin']) });
    expect(flags['admin']).toMatch(/^0\.0\.0\.0:/); // the kubelet probes the pod IP
    for (const [probe, path] of [
      ['startupProbe', '/readyz'],
      ['readinessProbe', '/readyz'],
      ['livenessProbe', '/healthz'],
    ] as const) {
      expect(gate[probe]['httpGet'], probe).toEqual({ path, port: 'admin' });
    }
  });

  it('takes the store from DATABASE_URL (a Secret), migrated by the Job with valid flags', () => {
    expect(flags['store']).toBeUndefined();
    expect(flags['no-migrate']).toBe(true);
    const job = byKind('Job')['spec']['template']['spec'] as Obj;
    const migrate = job['containers'][0] as Obj;
    expect(migrateFlags(migrate['args'])).toEqual({});
    for (const c of [gate, migrate]) {
      expect(envOf(c)['DATABASE_URL']!['valueFrom']['secretKeyRef']).toEqual({
        name: 'effectgate-db',
        key: 'url',
      });
    }
    expect(migrate['image']).toBe(gate['image']);
  });

  it('sets everything the agent needs: proxy vars in both cases, NO_PROXY without governed hosts, CA vars at a mount', () => {
    const env = envOf(agent);
    for (const v of PROXY_VARS) expect(env[v]?.['value'], v).toBe(`http://${flags['listen']}`);
    const governed = rawHosts(
      Object.entries(byKind('ConfigMap')['data'] as Record<string, string>).map(([file, text]) => ({
        file,
        text,
      })),
    );
    for (const v of ['NO_PROXY', 'no_proxy']) {
      const list = (env[v]!['value'] as string).split(',');
      expect(list).toContain('localhost');
      expect(list).toContain('.svc');
      for (const host of governed)
        expect(
          list.some((n) => host.endsWith(n.replace(/^\*/, ''))),
          host,
        ).toBe(false);
    }
    // NODE_EXTRA_CA_CERTS adds to Node's roots: the certificate of the Secret the gate reads.
    const nodeCa = env[NODE_CA_VAR]!['value'] as string;
    const mount = (agent['volumeMounts'] as Obj[]).find((m) => m['mountPath'] === dirOf(nodeCa))!;
    expect(mount, NODE_CA_VAR).toBeDefined();
    const secret = volumes[mount['name']]!['secret'] as Obj;
    expect(secret['secretName']).toBe(
      volumes[mountAt(gate, flags['ca-dir'])['name']]!['secret']['secretName'],
    );
    expect(secret['items']).toEqual([{ key: CA_CERT_FILE, path: nodeCa.slice(dirOf(nodeCa).length + 1) }]);
  });

  it("writes the agent's trust bundle in an init container before the sidecar, with the CLI's real flags", () => {
    const names = (pod['initContainers'] as Obj[]).map((c) => c['name']);
    expect(names.indexOf('ca-bundle')).toBeGreaterThanOrEqual(0);
    expect(names.indexOf('ca-bundle')).toBeLessThan(names.indexOf('effectgate'));
    // An ordinary init container: it runs to completion before the next one starts.
    expect(bundler['restartPolicy']).toBeUndefined();
    expect(bundler['image']).toBe(gate['image']);
    const bundle = bundleFlags(bundler['args']);
    // --ca-dir: the certificate-only volume, at the path the flag names.
    const caVolume = volumes[mountAt(bundler, bundle['ca-dir'])['name']]!;
    expect(caVolume['secret']['items'].map((i: Obj) => i['path'])).toEqual([CA_CERT_FILE]);
    // --out: a writable emptyDir the agent mounts (read-only) where its variables point.
    const outMount = mountAt(bundler, dirOf(bundle['out']));
    expect(outMount.readOnly).not.toBe(true);
    expect(volumes[outMount['name']]!['emptyDir']).toBeDefined();
    const seen = (agent['volumeMounts'] as Obj[]).find((m) => m['name'] === outMount['name'])!;
    expect(seen['readOnly']).toBe(true);
    const env = envOf(agent);
    for (const v of BUNDLE_VARS)
      expect(env[v]?.['value'], v).toBe(
        `${seen['mountPath']}${bundle['out'].slice(dirOf(bundle['out']).length)}`,
      );
  });

  it("mounts the gate's key in the gate container only: never in the agent nor the bundle step", () => {
    /** A Secret volume without `items` projects every key of the Secret, ca-key.pem included. */
    const holdsKey = (volume: Obj): boolean =>
      volume['secret'] !== undefined &&
      (volume['secret']['items'] === undefined ||
        (volume['secret']['items'] as Obj[]).some((i) => i['key'] === CA_KEY_FILE));
    const holders = [...pod['initContainers'], ...pod['containers']]
      .filter((c: Obj) => ((c['volumeMounts'] ?? []) as Obj[]).some((m) => holdsKey(volumes[m['name']]!)))
      .map((c: Obj) => c['name']);
    expect(holders).toEqual(['effectgate']);
    expect(pod['volumes'].filter(holdsKey).map((v: Obj) => v['name'])).toEqual([
      mountAt(gate, flags['ca-dir'])['name'],
    ]);
  });

  it('mounts only volumes the pod defines, and sets resources on every container', () => {
    const job = byKind('Job')['spec']['template']['spec'] as Obj;
    for (const c of [...pod['initContainers'], ...pod['containers'], ...job['containers']] as Obj[]) {
      for (const m of (c['volumeMounts'] ?? []) as Obj[]) expect(volumes[m['name']], m['name']).toBeDefined();
      expect(c['resources']['requests'], c['name']).toBeDefined();
      expect(c['resources']['limits']['memory'], c['name']).toBeDefined();
    }
  });
});

describe('README', () => {
  it('names the deployment files that exist, and none that is gone', () => {
    const readme = read('README.md');
    expect(readme).not.toContain('docker/sidecar.yaml');
    for (const path of ['docker/Dockerfile', 'compose.yaml', 'deploy/k8s/']) expect(readme).toContain(path);
  });
});
