"""The start-up check of the gateway (``toolgate serve``, gunicorn.conf.py ``on_starting``):
with the embedded engine, the configured policies (directory, bundle file or URL) must load,
verify (when a verification key is set) and compile, else the gateway does not start: exit 1
with the error on stderr, before any worker forks. In production without a bundle verification
key it warns loudly.

Run as ``python -m app.policy.preflight`` in a child process, so the Go runtime of the OPA
engine never starts in the gunicorn master (a Go runtime does not survive fork).
"""

from __future__ import annotations

import sys

from app.settings import Settings, SettingsError, load_settings

UNSIGNED_WARNING = (
    "WARNING: TOOLGATE_ENV=production and no TOOLGATE_POLICY_VERIFICATION_KEY: policy bundles are "
    "not signature-checked, so whoever can write the bundle source decides every call"
)
SIDECAR_WARNING = (
    "WARNING: TOOLGATE_ENV=production and no TOOLGATE_POLICY_VERIFICATION_KEY: make sure the OPA "
    "sidecar's configuration has a bundles.<name>.signing block (deploy/opa-config.yaml)"
)


def check(settings: Settings) -> str:
    """Load, verify and compile the embedded engine's policies once; returns the revision
    (``"sidecar"`` for the OPA engine, whose policies OPA loads). Raises ``PolicyLoadError``,
    ``BundleSignatureError`` or ``BundleUnavailable``."""
    if settings.engine != "embedded":
        return "sidecar"
    from app.engine import build_source, build_verifier
    from app.engine.embedded import check_bundle
    from app.engine.sources import BundleUnavailable

    bundle = build_source(settings).fetch()
    if bundle is None:  # pragma: no cover - a fresh source always returns its first bundle
        raise BundleUnavailable("the policy source returned nothing")
    check_bundle(bundle, build_verifier(settings))
    return bundle.revision


def main() -> int:
    """Exit status: 0 ready to start, 1 the policies cannot be used, 2 invalid settings."""
    from app.engine.sources import BundleUnavailable
    from app.policy.bundle import PolicyLoadError
    from app.policy.signing import BundleSignatureError

    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"toolgate: {exc}", file=sys.stderr)
        return 2
    if settings.env == "production" and settings.policy_verification_key is None:
        banner = "!" * 100
        warning = UNSIGNED_WARNING if settings.engine == "embedded" else SIDECAR_WARNING
        print(f"{banner}\n{warning}\n{banner}", file=sys.stderr)
    try:
        check(settings)
    except (PolicyLoadError, BundleSignatureError, BundleUnavailable) as exc:
        print(f"toolgate: the policies cannot be loaded, not starting: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
