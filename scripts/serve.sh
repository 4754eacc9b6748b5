#!/usr/bin/env bash
# Install (scripts/install.sh), start a local Redis on 127.0.0.1:6379 if none answers there,
# and run the gateway under gunicorn on 127.0.0.1:8080 with the embedded OPA engine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
redis_url="${TOOLGATE_REDIS_URL:-redis://127.0.0.1:6379/0}"
if ! redis-cli -u "$redis_url" ping >/dev/null 2>&1; then
  mkdir -p var/redis
  redis-server --port 6379 --bind 127.0.0.1 --dir "$PWD/var/redis" --appendonly yes \
    --appendfsync everysec --daemonize yes --logfile "$PWD/var/redis/redis.log"
fi
exec .venv/bin/toolgate serve "$@"
