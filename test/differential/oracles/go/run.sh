#!/bin/sh
# Builds server.go into a fresh temporary directory and execs it, so that the process the harness
# started is the server itself: under `go run`, stopping the command by its pid leaves the server
# running (and its build directory behind). The server unlinks its own binary once it has started.
set -e
if [ -z "${GOCACHE:-}" ] && [ ! -w "${XDG_CACHE_HOME:-${HOME:-/nonexistent}}" ]; then
  # The go command refuses to build without a build cache, which it keeps under HOME by default.
  GOCACHE="${TMPDIR:-/tmp}/effectgate-oracle-go-cache"
  export GOCACHE
fi
dir=$(mktemp -d)
if ! go build -o "$dir/server" server.go; then
  rm -rf "$dir"
  exit 1
fi
exec "$dir/server" -remove-self
