#!/usr/bin/env bash
# Run the gateway after scripts/install.sh: nginx on 127.0.0.1:8080 (TOOLGATE_PROXY_LISTEN,
# configuration from `toolgate proxy config`) in front of gunicorn on 127.0.0.1:8081
# (TOOLGATE_BIND, or --bind).
#
#   bash scripts/serve.sh [--bind HOST:PORT]   start (in the foreground)
#   bash scripts/serve.sh stop                 stop what an earlier run started (scripts/stop.sh)
#
# Redis: when nothing answers at TOOLGATE_REDIS_URL (default redis://127.0.0.1:6379/0) and its
# host is loopback, a local redis-server is started on that host and port (pidfile
# var/run/redis.pid; it keeps running for later runs until `serve.sh stop`).
# Engine: embedded (default), reloading TOOLGATE_POLICY_DIR (default policies/) every
# TOOLGATE_POLICY_POLL_INTERVAL_S (2 s here). TOOLGATE_ENGINE=opa: a real `opa run --server`
# sidecar on TOOLGATE_OPA_URL (default http://127.0.0.1:8181) polling the bundle of
# TOOLGATE_POLICY_DIR (default policies/) from `toolgate policy serve-bundle`
# (SERVE_BUNDLE_BIND, default 127.0.0.1:8282) every 1-2 s; the gateway starts once OPA reports
# the bundle active (/health?bundles). When the gateway stops, the proxy, the sidecar and the
# bundle server stop with it. An OPA already answering at TOOLGATE_OPA_URL is used as it is.
# State (pidfiles run/, logs log/ with the gateway's own log/gateway.log, Redis data redis/,
# OPA config opa/) lives in SERVE_STATE_DIR (default var/).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "stop" ]; then
  exec bash scripts/stop.sh
fi
serve_args=()
while [ $# -gt 0 ]; do  # --bind is gunicorn's address, which the proxy must know too
  case "$1" in
    --bind) export TOOLGATE_BIND="$2"; shift 2 ;;
    --bind=*) export TOOLGATE_BIND="${1#--bind=}"; shift ;;
    *) serve_args+=("$1"); shift ;;
  esac
done
bash scripts/install.sh
state="${SERVE_STATE_DIR:-$PWD/var}"
run="$state/run"
mkdir -p "$run" "$state/redis" "$state/opa" "$state/log"
# Tenant data pushed through PUT /v1/policy/tenants/<tenant>/data, laid over policies/.
export TOOLGATE_TENANT_DATA_DIR="${TOOLGATE_TENANT_DATA_DIR:-$state/tenant-data}"
if [ -f "$run/gateway.pid" ] && kill -0 "$(cat "$run/gateway.pid")" 2>/dev/null; then
  echo "serve.sh: a gateway started here is running (pid $(cat "$run/gateway.pid")); bash scripts/serve.sh stop" >&2
  exit 1
fi

# host port of a URL (redis:// or http://), defaults for missing parts
host_port() {
  .venv/bin/python - "$1" "$2" <<'PY'
import sys
from urllib.parse import urlsplit
u = urlsplit(sys.argv[1])
print(u.hostname or "127.0.0.1", u.port or int(sys.argv[2]))
PY
}
is_loopback() { case "$1" in 127.*|localhost|::1) return 0 ;; *) return 1 ;; esac; }

redis_url="${TOOLGATE_REDIS_URL:-redis://127.0.0.1:6379/0}"
read -r redis_host redis_port < <(host_port "$redis_url" 6379)
if ! redis-cli -h "$redis_host" -p "$redis_port" ping >/dev/null 2>&1; then
  if ! is_loopback "$redis_host"; then
    echo "serve.sh: Redis at $redis_host:$redis_port does not answer and is not local; not starting one" >&2
    exit 1
  fi
  redis-server --port "$redis_port" --bind "$redis_host" --dir "$state/redis" --appendonly yes \
    --appendfsync everysec --daemonize yes --pidfile "$run/redis.pid" --logfile "$state/redis/redis.log"
  for _ in $(seq 50); do redis-cli -h "$redis_host" -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  echo "started redis-server on $redis_host:$redis_port (pidfile $run/redis.pid)"
fi

opa_url="${TOOLGATE_OPA_URL:-http://127.0.0.1:8181}"
read -r opa_host opa_port < <(host_port "$opa_url" 8181)
bundle_bind="${SERVE_BUNDLE_BIND:-127.0.0.1:8282}"
bundle_name="${TOOLGATE_OPA_BUNDLE_NAME:-toolgate}"
started=()
cleanup() {
  trap - EXIT INT TERM
  for name in gateway "${started[@]}"; do
    pidfile="$run/$name.pid"
    [ -f "$pidfile" ] || continue
    pid="$(cat "$pidfile")"
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
      echo "stopped $name (pid $pid)"
    fi
    rm -f "$pidfile"
  done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "${TOOLGATE_ENGINE:-embedded}" != "opa" ]; then
  export TOOLGATE_POLICY_POLL_INTERVAL_S="${TOOLGATE_POLICY_POLL_INTERVAL_S:-2}"
elif curl -fsS "$opa_url/health?bundles" >/dev/null 2>&1; then
  echo "using the OPA already answering at $opa_url"
  export TOOLGATE_OPA_URL="$opa_url"
else
  if ! is_loopback "$opa_host"; then
    echo "serve.sh: OPA at $opa_url does not answer and is not local; not starting one" >&2
    exit 1
  fi
  .venv/bin/toolgate policy serve-bundle "${TOOLGATE_POLICY_DIR:-policies}" --bind "$bundle_bind" --name "$bundle_name" \
    >> "$state/log/bundle-server.log" 2>&1 &
  echo $! > "$run/bundle-server.pid"
  started+=(bundle-server)
  cat > "$state/opa/config.yaml" <<YAML
# Written by scripts/serve.sh: the sidecar polls the development bundle service.
services:
  bundles:
    url: http://$bundle_bind
bundles:
  $bundle_name:
    service: bundles
    resource: /bundles/$bundle_name.tar.gz
    polling:
      min_delay_seconds: 1
      max_delay_seconds: 2
status:
  console: true
decision_logs:
  console: false
YAML
  .tools/bin/opa run --server --addr="$opa_host:$opa_port" --config-file="$state/opa/config.yaml" \
    --log-level=error >> "$state/log/opa.log" 2>&1 &
  echo $! > "$run/opa.pid"
  started+=(opa)
  ready=""
  for _ in $(seq 300); do
    if curl -fsS "$opa_url/health?bundles" >/dev/null 2>&1; then ready=1; break; fi
    kill -0 "$(cat "$run/opa.pid")" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$ready" ]; then
    echo "serve.sh: OPA did not report the bundle active at $opa_url/health?bundles; see $state/log/opa.log:" >&2
    tail -5 "$state/log/opa.log" >&2
    exit 1
  fi
  echo "started opa $(.tools/bin/opa version | sed -n 's/^Version: //p') on $opa_host:$opa_port" \
    "with bundle $bundle_name from http://$bundle_bind (pidfiles in $run)"
  export TOOLGATE_OPA_URL="$opa_url"
fi

proxy_listen="${TOOLGATE_PROXY_LISTEN:-127.0.0.1:8080}"
mkdir -p "$state/nginx"
.venv/bin/toolgate proxy config --state-dir "$state/nginx" > "$state/nginx/nginx.conf" 2>/dev/null
"$(command -v nginx || echo /usr/sbin/nginx)" -c "$state/nginx/nginx.conf" -p "$state/nginx" -e "$state/nginx/nginx-error.log" >> "$state/log/proxy.log" 2>&1 &
echo $! > "$run/proxy.pid"
started+=(proxy)
for _ in $(seq 20); do  # nginx fails at once (a taken port, a bad path) or keeps running
  kill -0 "$(cat "$run/proxy.pid")" 2>/dev/null || break
  sleep 0.05
done
if ! kill -0 "$(cat "$run/proxy.pid")" 2>/dev/null; then
  echo "serve.sh: nginx did not start on $proxy_listen; see $state/log/proxy.log:" >&2
  tail -3 "$state/log/proxy.log" >&2
  exit 1
fi
echo "started nginx on $proxy_listen in front of gunicorn on ${TOOLGATE_BIND:-127.0.0.1:8081} (pidfile $run/proxy.pid)"
# The gateway's log goes to the terminal and to log/gateway.log.
.venv/bin/toolgate serve "${serve_args[@]}" > >(tee -a "$state/log/gateway.log") 2>&1 &
echo $! > "$run/gateway.pid"
wait "$!" || status=$?
exit "${status:-0}"
