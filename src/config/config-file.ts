/**
 * The optional config file of `effectgate proxy` (`--config FILE`, `EFFECTGATE_CONFIG`): a YAML
 * mapping whose keys are the flag names, read with the same careful reader as policies and agents
 * files and validated once against the settings table:
 *
 * ```yaml
 * listen: 0.0.0.0:8080
 * policies: ./policies        # relative to this file's directory
 * heartbeat: 5s
 * allow-connect-ports: [8443]
 * ```
 *
 * Every problem is reported as `file:line:column: key: message`.
 */
import { readFile } from 'node:fs/promises';
import { dirname, isAbsolute, resolve } from 'node:path';
import { isMap, isScalar, isSeq, type Node } from 'yaml';
import { EffectgateError } from '../errors.js';
import { hasUrlPassword } from './mask-secret.js';
import { envName, type SettingSpec, type SettingTable } from './proxy-settings.js';
import { nodePosition, parseSafeYaml, type YamlIssue, yamlIssuesError } from './safe-yaml.js';
import { suggestField } from './suggest-field.js';

/** A config file is a page of settings; anything bigger is a mistake or an attack on the parser. */
export const MAX_CONFIG_FILE_BYTES = 64 * 1024;
/** A flat mapping of settings needs no aliases; a few are tolerated, an alias bomb is not. */
export const MAX_CONFIG_ALIAS_COUNT = 10;

/** One value a config file gives, with where it is written. */
export interface FileValue {
  readonly value: string | boolean;
  readonly line: number;
  readonly column: number;
}

/** A validated config file: its path as given and the values it sets, relative paths resolved. */
export interface ConfigFile {
  readonly file: string;
  readonly values: ReadonlyMap<string, FileValue>;
}

/** Reads and validates a config file. Throws `EG_ERR_CONFIG_INVALID` listing every problem. */
export async function loadConfigFile(file: string, table: SettingTable): Promise<ConfigFile> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new EffectgateError(
      'EG_ERR_CONFIG_INVALID',
      `config file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      { cause: err },
    );
  }
  return parseConfigFile(file, text, table);
}

/** Validates the text of a config file; `file` names it in messages and anchors relative paths. */
export function parseConfigFile(file: string, text: string, table: SettingTable): ConfigFile {
  const issues: YamlIssue[] = [];
  const fail = (): never => {
    throw yamlIssuesError(file, issues);
  };
  const yaml = parseSafeYaml(text, {
    maxBytes: MAX_CONFIG_FILE_BYTES,
    maxAliasCount: MAX_CONFIG_ALIAS_COUNT,
    kind: 'config files',
  });
  if (!yaml.ok) {
    issues.push(...yaml.issues);
    return fail();
  }
  const { doc, lines } = yaml;
  const at = nodePosition(lines);
  const values = new Map<string, FileValue>();
  const root = doc.contents;
  // An empty file (or one of comments only) sets nothing.
  if (root === null) return Object.freeze({ file, values });
  if (!isMap(root)) {
    issues.push({
      ...at(root),
      field: '(file)',
      message: 'expected a mapping of settings (the flag names as keys)',
    });
    return fail();
  }
  const dir = dirname(resolve(file));
  const known = Object.keys(table).filter((name) => {
    const spec = table[name];
    return spec !== undefined && (spec.only === undefined || spec.only === 'not-env');
  });
  for (const pair of root.items) {
    const keyNode = pair.key as Node;
    const name = isScalar(keyNode) ? String(keyNode.value) : String(keyNode);
    const spec = Object.hasOwn(table, name) ? table[name] : undefined;
    const refusal = spec === undefined ? unknownKey(name, known) : notFromFile(name, spec, table);
    if (refusal !== null) {
      issues.push({ ...at(keyNode), field: name, message: refusal });
      continue;
    }
    const valueNode = (pair.value as Node | null) ?? null;
    const read = readValue(spec as SettingSpec, valueNode, dir);
    if (typeof read === 'string') issues.push({ ...at(valueNode ?? keyNode), field: name, message: read });
    else values.set(name, Object.freeze({ value: read.value, ...at(valueNode ?? keyNode) }));
  }
  if (issues.length > 0) fail();
  return Object.freeze({ file, values });
}

function unknownKey(name: string, known: readonly string[]): string {
  const near = suggestField(name, known);
  return `unknown setting${near === null ? '' : ` (did you mean ${near}?)`}; the keys are the flag names of effectgate proxy --help`;
}

/** Why a known setting may not be written in a config file, or `null` when it may. */
function notFromFile(name: string, spec: SettingSpec, table: SettingTable): string | null {
  if (spec.only === 'not-file') return 'a config file cannot name another one (give it on the command line)';
  if (spec.only !== 'env') return null;
  const viaFile = Object.keys(table).find((k) => table[k]?.inline === name);
  return `an inline secret is not read from a config file (files get committed and copied into images): set ${envName(name, spec)}${viaFile === undefined ? '' : `, or name a file holding it with ${viaFile}`}`;
}

/** The value of one setting, or the sentence saying what is wrong with it. */
function readValue(
  spec: SettingSpec,
  node: Node | null,
  dir: string,
): { readonly value: string | boolean } | string {
  if (node === null || (isScalar(node) && node.value === null)) {
    return 'has no value (leave the key out to keep the default)';
  }
  if (spec.type === 'boolean') {
    return isScalar(node) && typeof node.value === 'boolean'
      ? { value: node.value }
      : `must be true or false, not ${describe(node)}`;
  }
  let text: string | null = null;
  if (isScalar(node) && (typeof node.value === 'string' || typeof node.value === 'number')) {
    text = String(node.value);
  } else if (spec.list === true && isSeq(node)) {
    const parts = node.items.map((item) =>
      isScalar(item) && (typeof item.value === 'string' || typeof item.value === 'number')
        ? String(item.value)
        : null,
    );
    if (parts.length > 0 && parts.every((p) => p !== null)) text = parts.join(',');
  }
  if (text === null) {
    return `must be ${spec.list === true ? 'a string, a number or a list of them' : 'a string or a number'}, not ${describe(node)}`;
  }
  if (text.trim() === '') return 'is empty (leave the key out to keep the default)';
  if (spec.path === 'store') {
    if (hasUrlPassword(text)) {
      return 'a password in the store URL is not read from a config file: set DATABASE_URL instead (a Secret), or leave the password to PGPASSWORD or a ~/.pgpass file';
    }
    return { value: storeRelativeTo(dir, text) };
  }
  return { value: spec.path === true && !isAbsolute(text) ? resolve(dir, text) : text };
}

/** `pglite:./data` in a file at `/etc/eg/` is `/etc/eg/data`; other URLs are left alone. */
function storeRelativeTo(dir: string, url: string): string {
  if (!url.startsWith('pglite:')) return url;
  const location = url.slice('pglite:'.length);
  if (location === '' || location === 'memory' || isAbsolute(location)) return url;
  return `pglite:${resolve(dir, location)}`;
}

function describe(node: Node): string {
  if (isMap(node)) return 'a mapping';
  if (isSeq(node)) return 'a list';
  if (isScalar(node)) return `${typeof node.value} ${JSON.stringify(node.value)}`;
  return 'an alias';
}
