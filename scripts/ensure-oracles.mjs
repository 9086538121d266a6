#!/usr/bin/env node
// Part of `npm test`: the differential suite (test/differential) runs real server frameworks as
// oracles: Debian's Go, Ruby on Rails, PHP with Laravel, Django, Flask and FastAPI. When one is
// missing and this process may install packages (root with apt-get, as on the project's machines
// and in CI), install the union of what the oracles' manifests ask for; otherwise say which
// oracles will report themselves skipped, and why. Never fails the run: a missing oracle is a
// skipped check with its reason, not a passed one.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { aptInstall, canAptInstall } from './apt-install.mjs';

const dir = new URL('../test/differential/oracles/', import.meta.url).pathname;
const manifests = readdirSync(dir, { withFileTypes: true })
  .filter((d) => d.isDirectory() && existsSync(join(dir, d.name, 'oracle.json')))
  .map((d) => JSON.parse(readFileSync(join(dir, d.name, 'oracle.json'), 'utf8')));

const present = (exe) => {
  if (exe.startsWith('/')) return existsSync(exe);
  try {
    execFileSync('sh', ['-c', `command -v ${exe}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};
// Debian's packages are the oracles: a binary being there is not enough (the frameworks are
// libraries), so every package is checked, not only the executables.
const installed = (pkg) => {
  try {
    // dpkg-query's own format syntax, not a template.
    const out = execFileSync('dpkg-query', ['-W', `-f=${'$'}{Status}`, pkg], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    return out.toString().includes('install ok installed');
  } catch {
    return false;
  }
};
const hasDpkg = existsSync('/usr/bin/dpkg-query');
const missing = [...new Set(manifests.flatMap((m) => m.debian))].filter((p) => hasDpkg && !installed(p));
if (missing.length > 0 && canAptInstall) {
  console.error(`Installing the differential oracles' Debian packages: ${missing.join(' ')}…`);
  aptInstall(missing, 'those oracles');
}
for (const m of manifests) {
  const absent = m.requires.filter((exe) => !present(exe));
  if (absent.length > 0) {
    console.error(
      `differential oracle ${m.name} will be skipped: ${absent.join(', ')} not found (Debian: ${m.debian.join(' ') || 'none'})`,
    );
  }
}
