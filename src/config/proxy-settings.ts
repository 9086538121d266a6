/**
 * Every setting of `effectgate proxy`, in one table: the command-line flags,
 * their environment names, the config-file keys, `--help` and `--print-config` are all made from
 * it, so adding a setting is one line here. One precedence for all of them:
 * flag > environment variable > config file > built-in default.
 */

/** One setting: its type, where it may come from and what leaving it out means. */
export interface SettingSpec {
  readonly type: 'string' | 'boolean';
  /** The environment variable; default `EFFECTGATE_<NAME_IN_UPPER_SNAKE>`. */
  readonly env?: string;
  /** The value applied when no source gives one (booleans: `false` unless said). */
  readonly default?: string | boolean;
  /**
   * What leaving it out means when the code that applies it owns the default (a proxy limit, the
   * store URL): shown by `--help` and `--print-config`, never applied here.
   */
  readonly otherwise?: string;
  /**
   * `env`: an inline secret, read only from the environment: a flag would show it in `ps` and
   * shell history, a config file gets committed and copied into images and ConfigMaps.
   * `not-file`: flag and environment only (`--config` itself).
   * `not-env`: flag and config file only, never an inherited environment variable (`resolve`: a
   * variable left in an image would quietly send a real API's traffic elsewhere).
   */
  readonly only?: 'env' | 'not-file' | 'not-env';
  /** Masked by `--print-config`: `true` entirely, `url` only the password of a URL. */
  readonly secret?: true | 'url';
  /**
   * A path that a config file gives relative to its own directory (`store`: the directory of a
   * `pglite:DIR` URL). Flags and environment stay relative to the working directory.
   */
  readonly path?: true | 'store';
  /** A comma-separated list, which a config file may also write as a YAML list. */
  readonly list?: true;
  /** A list whose flag may also be repeated (`--resolve a --resolve b`): the values are joined. */
  readonly repeat?: true;
  /** The inline secret this `*-file` setting is the other way to give (at most one is used). */
  readonly inline?: string;
}

/** The settings of `effectgate proxy`. Each key is the flag name and the config-file key. */
export const PROXY_SETTINGS = {
  config: { type: 'string', only: 'not-file', path: true, otherwise: 'none: flags and environment only' },
  listen: { type: 'string', default: '127.0.0.1:8080' },
  admin: { type: 'string', otherwise: 'none: no admin API, no /metrics' },
  policies: { type: 'string', default: 'policies', path: true },
  watch: { type: 'boolean', default: false },
  mode: { type: 'string', default: 'enforce' },
  store: {
    type: 'string',
    env: 'DATABASE_URL',
    secret: 'url',
    path: 'store',
    otherwise: 'pglite:./.effectgate',
  },
  tenant: { type: 'string', default: 'default' },
  area: { type: 'string', default: 'default' },
  agent: { type: 'string', default: 'agent' },
  agents: { type: 'string', path: true, otherwise: 'none: one scope from tenant, area and agent' },
  'no-migrate': { type: 'boolean', default: false },
  'max-body-bytes': { type: 'string', otherwise: String(1024 * 1024) },
  'allow-connect-ports': { type: 'string', list: true, otherwise: 'none beyond 443,80' },
  resolve: {
    type: 'string',
    list: true,
    repeat: true,
    only: 'not-env',
    otherwise: 'none: every host dialled where its name resolves',
  },
  'run-id': { type: 'string', otherwise: 'a new id per start' },
  'run-idle': { type: 'string', default: '15m' },
  'ca-dir': { type: 'string', path: true, otherwise: 'none: TLS to a governed host is refused' },
  'upstream-ca': { type: 'string', path: true, otherwise: 'none: the system CAs only' },
  'admin-token-file': { type: 'string', path: true, inline: 'admin-token', otherwise: 'none' },
  'admin-token': { type: 'string', only: 'env', secret: true, otherwise: 'none: /api and /ui stay shut' },
  heartbeat: { type: 'string', default: '5s' },
  'stale-after': { type: 'string', default: '30s' },
  'instance-id': { type: 'string', otherwise: 'derived from the host name and the listen address' },
  'drain-timeout': { type: 'string', default: '10s' },
  'authority-key-file': {
    type: 'string',
    path: true,
    inline: 'authority-key',
    otherwise: 'pglite:DIR: DIR.keys/authority.key, made at first start; PostgreSQL: required',
  },
  'authority-key': {
    type: 'string',
    only: 'env',
    secret: true,
    otherwise: 'none: authority-key-file, or its default',
  },
  'audit-key-file': {
    type: 'string',
    path: true,
    otherwise: 'pglite:DIR: DIR.keys/audit.key, made at first start; PostgreSQL: none (not sealed)',
  },
  'max-connections': { type: 'string', otherwise: '1024' },
  'max-connections-per-client': { type: 'string', otherwise: '256' },
  'keep-alive-timeout': { type: 'string', otherwise: '5s' },
  'tunnel-peek-timeout': { type: 'string', otherwise: '10s' },
  'tunnel-idle-timeout': { type: 'string', otherwise: '2m' },
  'analysis-threads': { type: 'string', otherwise: '1' },
  'log-level': { type: 'string', default: 'info' },
} as const satisfies Readonly<Record<string, SettingSpec>>;

export type SettingTable = Readonly<Record<string, SettingSpec>>;
export type ProxySettingName = keyof typeof PROXY_SETTINGS;

type ValueOf<S> = S extends { readonly type: 'boolean' }
  ? boolean
  : S extends { readonly default: string }
    ? string
    : string | undefined;

/** The resolved value of every proxy setting, typed by the table (a default makes it present). */
export type ProxySettingValues = {
  readonly [K in ProxySettingName]: ValueOf<(typeof PROXY_SETTINGS)[K]>;
};

/** The environment variable of a setting. */
export function envName(name: string, spec: SettingSpec): string {
  return spec.env ?? `EFFECTGATE_${name.replaceAll('-', '_').toUpperCase()}`;
}

/** The settings a command line may give (inline secrets are environment only), as parseArgs takes them. */
export function flagTable<T extends SettingTable>(
  table: T,
): {
  readonly [K in keyof T as T[K] extends { readonly only: 'env' } ? never : K]: T[K] extends {
    readonly repeat: true;
  }
    ? { readonly type: T[K]['type']; readonly multiple: true }
    : { readonly type: T[K]['type'] };
} {
  const flags = Object.entries(table)
    .filter(([, spec]) => spec.only !== 'env')
    .map(([name, spec]) => [
      name,
      Object.freeze(spec.repeat === true ? { type: spec.type, multiple: true } : { type: spec.type }),
    ]);
  return Object.freeze(Object.fromEntries(flags)) as never;
}

/** What leaving a setting out means, for `--help` and `--print-config`. */
export function defaultText(spec: SettingSpec): string {
  return spec.default === undefined ? (spec.otherwise ?? 'none') : String(spec.default);
}

/**
 * The lines of `--help` for a table, aligned: each flag with its value's name, its environment
 * variable and its default; then the inline secrets, which only the environment gives.
 */
export function settingsUsage(table: SettingTable): string[] {
  const rows = Object.entries(table).map(([name, spec]) => {
    const value = spec.type === 'boolean' ? '' : ` ${name.replaceAll('-', '_').toUpperCase()}`;
    const head = spec.only === 'env' ? envName(name, spec) : `--${name}${value}`;
    const fallback = spec.type === 'boolean' && spec.default !== true ? 'off' : defaultText(spec);
    return {
      spec,
      head,
      tail: `${spec.only === 'env' || spec.only === 'not-env' ? '' : `[env ${envName(name, spec)}] `}${spec.repeat === true ? '(repeatable) ' : ''}(default ${fallback})`,
    };
  });
  const width = Math.min(34, Math.max(...rows.map((r) => r.head.length)));
  const line = (r: (typeof rows)[number]): string => `  ${r.head.padEnd(width)}  ${r.tail}`;
  const envOnly = rows.filter((r) => r.spec.only === 'env');
  return [
    ...rows.filter((r) => r.spec.only !== 'env').map(line),
    ...(envOnly.length === 0 ? [] : ['secrets, from the environment only (never a flag or a config file):']),
    ...envOnly.map(line),
  ];
}
