#!/usr/bin/env bash
# Install (scripts/install.sh), then run the Rego tests and the whole pytest suite.
# The test harness starts its own Redis (and other servers) on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
# The Rego tests under the pinned opa (coverage of the policy files, at least 90 %).
.venv/bin/toolgate policy test policies --coverage --fail-under 90
exec .venv/bin/python -m pytest -q "$@"
