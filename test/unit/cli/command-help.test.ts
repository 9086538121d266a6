/** Each command's --help against the flags it parses: they cannot drift apart. */
import { describe, expect, it } from 'vitest';
import { COMMANDS } from '../../../src/cli/command-help.js';
import type { FlagTable } from '../../../src/cli/parse-flags.js';

/** The flag names a usage text mentions; `--no-x` of an on/off flag `x` counts as `x`. */
function helpFlags(usage: string, options: FlagTable): Set<string> {
  const names = new Set<string>();
  for (const [, name] of usage.matchAll(/--([a-z][a-z0-9-]*)/g)) {
    const base = name!.startsWith('no-') && !Object.hasOwn(options, name!) ? name!.slice(3) : name!;
    names.add(base);
  }
  return names;
}

describe.each(Object.entries(COMMANDS))('effectgate %s --help', (_command, spec) => {
  const options: FlagTable = Object.assign({}, ...spec.flags);

  it('names exactly the flags the command parses', () => {
    expect([...helpFlags(spec.usage, options)].sort()).toEqual(Object.keys(options).sort());
  });

  it('shows each parsed default on the line of its flag', () => {
    const lines = spec.usage.split('\n');
    for (const [name, option] of Object.entries(options)) {
      if (option.default === undefined || option.type === 'boolean') continue;
      const line = lines.find((l) => l.includes(`--${name} `) && l.includes(String(option.default)));
      expect(line, `--${name} default ${String(option.default)}`).toBeDefined();
    }
  });
});

describe('effectgate proxy --help', () => {
  it('gives every flag that takes a value its default', () => {
    const usage = COMMANDS['proxy']!.usage;
    for (const line of usage.split('\n').filter((l) => l.startsWith('  --'))) {
      if (/^ {2}--[a-z-]+$/.test(line)) continue; // an on/off flag, off unless given
      expect(line).toMatch(/\(default .+\)$/);
    }
  });
});
