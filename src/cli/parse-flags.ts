import { type ParseArgsConfig, parseArgs } from 'node:util';
import { EffectgateError } from '../errors.js';
import { suggestField } from '../policy/index.js';

/** The flags one command (or subcommand) accepts, as `parseArgs` takes them. */
export type FlagTable = NonNullable<ParseArgsConfig['options']>;

/**
 * A command line the command cannot take (an unknown flag, a flag without its value, an argument
 * where none is taken): `main` prints the message and `usage` and exits 2, the Unix convention
 * for a usage error, apart from exit 1 for a bad flag *value* (`EG_ERR_CONFIG_INVALID` too).
 */
export class UsageError extends EffectgateError {
  readonly usage: string;

  constructor(message: string, usage: string) {
    super('EG_ERR_CONFIG_INVALID', message);
    this.name = 'UsageError';
    this.usage = usage;
  }
}

/**
 * `parseArgs` (strict) for every command, so every command answers a bad command line the same
 * way: our own sentence, with a did-you-mean for a misspelt flag and the command's usage, never
 * Node's `ERR_PARSE_ARGS_*` text (which suggests `--` tricks and names no known flag).
 */
export function parseFlags<T extends ParseArgsConfig & { readonly options: FlagTable }>(
  config: T,
  usage: string,
): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (err) {
    if (!isParseArgsError(err)) throw err;
    throw new UsageError(explain(config), usage);
  }
}

function isParseArgsError(err: unknown): boolean {
  return err instanceof TypeError && String((err as { code?: unknown }).code).startsWith('ERR_PARSE_ARGS');
}

/** What is wrong with the command line, found again on its tokens (a lenient parse never throws). */
function explain(config: ParseArgsConfig & { readonly options: FlagTable }): string {
  const { tokens } = parseArgs({ ...config, strict: false, allowPositionals: true, tokens: true });
  const known = Object.keys(config.options);
  for (const token of tokens) {
    if (token.kind === 'positional') {
      if (config.allowPositionals !== true) return `unexpected argument ${JSON.stringify(token.value)}`;
      continue;
    }
    if (token.kind !== 'option') continue;
    const option = Object.hasOwn(config.options, token.name) ? config.options[token.name] : undefined;
    const negated =
      token.rawName.startsWith('--no-') && !Object.hasOwn(config.options, token.rawName.slice(2));
    if (option === undefined || (negated && option.type !== 'boolean')) {
      const near = suggestField(token.rawName.replace(/^--?/, ''), known);
      return `unknown flag ${token.rawName}${near === null ? '' : ` (did you mean --${near}?)`}`;
    }
    if (option.type === 'boolean' && token.value !== undefined)
      return `${token.rawName} takes no value (got ${JSON.stringify(token.value)})`;
    if (
      option.type === 'string' &&
      (token.value === undefined ||
        (!token.inlineValue && token.value.length > 1 && token.value.startsWith('-')))
    )
      return `${token.rawName} needs a value (one starting with "-" is written ${token.rawName}=VALUE)`;
  }
  return 'the command line cannot be read';
}
