"""Settings: the only reader of environment variables (prefix ``TOOLGATE_``, DESIGN §9).

``load_settings()`` reads the environment once and reports every invalid setting together
(``SettingsError`` lists them all). Names carry their units (``_ms``, ``_s``, ``_bytes``);
secrets are ``SecretStr``. Development conveniences (the built-in HS256 development secret)
are loud when on and refused when ``TOOLGATE_ENV=production``.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parent.parent

#: Well-known development secret: lets `toolgate token` mint tokens the local gateway accepts.
#: Refused in production.
DEV_HS256_SECRET = "toolgate-development-secret-not-for-production-use"
DEV_ISSUER = "https://toolgate.dev.local"
DEV_AUDIENCE = "toolgate"
#: Development approval-grant key (kid ``dev``), used only when ``TOOLGATE_APPROVAL_KEYS`` is unset
#: in development so that the approval flow works locally. Never used in production.
DEV_APPROVAL_KEY = ("dev", b"toolgate-development-approval-key-not-for-production-use")

ASYMMETRIC_ALGORITHMS = {"RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "EdDSA"}
SUPPORTED_ALGORITHMS = ASYMMETRIC_ALGORITHMS | {"HS256"}


class SettingsError(ValueError):
    """Raised by ``load_settings`` with every problem found, one per line."""


def _split_csv(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


_APPROVAL_KID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def parse_approval_keys(text: str) -> list[tuple[str, bytes]]:
    """Parse ``kid:secret,kid:secret`` into ``[(kid, secret bytes)]``; the first signs, all verify.

    A kid is 1-64 characters of ``[A-Za-z0-9_-]``; a secret (UTF-8) is at least 32 bytes and
    cannot contain a comma. Raises ``ValueError`` naming every problem, never a secret.
    """
    keys: list[tuple[str, bytes]] = []
    problems: list[str] = []
    for position, entry in enumerate((e.strip() for e in text.split(",") if e.strip()), start=1):
        kid, sep, secret = entry.partition(":")
        if not sep or not _APPROVAL_KID.match(kid):
            problems.append(f"approval key #{position} must be kid:secret with a kid of [A-Za-z0-9_-]{{1,64}}")
            continue
        if len(secret.encode()) < 32:
            problems.append(f"approval key {kid}: the secret must be at least 32 bytes")
        if any(kid == known for known, _ in keys):
            problems.append(f"approval key {kid} is listed twice")
        keys.append((kid, secret.encode()))
    if not keys and not problems:
        problems.append("approval_keys holds no kid:secret pair")
    if problems:
        raise ValueError("; ".join(problems))
    return keys


class Settings(BaseSettings):
    """Frozen configuration of one gateway process. See README "Settings" for each name."""

    model_config = SettingsConfigDict(env_prefix="TOOLGATE_", frozen=True, extra="ignore")

    env: Literal["development", "production"] = "development"

    # Policy engine
    engine: Literal["embedded", "opa"] = "embedded"
    #: Go runtime of the embedded engine, per worker: GOGC, and GOMAXPROCS (0: Go's default,
    #: one per core). See app/engine/embedded.py.
    engine_go_gc_percent: int = Field(200, ge=10, le=10_000)
    engine_go_max_procs: int = Field(0, ge=0, le=256)
    opa_url: str = "http://127.0.0.1:8181"
    decision_path: str = Field("toolgate/decision", pattern=r"^[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*$")
    opa_connect_timeout_ms: int = Field(50, gt=0, le=60_000)
    opa_read_timeout_ms: int = Field(250, gt=0, le=60_000)
    opa_max_attempts: int = Field(3, ge=1, le=10)
    opa_deadline_ms: int = Field(2000, gt=0, le=120_000)
    opa_backoff_base_ms: int = Field(50, ge=0, le=10_000)
    opa_backoff_cap_ms: int = Field(1000, ge=0, le=60_000)
    opa_retry_budget_ratio: float = Field(0.2, ge=0, le=1)
    opa_retry_budget_floor: int = Field(10, ge=0, le=10_000)
    policy_dir: Path = PROJECT_ROOT / "policies"
    contracts_dir: Path = PROJECT_ROOT / "contracts"
    dynamic_tool_max_input_bytes: int = Field(16_384, gt=0)

    # Request limits
    max_body_bytes: int = Field(65_536, gt=0, le=16 * 1024 * 1024)
    max_authorization_bytes: int = Field(8192, gt=0, le=65_536)
    max_input_depth: int = Field(32, gt=0, le=512)

    # Redis (idempotency, approvals)
    redis_url: str = "redis://127.0.0.1:6379/0"
    redis_cluster: bool = False
    redis_socket_timeout_ms: int = Field(100, gt=0, le=60_000)
    idempotency_lease_s: int = Field(60, gt=0, le=86_400)
    idempotency_retention_s: int = Field(86_400, gt=0, le=30 * 86_400)

    # Decision log
    audit_dsn: str = str(PROJECT_ROOT / "var" / "decisions.sqlite")
    audit_key_hash_secret: SecretStr = SecretStr("toolgate-development-audit-key-hash-secret")
    #: Signs the checkpoint `toolgate audit purge` leaves, so `verify` trusts what was purged.
    #: Unset: a key derived from audit_key_hash_secret (app.audit.checkpoint_key).
    audit_checkpoint_secret: SecretStr | None = None
    #: Bounds lock waits (SQLite busy timeout), connects, pool waits and statements.
    audit_timeout_ms: int = Field(5000, gt=0, le=60_000)
    audit_pool_max_size: int = Field(8, ge=1, le=256)
    audit_sqlite_synchronous: Literal["NORMAL", "FULL", "EXTRA"] = "FULL"
    #: Roles that may query the decision log of their own tenant / of every tenant.
    audit_auditor_roles: Annotated[list[str], NoDecode] = ["auditor"]
    audit_platform_auditor_roles: Annotated[list[str], NoDecode] = ["platform_auditor"]

    # Authentication (JWT)
    jwt_algorithms: Annotated[list[str], NoDecode] = ["RS256", "ES256", "EdDSA", "HS256"]
    jwt_issuer: str = DEV_ISSUER
    jwt_audience: str = DEV_AUDIENCE
    jwt_jwks_url: str | None = None
    jwt_public_key: SecretStr | None = None
    jwt_hs256_secret: SecretStr | None = None
    jwt_leeway_s: int = Field(30, ge=0, le=600)
    jwt_tenant_claim: str = "tenant"
    jwt_roles_claim: str = "roles"
    jwt_jwks_cache_s: int = Field(300, gt=0, le=86_400)
    jwt_jwks_refetch_cooldown_s: int = Field(10, ge=0, le=3600)
    jwt_jwks_timeout_ms: int = Field(2000, gt=0, le=30_000)
    jwt_jwks_grace_s: int = Field(3600, ge=0, le=7 * 86_400)
    #: Verified tokens remembered per worker: at most this many bytes (estimated; 0: off) and for
    #: how long, in s (app/token_cache.py); never past the token's exp nor the lifespan of the
    #: JWKS set that verified it.
    jwt_verified_cache_bytes: int = Field(8 * 1024 * 1024, ge=0, le=1024 * 1024 * 1024)
    jwt_verified_cache_s: int = Field(60, ge=0, le=3600)

    # Approvals
    approval_keys: SecretStr | None = None
    approval_default_ttl_s: int = Field(900, gt=0, le=7 * 86_400)
    approval_default_approver_roles: Annotated[list[str], NoDecode] = ["approver"]
    #: Roles whose holders may answer their own approvals (four-eyes is waived for them only).
    #: ``account_holder``: the banking tools ask the account holder to confirm her own calls.
    approval_self_approve_roles: Annotated[list[str], NoDecode] = ["account_holder"]

    # Server
    bind: str = "127.0.0.1:8080"
    workers: int = Field(2, ge=1, le=64)
    threads: int = Field(4, ge=1, le=256)
    #: Connections one gunicorn worker holds at most (gthread); it stops accepting at this count.
    #: Keep it well above ``threads``: gunicorn closes kept-alive connections beyond
    #: ``worker_connections - threads``, so a low cap turns keep-alive into reconnects.
    worker_connections: int = Field(1000, ge=2, le=100_000)
    #: One listening socket per worker with ``SO_REUSEPORT``: the kernel spreads new connections
    #: over the workers instead of the first worker to wake taking most of them (README
    #: "Performance"). Another process of the same user can then bind the same port too.
    reuse_port: bool = True
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    # Observability: GET /metrics answers only with "Authorization: Bearer <metrics_token>";
    # without a token the endpoint is off (404).
    metrics_token: SecretStr | None = None
    #: OTLP/HTTP traces endpoint (e.g. http://otel-collector:4318/v1/traces): set, it turns on
    #: span export (app/tracing.py, needs the ``otel`` extra); unset, no spans are made.
    otel_traces_endpoint: str | None = Field(None, pattern=r"^https?://[^\s]+$")
    otel_service_name: str = Field("toolgate", min_length=1, max_length=128)

    @field_validator(
        "jwt_algorithms", "approval_default_approver_roles", "approval_self_approve_roles",
        "audit_auditor_roles", "audit_platform_auditor_roles", mode="before",
    )
    @classmethod
    def _csv(cls, value: object) -> object:
        return _split_csv(value)

    @field_validator("jwt_algorithms")
    @classmethod
    def _known_algorithms(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - SUPPORTED_ALGORITHMS)
        if unknown:
            raise ValueError(f"unsupported algorithms {unknown}; allowed: {sorted(SUPPORTED_ALGORITHMS)}")
        if not value:
            raise ValueError("at least one algorithm is required")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        problems: list[str] = []
        secret = self.jwt_hs256_secret.get_secret_value() if self.jwt_hs256_secret else None
        if secret is not None and len(secret.encode()) < 32:
            problems.append("jwt_hs256_secret must be at least 32 bytes")
        if self.env == "production":
            if secret == DEV_HS256_SECRET:
                problems.append("the development HS256 secret is refused when TOOLGATE_ENV=production")
            if self.jwt_issuer == DEV_ISSUER or self.jwt_audience == DEV_AUDIENCE:
                problems.append("set TOOLGATE_JWT_ISSUER and TOOLGATE_JWT_AUDIENCE in production")
            if self.audit_key_hash_secret.get_secret_value().startswith("toolgate-development"):
                problems.append("set TOOLGATE_AUDIT_KEY_HASH_SECRET in production")
            if not (self.jwt_jwks_url or self.jwt_public_key or secret):
                problems.append("production needs TOOLGATE_JWT_JWKS_URL, TOOLGATE_JWT_PUBLIC_KEY or TOOLGATE_JWT_HS256_SECRET")
        if self.metrics_token is not None and len(self.metrics_token.get_secret_value().encode()) < 16:
            problems.append("metrics_token must be at least 16 bytes")
        if self.jwt_jwks_url and self.jwt_public_key:
            problems.append("set only one of jwt_jwks_url and jwt_public_key")
        if self.approval_keys is not None:
            try:
                approval_keys = parse_approval_keys(self.approval_keys.get_secret_value())
            except ValueError as exc:
                problems.append(str(exc))
            else:
                if self.env == "production" and DEV_APPROVAL_KEY[1] in (s for _, s in approval_keys):
                    problems.append("the development approval key is refused when TOOLGATE_ENV=production")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def uses_dev_secret(self) -> bool:
        """True when no key material is configured and the development HS256 secret is used."""
        return self.env == "development" and not (
            self.jwt_hs256_secret or self.jwt_jwks_url or self.jwt_public_key
        )

    @property
    def approval_signing_keys(self) -> list[tuple[str, bytes]]:
        """Approval-grant keys ``[(kid, secret)]``, the signing key first: the configured ones,
        else the development key in development, else none (grants cannot be issued)."""
        if self.approval_keys is not None:
            return parse_approval_keys(self.approval_keys.get_secret_value())
        return [DEV_APPROVAL_KEY] if self.env == "development" else []

    @property
    def hs256_secret(self) -> str | None:
        """The HS256 secret in force: the configured one, else the development one in development."""
        if self.jwt_hs256_secret is not None:
            return self.jwt_hs256_secret.get_secret_value()
        if self.uses_dev_secret:
            return DEV_HS256_SECRET
        return None

    # --- Policy bundles, signing and reload ---
    policy_bundle: str | None = Field(
        None,
        description="Where the embedded engine reads policies instead of TOOLGATE_POLICY_DIR: a bundle "
        "tarball path or an http(s):// bundle URL (polled with If-None-Match).",
    )
    policy_poll_interval_s: float = Field(
        0.0, ge=0, le=3600,
        description="Seconds between polls of the policy directory, bundle file or URL by each worker; "
        "0 loads once at start.",
    )
    policy_bundle_timeout_ms: int = Field(
        5000, gt=0, le=120_000, description="Connect and per-read timeout of one bundle URL fetch, in ms."
    )
    policy_verification_key: SecretStr | None = Field(
        None,
        description="Bundle verification key: PEM text or a PEM file path (an HS256 secret as text). Set, "
        "every bundle must carry a valid .signatures.json.",
    )
    policy_verification_key_id: str = Field(
        "default", min_length=1, max_length=128, description="Key id of the verification key (OPA's default)."
    )
    policy_verification_algorithm: Literal[
        "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "HS256"
    ] = Field("RS256", description="Signature algorithm the verification key accepts.")
    policy_verification_scope: str = Field("", max_length=256, description="Required signature scope ('' none).")
    policy_status_dir: Path | None = Field(
        None,
        description="Directory where each worker publishes its policy status for GET /v1/policy/status; "
        "gunicorn.conf.py makes a private one when unset.",
    )
    policy_operator_roles: Annotated[list[str], NoDecode] = Field(
        ["operator"], description="Roles that may read GET /v1/policy/status (comma-separated)."
    )
    opa_bundle_name: str = Field(
        "toolgate", pattern=r"^[A-Za-z0-9_.-]{1,64}$",
        description="Name of the policy bundle in the OPA sidecar's configuration (its status is read by name).",
    )

    @field_validator("policy_operator_roles", mode="before")
    @classmethod
    def _csv_operator_roles(cls, value: object) -> object:
        return _split_csv(value)


def load_settings(**overrides: object) -> Settings:
    """Read the environment (plus ``overrides``) into a frozen ``Settings``.

    Raises ``SettingsError`` naming every invalid setting at once. Logs a warning when a
    development convenience is on.
    """
    try:
        settings = Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "settings"
            name = f"TOOLGATE_{where.upper()}" if err["loc"] else where
            lines.append(f"{name}: {err['msg']}")
        raise SettingsError("invalid settings:\n  " + "\n  ".join(lines)) from None
    if settings.uses_dev_secret:
        log.warning(
            "development mode: accepting HS256 tokens signed with the built-in development secret; "
            "never use this in production",
            extra={"event": "insecure_dev_secret"},
        )
    if settings.approval_keys is None:
        log.warning(
            "TOOLGATE_APPROVAL_KEYS is unset: "
            + ("approval grants are signed with the built-in development key" if settings.env == "development"
               else "approvals cannot be granted until it is set"),
            extra={"event": "approval_keys_unset"},
        )
    return settings
