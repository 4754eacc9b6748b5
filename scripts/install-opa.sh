#!/usr/bin/env bash
# Build the pinned OPA (tools/versions.env) from its Go module into .tools/bin/opa with
# `go install`, unless .tools/bin/opa already reports that version; Regal likewise into
# .tools/bin/regal (its build records the version it built, since `regal version` does not
# know it when built this way).
# Needs Go (and the Go module proxy); exits 1 with a message when Go is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=../tools/versions.env
. tools/versions.env
bin="$PWD/.tools/bin"

installed_version() {  # the "Version:" line of `opa version` (OPA prints it without the v)
  [ -x "$bin/opa" ] && "$bin/opa" version 2>/dev/null | sed -n 's/^Version: *//p' || true
}

if [ "$(installed_version)" = "${OPA_VERSION#v}" ]; then
  echo "opa ${OPA_VERSION} already in .tools/bin, not rebuilt"
else
  if ! command -v go >/dev/null; then
    echo "scripts/install-opa.sh: Go is not installed; OPA ${OPA_VERSION} is built from its Go module" \
      "(${OPA_MODULE}) with 'go install'. Install Go 1.26 or later and run scripts/install.sh again." >&2
    exit 1
  fi
  echo "building opa ${OPA_VERSION} into .tools/bin (go install ${OPA_MODULE}@${OPA_VERSION})"
  mkdir -p "$bin"
  GOBIN="$bin" GOFLAGS=-buildvcs=false go install "${OPA_MODULE}@${OPA_VERSION}"
  if [ "$(installed_version)" != "${OPA_VERSION#v}" ]; then
    echo "scripts/install-opa.sh: .tools/bin/opa does not report version ${OPA_VERSION} after the build" >&2
    exit 1
  fi
fi

if [ -n "${REGAL_VERSION:-}" ]; then
  stamp="$bin/.regal-version"
  if [ -x "$bin/regal" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$REGAL_VERSION" ]; then
    echo "regal ${REGAL_VERSION} already in .tools/bin, not rebuilt"
  else
    echo "building regal ${REGAL_VERSION} into .tools/bin (from a module that requires ${REGAL_MODULE})"
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    printf 'module toolgate.local/regal-build\n\ngo 1.26\n\nrequire %s %s\n' "$REGAL_MODULE" "$REGAL_VERSION" > "$work/go.mod"
    printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$REGAL_MODULE" > "$work/tools.go"
    (cd "$work" && go mod tidy && GOBIN="$bin" GOFLAGS=-buildvcs=false go install "$REGAL_MODULE")
    echo "$REGAL_VERSION" > "$stamp"
  fi
fi
