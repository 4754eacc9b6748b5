"""The start-up check of the gateway (``toolgate serve``, gunicorn.conf.py ``on_starting``):
with the embedded engine, the configured policies (directory, bundle file or URL) must load,
verify (when a verification key is set) and compile, else the gateway does not start: exit 1
with the error on stderr, before any worker forks. In production without a bundle verification
key it warns loudly. In production without ``TOOLGATE_APPROVAL_KEYS`` it does not start when
the policy can ask for user approval (``data.toolgate.catalog.approval_sources``), since no
approval could ever be granted; with the OPA sidecar, whose policy it cannot read, it warns.

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


APPROVAL_SOURCES = "toolgate.catalog.approval_sources"
SIDECAR_APPROVAL_WARNING = (
    "WARNING: TOOLGATE_ENV=production and TOOLGATE_APPROVAL_KEYS is unset: if the OPA sidecar's policy "
    "can ask for user approval, no approval can ever be granted"
)


class ApprovalKeysMissing(ValueError):
    """Production without approval keys, and a policy that can ask for user approval (or one
    that cannot say whether it can)."""


def check(settings: Settings) -> str:
    """Load, verify and compile the embedded engine's policies once; returns the revision
    (``"sidecar"`` for the OPA engine, whose policies OPA loads). Raises ``PolicyLoadError``,
    ``BundleSignatureError``, ``BundleUnavailable`` or ``ApprovalKeysMissing``."""
    if settings.engine != "embedded":
        return "sidecar"
    from app.engine import build_source, build_verifier
    from app.engine.embedded import check_bundle
    from app.engine.sources import BundleUnavailable

    bundle = build_source(settings).fetch()
    if bundle is None:  # pragma: no cover - a fresh source always returns its first bundle
        raise BundleUnavailable("the policy source returned nothing")
    needs_keys = settings.env == "production" and settings.approval_keys is None
    sources = check_bundle(bundle, build_verifier(settings), document=APPROVAL_SOURCES if needs_keys else None)
    if needs_keys:
        _refuse_approvals_without_keys(sources)
    return bundle.revision


def _refuse_approvals_without_keys(sources: object) -> None:
    """Raise ``ApprovalKeysMissing`` unless ``sources`` (the policy's approval sources) is an
    empty list: an undefined or malformed answer cannot prove that no approval is asked."""
    if sources == []:
        return
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise ApprovalKeysMissing(
            f"TOOLGATE_APPROVAL_KEYS is unset and TOOLGATE_ENV=production, and data.{APPROVAL_SOURCES} is "
            "undefined, so the policy may ask for user approval that could never be granted: set "
            "TOOLGATE_APPROVAL_KEYS (kid:secret,...)"
        )
    raise ApprovalKeysMissing(
        "TOOLGATE_APPROVAL_KEYS is unset and TOOLGATE_ENV=production, but the policy can ask for user approval ("
        + "; ".join(sources)
        + "), which could never be granted: set TOOLGATE_APPROVAL_KEYS (kid:secret,...)"
    )


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
    if settings.env == "production" and settings.approval_keys is None and settings.engine != "embedded":
        print(SIDECAR_APPROVAL_WARNING, file=sys.stderr)
    try:
        check(settings)
    except (PolicyLoadError, BundleSignatureError, BundleUnavailable) as exc:
        print(f"toolgate: the policies cannot be loaded, not starting: {exc}", file=sys.stderr)
        return 1
    except ApprovalKeysMissing as exc:
        print(f"toolgate: not starting: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
