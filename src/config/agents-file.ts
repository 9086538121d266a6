/**
 * The agents file of a shared proxy (`--agents FILE`, docs/design.md §4.2): each entry maps a proxy
 * credential to a scope. Only a SHA-256 of each secret is stored, never the secret itself:
 *
 * ```yaml
 * agents:
 *   - id: triage-bot
 *     secret_sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
 *     tenant: acme
 *     area: support
 *     agent: triage-bot
 * ```
 *
 * Validated once at load; every problem is reported as `file:line:column: field: message`.
 */
import { readFile, stat } from 'node:fs/promises';
import { isMap, isScalar, isSeq, type Node } from 'yaml';
import { EffectgateError } from '../errors.js';
import { checkScopePart, type ScopeConfig } from './gate-config.js';
import { nodePosition, parseSafeYaml, type YamlIssue, yamlIssuesError } from './safe-yaml.js';

/** An agents file is a short list; anything bigger is a mistake or an attack on the parser. */
export const MAX_AGENTS_FILE_BYTES = 256 * 1024;
/** Agents files need no aliases at all; a few are tolerated, an alias bomb is not. */
export const MAX_AGENTS_ALIAS_COUNT = 10;

const ENTRY_FIELDS = ['id', 'secret_sha256', 'tenant', 'area', 'agent'] as const;
const SHA256_HEX = /^[0-9a-fA-F]{64}$/;

export interface AgentEntry {
  readonly id: string;
  /** SHA-256 of the secret (32 bytes). */
  readonly secretSha256: Buffer;
  readonly scope: ScopeConfig;
}

/** The frozen, validated agents file. */
export interface AgentRegistry {
  readonly size: number;
  /** For `Basic` credentials: the entry for a user id. */
  byId(id: string): AgentEntry | undefined;
  /** For `Bearer` credentials: the entry whose `secret_sha256` is `digest` (32 bytes). */
  bySecretSha256(digest: Buffer): AgentEntry | undefined;
}

/** Reads and validates an agents file. Throws `EG_ERR_CONFIG_INVALID` listing every problem. */
export async function loadAgentsFile(file: string): Promise<AgentRegistry> {
  let text: string;
  try {
    const info = await stat(file);
    if (info.size > MAX_AGENTS_FILE_BYTES) {
      throw new EffectgateError(
        'EG_ERR_CONFIG_INVALID',
        `${file}:1:1: (file): file is ${info.size} bytes; agents files are limited to ${MAX_AGENTS_FILE_BYTES} bytes`,
      );
    }
    text = await readFile(file, 'utf8');
  } catch (err) {
    if (err instanceof EffectgateError) throw err;
    throw new EffectgateError('EG_ERR_CONFIG_INVALID', `--agents ${file}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  return parseAgentsFile(file, text);
}

/** Validates the text of an agents file (`file` names it in messages). */
export function parseAgentsFile(file: string, text: string): AgentRegistry {
  const issues: YamlIssue[] = [];
  const fail = (): never => {
    throw yamlIssuesError(file, issues);
  };
  const yaml = parseSafeYaml(text, {
    maxBytes: MAX_AGENTS_FILE_BYTES,
    maxAliasCount: MAX_AGENTS_ALIAS_COUNT,
    kind: 'agents files',
  });
  if (!yaml.ok) {
    issues.push(...yaml.issues);
    return fail();
  }
  const { doc, lines } = yaml;
  const at = nodePosition(lines);
  const issue = (node: Node | null | undefined, field: string, message: string): void => {
    issues.push({ ...at(node), field, message });
  };

  const root = doc.contents;
  if (!isMap(root)) {
    issue(root, '', 'expected a mapping with an `agents` list');
    fail();
  }
  const byId = new Map<string, AgentEntry>();
  const byDigest = new Map<string, AgentEntry>();
  let agentsNode: Node | null = null;
  for (const pair of (root as { items: { key: unknown; value: unknown }[] }).items) {
    const key = isScalar(pair.key) ? pair.key.value : pair.key;
    if (key === 'agents') agentsNode = (pair.value as Node | null) ?? null;
    else issue(pair.key as Node, String(key), 'unknown field; the only top-level field is `agents`');
  }
  if (agentsNode === null || !isSeq(agentsNode)) {
    issue(agentsNode ?? root, 'agents', 'must be a list of { id, secret_sha256, tenant, area, agent }');
    fail();
  }
  const seq = agentsNode as unknown as { items: unknown[] };
  if (seq.items.length === 0) issue(agentsNode, 'agents', 'lists no agent');

  seq.items.forEach((item, index) => {
    const base = `agents[${index}]`;
    if (!isMap(item)) {
      issue(item as Node, base, 'must be a mapping { id, secret_sha256, tenant, area, agent }');
      return;
    }
    const values: Partial<Record<(typeof ENTRY_FIELDS)[number], { value: unknown; node: Node }>> = {};
    for (const pair of item.items) {
      const key = isScalar(pair.key) ? pair.key.value : pair.key;
      const name = String(key);
      if (!(ENTRY_FIELDS as readonly string[]).includes(name)) {
        issue(
          pair.key as Node,
          `${base}.${name}`,
          `unknown field; expected one of ${ENTRY_FIELDS.join(', ')}`,
        );
        continue;
      }
      const valueNode = pair.value as Node | null;
      values[name as (typeof ENTRY_FIELDS)[number]] = {
        value: isScalar(valueNode) ? valueNode.value : valueNode,
        node: valueNode ?? (pair.key as Node),
      };
    }
    let ok = true;
    for (const field of ENTRY_FIELDS) {
      if (values[field] === undefined) {
        issue(item, `${base}.${field}`, 'is required');
        ok = false;
      }
    }
    if (!ok) return;
    const check = (field: 'id' | 'tenant' | 'area' | 'agent'): string | null => {
      const v = values[field]!;
      try {
        return checkScopePart(field, v.value);
      } catch (err) {
        issue(v.node, `${base}.${field}`, (err as Error).message);
        return null;
      }
    };
    const id = check('id');
    const tenant = check('tenant');
    const area = check('area');
    const agent = check('agent');
    const secret = values.secret_sha256!;
    let digest: Buffer | null = null;
    if (typeof secret.value !== 'string' || !SHA256_HEX.test(secret.value)) {
      issue(
        secret.node,
        `${base}.secret_sha256`,
        'must be the SHA-256 of the secret as 64 hex digits (printf %s "$SECRET" | sha256sum); never the secret itself',
      );
    } else {
      digest = Buffer.from(secret.value, 'hex');
    }
    if (id === null || tenant === null || area === null || agent === null || digest === null) return;
    if (byId.has(id)) {
      issue(values.id!.node, `${base}.id`, `duplicate id ${JSON.stringify(id)}; ids must be unique`);
      return;
    }
    const hex = digest.toString('hex');
    const sameSecret = byDigest.get(hex);
    if (sameSecret !== undefined) {
      issue(
        secret.node,
        `${base}.secret_sha256`,
        `same secret as ${JSON.stringify(sameSecret.id)}; every agent needs its own secret`,
      );
      return;
    }
    const entry: AgentEntry = Object.freeze({
      id,
      secretSha256: digest,
      scope: Object.freeze({ tenant, area, agent }),
    });
    byId.set(id, entry);
    byDigest.set(hex, entry);
  });
  if (issues.length > 0) fail();

  return Object.freeze({
    size: byId.size,
    byId: (id: string) => byId.get(id),
    bySecretSha256: (digest: Buffer) => byDigest.get(digest.toString('hex')),
  });
}
