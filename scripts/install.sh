#!/usr/bin/env bash
# Install everything toolgate needs on a Debian machine (run as root): system packages,
# a virtualenv in .venv with the embedded OPA engine and the project with its test extras.
# Idempotent: a second run only re-installs when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v python3 >/dev/null || need_apt+=(python3 python3-venv python3-pip)
python3 -c 'import venv, ensurepip' 2>/dev/null || need_apt+=(python3-venv)
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v redis-cli >/dev/null || need_apt+=(redis-tools)
command -v git >/dev/null || need_apt+=(git)
# Decision log tests run a throwaway PostgreSQL (initdb/pg_ctl) and make files immutable (chattr).
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
command -v chattr >/dev/null || need_apt+=(e2fsprogs)
command -v wrk >/dev/null || need_apt+=(wrk)  # load generator of the benchmark (bench/)
[ -x /usr/sbin/nginx ] || need_apt+=(nginx)  # the proxy in front of gunicorn (app/proxy)
if [ ${#need_apt[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
# redis-server from Debian starts a system service; toolgate starts its own where it needs one.

stamp=".venv/.toolgate-installed"
want="$(sha256sum pyproject.toml scripts/install.sh | sha256sum | cut -c1-16)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
# The OPA engine's metadata says Python >= 3.14; it works on 3.11 (see README).
.venv/bin/pip install -q --ignore-requires-python "opa-golib-python-bindings==0.4.4"
.venv/bin/pip install -q -e ".[test]"
echo "$want" > "$stamp"
