import { EffectgateError } from '../errors.js';
import { type ConfigFile, loadConfigFile } from './config-file.js';
import {
  envName,
  PROXY_SETTINGS,
  type ProxySettingValues,
  type SettingSpec,
  type SettingTable,
} from './proxy-settings.js';

/** Where a resolved value came from. */
export type SettingSource =
  | { readonly kind: 'flag' }
  | { readonly kind: 'env'; readonly name: string }
  | { readonly kind: 'file'; readonly file: string; readonly line: number; readonly column: number }
  | { readonly kind: 'default' };

export interface ResolvedSetting {
  readonly name: string;
  readonly spec: SettingSpec;
  /** `undefined`: not set, the code that applies it keeps its own default (`spec.otherwise`). */
  readonly value: string | boolean | undefined;
  readonly source: SettingSource;
  /** Set too, but its other form (`admin-token` / `admin-token-file`) won: this one is not used. */
  readonly overriddenBy?: string;
}

/** Every setting of a table, resolved once and frozen. */
export interface ResolvedSettings<V> {
  readonly values: V;
  readonly settings: readonly ResolvedSetting[];
  /** The config file read, if any. */
  readonly file: ConfigFile | null;
  source(name: keyof V & string): SettingSource;
  /** Given by a flag, the environment or the file (not left to its default). */
  isSet(name: keyof V & string): boolean;
  /** How a message names a setting, as it was given: `--heartbeat`, `EFFECTGATE_HEARTBEAT`, `file:4:12: heartbeat`. */
  where(name: keyof V & string): string;
}

/** The inputs of one resolution: parsed flags, the environment, the config file. */
export interface SettingInputs {
  /** A repeatable flag (`repeat`) comes as the list of its values. */
  readonly flags: Readonly<Record<string, string | boolean | readonly string[] | undefined>>;
  readonly env: NodeJS.ProcessEnv;
  readonly file: ConfigFile | null;
}

const RANK = { flag: 3, env: 2, file: 1, default: 0 } as const;

/**
 * One precedence for every setting: command-line flag > environment variable > config file >
 * built-in default. An empty environment variable counts as unset (compose files write
 * `VAR: ${VAR:-}`). Of a secret given both inline and as a `*-file`, the one from the higher source
 * is used; both from one source is refused, as it cannot be told which was meant.
 */
export function resolveSettings<V>(table: SettingTable, inputs: SettingInputs): ResolvedSettings<V> {
  const byName = new Map<string, ResolvedSetting>();
  for (const [name, spec] of Object.entries(table)) byName.set(name, resolveOne(name, spec, inputs));
  for (const [name, spec] of Object.entries(table)) {
    if (spec.inline === undefined) continue;
    const viaFile = byName.get(name);
    const inline = byName.get(spec.inline);
    if (
      viaFile === undefined ||
      inline === undefined ||
      viaFile.value === undefined ||
      inline.value === undefined
    )
      continue;
    const [a, b] = [RANK[viaFile.source.kind], RANK[inline.source.kind]];
    if (a === b) {
      throw new EffectgateError(
        'EG_ERR_CONFIG_INVALID',
        `${label(viaFile)} and ${label(inline)} both give ${spec.inline}: set only one of them`,
      );
    }
    const [winner, loser] = a > b ? [viaFile, inline] : [inline, viaFile];
    byName.set(loser.name, Object.freeze({ ...loser, value: undefined, overriddenBy: winner.name }));
  }
  const settings = Object.freeze([...byName.values()]);
  const values = Object.freeze(Object.fromEntries(settings.map((s) => [s.name, s.value]))) as V;
  const get = (name: string): ResolvedSetting => {
    const setting = byName.get(name);
    if (setting === undefined) throw new Error(`no setting ${name}`);
    return setting;
  };
  return Object.freeze({
    values,
    settings,
    file: inputs.file,
    source: (name: string) => get(name).source,
    isSet: (name: string) => get(name).source.kind !== 'default',
    where: (name: string) => label(get(name)),
  });
}

/**
 * The proxy's settings: `--config` (or `EFFECTGATE_CONFIG`) names the file, read and validated
 * before anything else; then every setting resolved.
 */
export async function loadProxySettings(
  flags: SettingInputs['flags'],
  env: NodeJS.ProcessEnv = process.env,
): Promise<ResolvedSettings<ProxySettingValues>> {
  const config = resolveOne('config', PROXY_SETTINGS.config, { flags, env, file: null }).value;
  const file = typeof config === 'string' ? await loadConfigFile(config, PROXY_SETTINGS) : null;
  return resolveSettings<ProxySettingValues>(PROXY_SETTINGS, { flags, env, file });
}

function resolveOne(name: string, spec: SettingSpec, inputs: SettingInputs): ResolvedSetting {
  const found = (value: string | boolean | undefined, source: SettingSource): ResolvedSetting =>
    Object.freeze({ name, spec, value, source: Object.freeze(source) });
  const given = spec.only === 'env' ? undefined : inputs.flags[name];
  const flag = Array.isArray(given) ? (given.length === 0 ? undefined : given.join(',')) : given;
  if (flag !== undefined) return found(flag as string | boolean, { kind: 'flag' });
  const variable = envName(name, spec);
  const text = spec.only === 'not-env' ? undefined : inputs.env[variable];
  if (text !== undefined && text !== '') {
    return found(spec.type === 'boolean' ? envBoolean(variable, text) : text, {
      kind: 'env',
      name: variable,
    });
  }
  const fromFile = fileReadable(spec) ? inputs.file?.values.get(name) : undefined;
  if (fromFile !== undefined && inputs.file !== null) {
    return found(fromFile.value, {
      kind: 'file',
      file: inputs.file.file,
      line: fromFile.line,
      column: fromFile.column,
    });
  }
  return found(spec.default ?? (spec.type === 'boolean' ? false : undefined), { kind: 'default' });
}

/** Whether a config file may give this setting. */
function fileReadable(spec: SettingSpec): boolean {
  return spec.only === undefined || spec.only === 'not-env';
}

function envBoolean(variable: string, text: string): boolean {
  const word = text.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(word)) return true;
  if (['0', 'false', 'no', 'off'].includes(word)) return false;
  throw new EffectgateError(
    'EG_ERR_CONFIG_INVALID',
    `${variable} must be true or false (or 1 / 0); got ${JSON.stringify(text)}`,
  );
}

function label(setting: ResolvedSetting): string {
  const { source, name } = setting;
  switch (source.kind) {
    case 'env':
      return source.name;
    case 'file':
      return `${source.file}:${source.line}:${source.column}: ${name}`;
    default:
      return setting.spec.only === 'env' ? envName(name, setting.spec) : `--${name}`;
  }
}
