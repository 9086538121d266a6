#!/usr/bin/env node
// Part of `npm test`: the timeline page is tested in a real headless Chromium (Debian's package,
// driven by playwright-core). When it is missing and this process may install packages (root with
// apt-get, as on the project's machines and in CI), install it; otherwise say how, and fail.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const path = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
if (existsSync(path)) process.exit(0);
const canInstall = process.getuid?.() === 0 && existsSync('/usr/bin/apt-get');
if (!canInstall) {
  console.error(`Chromium is not at ${path}: install it (apt-get install chromium) or set CHROMIUM_PATH.`);
  process.exit(1);
}
console.error('Installing Debian chromium for the browser tests (apt-get install chromium)…');
const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
const install = () =>
  execFileSync('apt-get', ['install', '-y', '--no-install-recommends', 'chromium'], { env, stdio: 'ignore' });
try {
  install();
} catch {
  execFileSync('apt-get', ['update'], { env, stdio: 'ignore' });
  install();
}
if (!existsSync(path)) {
  console.error(`apt-get installed chromium, but not at ${path}; set CHROMIUM_PATH.`);
  process.exit(1);
}
