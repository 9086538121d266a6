import { InputError, visibleText } from '../admin/index.js';
import { EffectgateError } from '../errors.js';

/** Terminal width the human output of the inspection commands is laid out for. */
export const COLUMNS = 100;

/**
 * Runs a flag validator; its `InputError` becomes `EG_ERR_CONFIG_INVALID` (exit 1, message naming
 * the flag), the house style for a bad flag value.
 */
export function flag<T>(parse: () => T): T {
  try {
    return parse();
  } catch (err) {
    if (err instanceof InputError)
      throw new EffectgateError('EG_ERR_CONFIG_INVALID', err.message, { cause: err });
    throw err;
  }
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: replacing control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;

/**
 * Text from the store made safe for a terminal: control characters (escape sequences) become `?`,
 * invisible format characters (bidi overrides…) their code points (`visibleText`).
 */
export function printable(text: string): string {
  return visibleText(text.replace(CONTROL, '?'));
}

/** At most `max` characters, `…` marking a cut. */
export function truncate(text: string, max: number): string {
  if (max <= 1) return text.length <= max ? text : '…'.slice(0, max);
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** Key values as compact JSON (strings quoted, so `"1"` and `1` differ), or `-` when there are none. */
export function keyText(values: readonly unknown[] | null): string {
  if (values === null) return '-';
  try {
    return printable(JSON.stringify(values));
  } catch {
    return '[unprintable]';
  }
}

export function padEnd(text: string, width: number): string {
  return text.length >= width ? text : text + ' '.repeat(width - text.length);
}

export function writeJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/**
 * `label` then `text`, word-wrapped at `COLUMNS` with the continuation lines indented under the
 * text; nothing is cut (a single word longer than the room stays whole on its line).
 */
export function labelled(label: string, text: string, labelWidth = 13): string[] {
  const indent = ' '.repeat(labelWidth);
  const room = COLUMNS - labelWidth;
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ').filter((w) => w !== '')) {
    if (line !== '' && line.length + 1 + word.length > room) {
      lines.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  lines.push(line);
  return lines.map((l, i) => (i === 0 ? padEnd(`  ${label}`, labelWidth) : indent) + l);
}
