import { MASK, maskUrl } from './mask-secret.js';
import { defaultText } from './proxy-settings.js';
import type { ResolvedSetting, ResolvedSettings, SettingSource } from './resolve-settings.js';

/**
 * `effectgate proxy --print-config`: every setting, its value and where the value came from, one
 * aligned line each. Secrets never appear: an inline secret is `***`, a URL keeps all but its
 * password. A setting left out shows what the code applies instead, with the source `default`.
 */
export function formatSettings(resolved: ResolvedSettings<unknown>): string {
  const rows = resolved.settings.map((s) => [s.name, shown(s), describeSource(s)] as const);
  const nameWidth = Math.max(...rows.map((r) => r[0].length));
  const valueWidth = Math.min(52, Math.max(...rows.map((r) => r[1].length)));
  const lines = rows.map(([name, value, source]) =>
    `${name.padEnd(nameWidth)}  ${value.padEnd(valueWidth)}  ${source}`.trimEnd(),
  );
  return `# effectgate proxy settings: flag > environment > config file > default (secrets masked)\n${lines.join('\n')}\n`;
}

/** The value as it may be printed. */
export function shown(setting: ResolvedSetting): string {
  const { value, spec } = setting;
  if (setting.overriddenBy !== undefined) return `(not used: ${setting.overriddenBy} wins)`;
  if (value === undefined) return `(${defaultText(spec)})`;
  if (spec.secret === true) return MASK;
  if (spec.secret === 'url' && typeof value === 'string') return maskUrl(value);
  return String(value);
}

function describeSource(setting: ResolvedSetting): string {
  const source: SettingSource = setting.source;
  switch (source.kind) {
    case 'flag':
      return `flag --${setting.name}`;
    case 'env':
      return `env ${source.name}`;
    case 'file':
      return `${source.file}:${source.line}`;
    default:
      return 'default';
  }
}
