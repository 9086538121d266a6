import { closeSync, constants, existsSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { EffectgateError } from '../errors.js';

/**
 * The longest path a Unix socket address holds: `sun_path` less its terminating NUL, 108 bytes on
 * Linux and 104 on macOS and the BSDs (unix(7), unix(4)). A longer path is not refused by every
 * runtime: libuv has been seen to cut it short and bind the cut path, a stray socket in another
 * directory.
 */
export const MAX_SOCKET_PATH_BYTES = process.platform === 'linux' ? 107 : 103;

/** Where a socket file is, and the address that reaches it. */
export interface SocketPath {
  /** The socket file (for stat, chmod, unlink and messages): any length. */
  readonly path: string;
  /** What bind and connect are given: `path` itself, or a short name of it (see socketPath). */
  readonly address: string;
  /**
   * Closes the directory handle a short name goes through (idempotent; nothing for a plain path).
   * A client calls it once connected; a server once it stopped listening, because Node removes
   * the socket file at close through the address it bound.
   */
  release(): void;
}

/**
 * The socket `name` in `dir`, addressable whatever the length of `dir`. A path that fits is used
 * as it is. A longer one on Linux goes through `/proc/self/fd/N/name`, N a handle on `dir` this
 * process holds open meanwhile: the kernel resolves it to the same directory, so the socket file
 * is created in (or reached in) `dir` itself, with the same file-system permissions as a short
 * path, and nothing is created elsewhere. Where that is not offered, a clear refusal naming the
 * limit (`EG_ERR_CONFIG_INVALID`: the store directory is the configuration to change).
 */
export function socketPath(dir: string, name: string): SocketPath {
  const path = join(dir, name);
  const bytes = Buffer.byteLength(path);
  if (bytes <= MAX_SOCKET_PATH_BYTES) return { path, address: path, release: () => undefined };
  if (process.platform === 'linux' && existsSync('/proc/self/fd')) {
    const fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY);
    let open = true;
    return {
      path,
      address: `/proc/self/fd/${fd}/${name}`,
      release() {
        if (!open) return;
        open = false;
        closeSync(fd);
      },
    };
  }
  throw new EffectgateError(
    'EG_ERR_CONFIG_INVALID',
    `The store socket ${path} is ${bytes} bytes long; a Unix socket path holds ${MAX_SOCKET_PATH_BYTES} bytes at most on this system, and it offers no shorter name for a directory (/proc/self/fd). Move the embedded store to a shorter directory (--store pglite:DIR).`,
  );
}
