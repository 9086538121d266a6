import { readFile, stat } from 'node:fs/promises';
import { EffectgateError } from '../errors.js';
import { parseToolsList, type ToolsList } from './tools-list.js';

/** A `tools/list` answer is a few KiB per tool; far more is not one. */
export const MAX_TOOLS_LIST_BYTES = 4 * 1024 * 1024;

/**
 * Reads and parses a saved `tools/list` result or response (see `parseToolsList`). Throws
 * `EG_ERR_CONFIG_INVALID` with a message starting `file: ` when it cannot be read, is larger
 * than {@link MAX_TOOLS_LIST_BYTES}, or is not one.
 */
export async function loadToolsList(file: string): Promise<ToolsList> {
  const fail = (message: string, cause?: unknown): EffectgateError =>
    new EffectgateError('EG_ERR_CONFIG_INVALID', `${file}: ${message}`, { cause });
  let text: string;
  try {
    // Check the size before reading so an oversized file is never pulled into memory.
    const info = await stat(file);
    if (!info.isFile()) throw fail('is not a regular file');
    if (info.size > MAX_TOOLS_LIST_BYTES)
      throw fail(
        `file is ${info.size} bytes; a tools/list document is limited to ${MAX_TOOLS_LIST_BYTES} bytes (4 MiB)`,
      );
    text = await readFile(file, 'utf8');
  } catch (err) {
    if (err instanceof EffectgateError) throw err;
    throw fail(`cannot read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, err);
  }
  return parseToolsList(text, file);
}
