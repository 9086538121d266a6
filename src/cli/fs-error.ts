/** An error from the file system (it has a `code` and a `syscall`): reported as a message, not thrown on. */
export function isFsError(err: unknown): err is NodeJS.ErrnoException {
  return err instanceof Error && typeof (err as NodeJS.ErrnoException).code === 'string' && 'syscall' in err;
}
