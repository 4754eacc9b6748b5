#!/usr/bin/env bash
# Stop what scripts/serve.sh started: the gateway, the proxy, the OPA sidecar, the development bundle
# server and the local Redis, each by its pidfile under SERVE_STATE_DIR/run (default var/run;
# a stale pidfile is removed).
set -euo pipefail
cd "$(dirname "$0")/.."
run="${SERVE_STATE_DIR:-$PWD/var}/run"
stopped=0
for name in gateway proxy opa bundle-server redis; do
  pidfile="$run/$name.pid"
  [ -f "$pidfile" ] || continue
  pid="$(cat "$pidfile")"
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; fi
    echo "stopped $name (pid $pid)"
    stopped=$((stopped + 1))
  fi
  rm -f "$pidfile"
done
[ "$stopped" -gt 0 ] || echo "nothing to stop"
