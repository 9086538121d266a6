#!/bin/sh
# Starts PHP's built-in server with server.php as its router script, and prints
# ORACLE READY only once the port accepts connections (php -S prints nothing on
# stdout when it is ready). Its own logs go to stderr.
set -eu
php -S "127.0.0.1:${ORACLE_PORT}" server.php 1>&2 &
pid=$!
trap 'kill "$pid" 2>/dev/null' EXIT INT TERM
i=0
until php -r 'exit(@fsockopen("127.0.0.1", (int) getenv("ORACLE_PORT")) ? 0 : 1);'; do
  if ! kill -0 "$pid" 2>/dev/null; then wait "$pid"; exit 1; fi
  i=$((i + 1)); [ "$i" -lt 100 ] || exit 1
  sleep 0.1
done
echo "ORACLE READY"
wait "$pid"
