#!/usr/bin/env bash
# Install (scripts/install.sh), then run the Rego tests and the whole pytest suite.
# The test harness starts its own Redis (and other servers) on free loopback ports.
# pytest runs twice: every test not marked serial on all cores (pytest-xdist, one worker per
# core), then the serial ones (wall-clock bounds a busy second core can break) alone. Arguments
# go to both runs, e.g. `bash scripts/test.sh tests/api -x`; a run that selects no test passes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
# The Rego tests under the pinned opa (coverage of the policy files, at least 90 %).
.venv/bin/toolgate policy test policies --coverage --fail-under 90
status=0
.venv/bin/python -m pytest -q -n auto --dist worksteal -m "not serial" "$@" || status=$?
[ "$status" -eq 5 ] && status=0  # 5: no test selected
serial=0
.venv/bin/python -m pytest -q -p no:xdist -m serial "$@" || serial=$?
[ "$serial" -eq 5 ] && serial=0
[ "$status" -ne 0 ] && exit "$status"
exit "$serial"
