#!/usr/bin/env bash
# Install (scripts/install.sh), then run the Rego tests and the whole pytest suite.
# The test harness starts its own Redis (and other servers) on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
.venv/bin/toolgate policy test policies
exec .venv/bin/python -m pytest -q "$@"
