// Installing Debian packages for the test command's prerequisites (the differential oracles, the
// real-client suites), one way for both: only as root with apt-get (the project's machines and
// CI); the package index is refreshed only when an install from the current one fails. Never
// throws: a prerequisite that cannot be installed is a suite that reports itself skipped.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

/** Whether this process may install packages. */
export const canAptInstall = process.getuid?.() === 0 && existsSync('/usr/bin/apt-get');

/** Installs `packages`; on failure says so, naming what will be skipped (`skipped`). */
export function aptInstall(packages, skipped) {
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = () =>
    execFileSync('apt-get', ['install', '-y', '--no-install-recommends', ...packages], {
      env,
      stdio: 'ignore',
    });
  try {
    install();
  } catch {
    try {
      execFileSync('apt-get', ['update'], { env, stdio: 'ignore' });
      install();
    } catch (err) {
      console.error(`apt-get could not install them (${err.message}); ${skipped} will be skipped.`);
    }
  }
}
