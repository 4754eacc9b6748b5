"""Settings: the only reader of environment variables (prefix ``TOOLGATE_``, DESIGN §9).

``load_settings()`` reads the environment once and reports every invalid setting together
(``SettingsError`` lists them all). Names carry their units (``_ms``, ``_s``, ``_bytes``);
secrets are ``SecretStr``. Development conveniences (the built-in HS256 development secret)
are loud when on and refused when ``TOOLGATE_ENV=production``.

The settings are grouped in sections, one per adapter; ``Settings`` is all of them. An adapter
takes the section it reads (``TokenVerifier(settings: JwtSettings)``), so its type says which
settings it depends on, while the environment names stay flat (``TOOLGATE_JWT_ISSUER`` is
``JwtSettings.jwt_issuer``). ``SECTIONS`` lists the sections in the order the settings
reference (docs/settings.md) shows them; every field's ``description`` is its documentation.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.jwa import SUPPORTED_ALGORITHMS

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
DEV_AUDIT_KEY_HASH_SECRET = "toolgate-development-audit-key-hash-secret"
#: Seed of the development checkpoint key (``app.receipts.keys.development_key``): signs
#: decision-log checkpoints when ``TOOLGATE_CHECKPOINT_KEY_FILES`` is unset in development, so
#: that ``toolgate audit verify`` works out of the box. Publicly known; never used in production.
DEV_CHECKPOINT_KEY_LABEL = b"toolgate-development-checkpoint-key-not-for-production-use"

CsvList = Annotated[list[str], NoDecode]


class SettingsError(ValueError):
    """Raised by ``load_settings`` with every problem found, one per line."""


def _split_csv(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


_APPROVAL_KID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_CLAIM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$")
#: Claims every token must carry (RFC 7519 §4.1); operators may require more.
BASE_REQUIRED_CLAIMS = ("exp", "iss", "aud", "sub")


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
        problems.append("no kid:secret pair")
    if problems:
        raise ValueError("; ".join(problems))
    return keys


class _Section(BaseModel):
    """Base of every section: frozen, like ``Settings``."""

    model_config = ConfigDict(frozen=True)


class DeploymentSettings(_Section):
    """What kind of deployment this is."""

    env: Literal["development", "production"] = Field(
        "development",
        description="`production` refuses the development conveniences (the development HS256 secret, "
        "issuer, audience, audit key-hash secret and approval key).",
    )


class EngineSettings(_Section):
    """The policy engine (DESIGN §1, §3): which one, what it loads and what it is asked."""

    engine: Literal["embedded", "opa"] = Field(
        "embedded", description="`embedded` (OPA in-process) or `opa` (an OPA sidecar over its REST Data API)."
    )
    policy_dir: Path = Field(PROJECT_ROOT / "policies", description="The Rego policies and data.json files (a bundle directory).")
    decision_path: str = Field(
        "toolgate/decision",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*$",
        description="The decision document the gateway queries (`data.toolgate.decision`).",
    )
    engine_go_gc_percent: int = Field(
        200, ge=10, le=10_000, description="`GOGC` of the embedded engine's Go runtime in each worker (docs/performance.md)."
    )
    engine_go_max_procs: int = Field(
        0, ge=0, le=256, description="`GOMAXPROCS` of the embedded engine's Go runtime; 0 keeps Go's default (one per core)."
    )


class EnginePoolSettings(_Section):
    """The embedded engine's OPA engines in each worker."""

    engine_pool_size: int = Field(
        2,
        ge=1,
        le=256,
        description="OPA engines per worker, lent to request threads one evaluation at a time (each holds the "
        "compiled policies, about 13 MiB with the shipped ones; a thread waits while all are busy).",
    )


class OpaSidecarSettings(_Section):
    """The OPA sidecar client (``TOOLGATE_ENGINE=opa``): timeouts, retries inside one deadline."""

    opa_url: str = Field("http://127.0.0.1:8181", description="Base URL of the OPA sidecar.")
    opa_connect_timeout_ms: int = Field(50, gt=0, le=60_000, description="Connect timeout of one attempt.")
    opa_read_timeout_ms: int = Field(250, gt=0, le=60_000, description="Read timeout of one attempt.")
    opa_max_attempts: int = Field(3, ge=1, le=10, description="Attempts per decision, retries included.")
    opa_deadline_ms: int = Field(2000, gt=0, le=120_000, description="Total time one decision may take, every attempt included.")
    opa_backoff_base_ms: int = Field(50, ge=0, le=10_000, description="Base of the full-jitter exponential backoff between attempts.")
    opa_backoff_cap_ms: int = Field(1000, ge=0, le=60_000, description="Cap of the backoff between attempts.")
    opa_retry_budget_ratio: float = Field(
        0.2, ge=0, le=1, description="Retries are at most this share of first attempts (plus the floor)."
    )
    opa_retry_budget_floor: int = Field(10, ge=0, le=10_000, description="Retries always allowed on top of the ratio.")


class ContractSettings(_Section):
    """The tool contract registry (DESIGN §2 step 4)."""

    contracts_dir: Path = Field(PROJECT_ROOT / "contracts", description="Tool contract files (`*.yaml`, `*.yml`, `*.json`), recursively.")
    dynamic_tool_max_input_bytes: int = Field(
        16_384, gt=0, description="Input size limit of an unregistered (dynamic) tool, in bytes of compact JSON (422 above)."
    )


class RequestLimits(_Section):
    """Limits checked on every request before any expensive work."""

    max_body_bytes: int = Field(65_536, gt=0, le=16 * 1024 * 1024, description="Request body limit (413 above).")
    max_authorization_bytes: int = Field(
        8192, gt=0, le=65_536, description="`Authorization` header limit, checked before any token work (401 above)."
    )
    max_input_depth: int = Field(32, gt=0, le=512, description="Deepest nesting of a decide call's `input` (422 above).")
    authzen_max_evaluations: int = Field(
        64, gt=0, le=10_000, description="Evaluations one `POST /access/v1/evaluations` may carry (413 above)."
    )
    request_deadline_ms: int = Field(
        10_000,
        gt=0,
        le=600_000,
        description="Work one request may do: an endpoint that loops (an AuthZEN batch) stops at it and answers 503, "
        "instead of working on after the caller and the proxy have given up.",
    )


class RedisSettings(_Section):
    """The Redis connection (idempotency, approvals, sessions)."""

    redis_url: str = Field("redis://127.0.0.1:6379/0", description="A standalone Redis, or any node of a Redis Cluster.")
    redis_cluster: bool = Field(False, description="`true`: `TOOLGATE_REDIS_URL` names a node of a Redis Cluster.")
    redis_socket_timeout_ms: int = Field(
        500,
        gt=0,
        le=60_000,
        description="Connect and read/write timeout of every Redis command, and the wait for a pooled connection "
        "(sized from `python -m bench.redis_timeouts`: docs/operators.md#redis).",
    )


class IdempotencySettings(_Section):
    """Idempotency reservations (DESIGN §4)."""

    idempotency_lease_s: int = Field(
        60, gt=0, le=86_400, description="Default lease of a reservation (a contract may set its own `lease_s`)."
    )
    idempotency_retention_s: int = Field(
        86_400, gt=0, le=30 * 86_400, description="How long a settled record (result or failure) is replayed."
    )


_RATE = re.compile(r"^([1-9][0-9]{0,6})/([1-9][0-9]{0,4})s$")


def parse_rate(text: str) -> tuple[int, int]:
    """``<count>/<seconds>s`` (e.g. ``100/60s``) as ``(count, seconds)``: count 1-1,000,000,
    seconds 1-86,400. Raises ``ValueError``."""
    match = _RATE.fullmatch(text.strip())
    if not match or not (int(match[1]) <= 1_000_000 and int(match[2]) <= 86_400):
        raise ValueError("must be <count>/<seconds>s, e.g. 100/60s (count 1-1000000, seconds 1-86400)")
    return int(match[1]), int(match[2])


class SessionSettings(_Section):
    """The session: what the policy reads as input.session, its limits and rate limits (docs/session.md)."""

    session_windows_s: CsvList = Field(
        ["60", "3600", "86400"],
        description="The windows of `input.session` counts and sums, in seconds (comma-separated); "
        "the longest is also how long session events are kept.",
    )
    session_max_events: int = Field(
        200, ge=10, le=10_000,
        description="Session events kept and read per subject, the newest (a decide call whose policy reads the "
        "session reads them all); "
        "`input.session.truncated` says when the window held more. Exact counts beyond it: `limits`.",
    )
    session_recent_calls: int = Field(
        20, ge=0, le=200, description="Recent calls shown in `input.session.recent`, with their non-sensitive arguments."
    )
    session_max_args_bytes: int = Field(
        1024, ge=0, le=65_536,
        description="A recent call's redacted arguments are kept up to this many bytes of compact JSON (larger: `args` null).",
    )
    provenance_secret: SecretStr | None = Field(
        None,
        description="Derives each tenant's key of the provenance digests (HMAC-SHA256; docs/session.md \"Provenance\"); "
        "unset: a key derived from the audit key-hash secret.",
    )
    provenance_max_values: int = Field(
        2000, ge=10, le=100_000,
        description="Values of reported results remembered per conversation for `input.provenance`, the newest.",
    )
    provenance_retention_s: int = Field(
        86_400, ge=60, le=7 * 86_400,
        description="How long a value of a reported result is remembered for `input.provenance`, in seconds.",
    )
    rate_limit_per_subject: str | None = Field(
        None,
        description="`<count>/<seconds>s`: every subject's decide calls and AuthZEN evaluations are limited to this "
        "rate (a dry run is checked, not counted), besides the policy's `rate_limits`; unset: no default limit.",
    )

    @field_validator("session_windows_s", mode="before")
    @classmethod
    def _windows_csv(cls, value: object) -> object:
        return _split_csv(value)

    @field_validator("session_windows_s")
    @classmethod
    def _windows(cls, value: list[str]) -> list[str]:
        if not value or len(value) > 8 or not all(v.isdigit() and 0 < int(v) <= 7 * 86_400 for v in value):
            raise ValueError("must be 1-8 whole numbers of seconds, each 1-604800")
        return sorted(set(value), key=int)

    @field_validator("rate_limit_per_subject")
    @classmethod
    def _rate(cls, value: str | None) -> str | None:
        if value is not None:
            parse_rate(value)
        return value

    @property
    def session_retention_s(self) -> int:
        """How long session events are kept: the longest window."""
        return max(int(v) for v in self.session_windows_s)


class AuditSettings(_Section):
    """The decision log (DESIGN §6)."""

    audit_dsn: str = Field(
        str(PROJECT_ROOT / "var" / "decisions.sqlite"), description="A SQLite file path, or a `postgresql://` URL."
    )
    audit_key_hash_secret: SecretStr = Field(
        SecretStr(DEV_AUDIT_KEY_HASH_SECRET),
        description="HMAC key of the stored idempotency-key hashes (required in production).",
    )
    audit_checkpoint_secret: SecretStr | None = Field(
        None,
        description="Signs the checkpoint `toolgate audit purge` leaves, so `verify` trusts what was purged; "
        "unset: a key derived from the audit key-hash secret.",
    )
    audit_timeout_ms: int = Field(
        5000, gt=0, le=60_000, description="Bounds lock waits (the SQLite busy timeout), connects, pool waits and statements."
    )
    audit_pool_max_size: int = Field(8, ge=1, le=256, description="PostgreSQL connections per worker.")
    audit_sqlite_synchronous: Literal["NORMAL", "FULL", "EXTRA"] = Field(
        "FULL", description="SQLite `synchronous`: `FULL` survives a power loss, `NORMAL` a process crash only."
    )
    audit_auditor_roles: CsvList = Field(
        ["auditor"], description="Roles that may query the decision log of their own tenant (comma-separated)."
    )
    audit_platform_auditor_roles: CsvList = Field(
        ["platform_auditor"],
        description="Roles that may query the decision log of every tenant (comma-separated); honoured only in "
        "tokens of `TOOLGATE_AUDIT_PLATFORM_TENANT`.",
    )
    audit_platform_tenant: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="The tenant whose tokens may hold the platform auditor roles (the operator's own tenant); "
        "unset: no token reads another tenant's log.",
    )

    @field_validator("audit_auditor_roles", "audit_platform_auditor_roles", mode="before")
    @classmethod
    def _audit_roles_csv(cls, value: object) -> object:
        return _split_csv(value)


class CheckpointSettings(DeploymentSettings, AuditSettings):
    """Signed checkpoints of the decision log (docs/design.md §11): what vouches for the chains
    from outside the database."""

    checkpoint_key_files: CsvList = Field(
        [],
        description="Ed25519 keys (PEM files, comma-separated) of the decision-log checkpoints: the first, a private "
        "key (PKCS#8), signs; every one verifies (retired keys may be public keys only). Keep them where the "
        "database's users cannot read them. Unset: the built-in development key in development; no checkpoints "
        "in production.",
    )
    checkpoint_file: Path | None = Field(
        None,
        description="The append-only JSON Lines file the gateway writes signed checkpoints to (fsync'd). Put it "
        "outside the database's reach (another volume, `chattr +a`, a WORM mount). Unset: beside a SQLite log "
        "(`decisions.sqlite` -> `decisions.checkpoints.jsonl`), `var/checkpoints.jsonl` for PostgreSQL.",
    )
    checkpoint_redis_stream: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="Also add every signed checkpoint to this Redis stream (`XADD`), e.g. `toolgate:audit:checkpoints`.",
    )
    checkpoint_interval_s: int = Field(
        60,
        ge=1,
        le=86_400,
        description="How often each worker signs the newest record it appended to each chain (a new chain is "
        "registered at once, with its first record).",
    )

    @field_validator("checkpoint_key_files", mode="before")
    @classmethod
    def _checkpoint_files_csv(cls, value: object) -> object:
        return _split_csv(value)

    @property
    def uses_dev_checkpoint_key(self) -> bool:
        """True when the built-in development key signs the checkpoints (development, no key files)."""
        return self.env == "development" and not self.checkpoint_key_files

    @property
    def checkpoint_path(self) -> Path:
        """The checkpoint file in force (``checkpoint_file`` or its default, see its description)."""
        if self.checkpoint_file is not None:
            return self.checkpoint_file
        if self.audit_dsn.startswith(("postgresql://", "postgres://")):
            return PROJECT_ROOT / "var" / "checkpoints.jsonl"
        log = Path(self.audit_dsn)
        return log.with_name(f"{log.stem}.checkpoints.jsonl")


class ReceiptSettings(DeploymentSettings):
    """Signed decision receipts (docs/design.md §11)."""

    receipt_key_files: CsvList = Field(
        [],
        description="Ed25519 keys (PEM files, comma-separated) of decision receipts: the first, a private key "
        "(PKCS#8), signs the receipt of every decide response; every one is published at "
        "`/.well-known/toolgate-keys` (retired keys may be public keys only). Unset: decide responses carry "
        "no receipt (in development and production alike).",
    )

    @field_validator("receipt_key_files", mode="before")
    @classmethod
    def _receipt_files_csv(cls, value: object) -> object:
        return _split_csv(value)


class JwtSettings(DeploymentSettings, RequestLimits):
    """Bearer JWT verification (DESIGN §2 step 2): algorithms, issuer, audience, keys, caches."""

    jwt_algorithms: CsvList = Field(
        ["RS256", "ES256", "EdDSA", "HS256"],
        description=f"Algorithm allow-list (comma-separated); supported: {', '.join(sorted(SUPPORTED_ALGORITHMS))}.",
    )
    jwt_issuer: str = Field(DEV_ISSUER, description="The exact `iss` required.")
    jwt_audience: str = Field(DEV_AUDIENCE, description="An `aud` the token must contain.")
    jwt_jwks_url: str | None = Field(None, description="Where the identity provider publishes its keys (JWKS).")
    jwt_public_key: SecretStr | None = Field(None, description="A PEM public key or certificate (instead of a JWKS).")
    jwt_hs256_secret: SecretStr | None = Field(None, description="An HS256 secret of at least 32 bytes.")
    jwt_leeway_s: int = Field(30, ge=0, le=600, description="Clock skew allowed on `exp`, `nbf` and `iat`.")
    jwt_required_claims: CsvList = Field(
        list(BASE_REQUIRED_CLAIMS),
        description="Claims every token must carry (comma-separated); always at least "
        f"{', '.join(BASE_REQUIRED_CLAIMS)}, e.g. add `iat`, `nbf` or `jti`.",
    )
    jwt_max_lifetime_s: int = Field(
        86_400,
        gt=0,
        le=366 * 86_400,
        description="The longest a token may live: `exp` at most this far in the future, and `exp - iat` at most this.",
    )
    jwt_tenant_claim: str = Field("tenant", description="The claim holding the tenant.")
    jwt_roles_claim: str = Field("roles", description="The claim holding the roles: a list, or a space-separated string.")
    jwt_jwks_cache_s: int = Field(300, gt=0, le=86_400, description="How long a fetched key set is used.")
    jwt_jwks_refetch_cooldown_s: int = Field(
        10, ge=0, le=3600, description="An unknown `kid` refetches the key set at most once per this many seconds."
    )
    jwt_jwks_timeout_ms: int = Field(2000, gt=0, le=30_000, description="Timeout of a key set fetch.")
    jwt_jwks_grace_s: int = Field(
        3600, ge=0, le=7 * 86_400, description="How long the last good key set serves past its lifespan while the JWKS endpoint fails."
    )
    jwt_verified_cache_bytes: int = Field(
        8 * 1024 * 1024,
        ge=0,
        le=1024 * 1024 * 1024,
        description="Verified tokens remembered per worker, at most this many (estimated) bytes; 0 turns it off.",
    )
    jwt_verified_cache_s: int = Field(
        60,
        ge=0,
        le=3600,
        description="How long a verified token is remembered (never past its `exp`, nor past the key set that verified it).",
    )

    @field_validator("jwt_algorithms", "jwt_required_claims", mode="before")
    @classmethod
    def _jwt_csv(cls, value: object) -> object:
        return _split_csv(value)

    @field_validator("jwt_required_claims")
    @classmethod
    def _base_claims_required(cls, value: list[str]) -> list[str]:
        missing = [name for name in BASE_REQUIRED_CLAIMS if name not in value]
        if missing:
            raise ValueError(f"must include {', '.join(BASE_REQUIRED_CLAIMS)} (missing {', '.join(missing)})")
        bad = [name for name in value if not _CLAIM_NAME.match(name)]
        if bad:
            raise ValueError(f"claim names must match {_CLAIM_NAME.pattern}")
        return list(dict.fromkeys(value))

    @field_validator("jwt_algorithms")
    @classmethod
    def _known_algorithms(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - SUPPORTED_ALGORITHMS)
        if unknown:
            raise ValueError(f"unsupported algorithms {unknown}; allowed: {sorted(SUPPORTED_ALGORITHMS)}")
        if not value:
            raise ValueError("at least one algorithm is required")
        return value

    @property
    def uses_dev_secret(self) -> bool:
        """True when no key material is configured and the development HS256 secret is used."""
        return self.env == "development" and not (
            self.jwt_hs256_secret or self.jwt_jwks_url or self.jwt_public_key
        )

    @property
    def hs256_secret(self) -> str | None:
        """The HS256 secret in force: the configured one, else the development one in development."""
        if self.jwt_hs256_secret is not None:
            return self.jwt_hs256_secret.get_secret_value()
        if self.uses_dev_secret:
            return DEV_HS256_SECRET
        return None


class ApprovalSettings(DeploymentSettings):
    """Approvals and grants (DESIGN §5)."""

    approval_keys: SecretStr | None = Field(
        None, description="`kid:secret,...` grant signing keys (secrets of at least 32 bytes; the first signs, all verify)."
    )
    approval_default_ttl_s: int = Field(
        900, gt=0, le=7 * 86_400, description="Lifetime of a pending approval and of its grant, unless the policy sets `ttl_s`."
    )
    approval_default_approver_roles: CsvList = Field(
        ["approver"], description="Who may answer an approval, unless the policy names `approver_roles`."
    )
    approval_max_pending_per_subject: int = Field(
        50, ge=0, le=100_000, description="Pending approvals one requester may hold at once (429 beyond); 0: no cap."
    )
    approval_max_pending_per_tenant: int = Field(
        500,
        ge=0,
        le=1_000_000,
        description="Unexpired pending approvals one tenant may hold at once (429 beyond), so that many requesters "
        "cannot bury the approvers' inbox; 0: no cap.",
    )
    approval_step_up_audience: str = Field(
        "toolgate-step-up",
        min_length=1,
        description="The `aud` of a step-up token: the separate credential with which a requester confirms her own "
        "call when the policy's approval allows self-approval (never her ordinary token).",
    )
    approval_step_up_max_age_s: int = Field(
        300, ge=10, le=3600, description="A step-up token's `iat` must be at most this old."
    )
    approval_max_wait_s: int = Field(
        30, ge=0, le=120, description="The longest `GET /v1/approvals/<id>?wait=` holds a request open."
    )
    approval_sweep_interval_s: float = Field(
        5.0, ge=0, le=3600, description="How often each worker expires and escalates due approvals; 0: never (tests)."
    )

    @field_validator("approval_default_approver_roles", mode="before")
    @classmethod
    def _approval_roles_csv(cls, value: object) -> object:
        return _split_csv(value)

    @property
    def approval_signing_keys(self) -> list[tuple[str, bytes]]:
        """Approval-grant keys ``[(kid, secret)]``, the signing key first: the configured ones,
        else the development key in development, else none (grants cannot be issued)."""
        if self.approval_keys is not None:
            return parse_approval_keys(self.approval_keys.get_secret_value())
        return [DEV_APPROVAL_KEY] if self.env == "development" else []


class WebhookSettings(_Section):
    """Signed webhooks on approval events (requested, answered, escalated, expired)."""

    webhook_url: str | None = Field(
        None, pattern=r"^https?://[^\s]+$", description="Where approval events are POSTed; unset: no webhooks."
    )
    webhook_keys: SecretStr | None = Field(
        None,
        description="`kid:secret,...` HMAC-SHA256 signing keys of the webhooks (secrets of at least 32 bytes; the first "
        "signs; the kid is in the signature header, so receivers rotate by kid). Required with `TOOLGATE_WEBHOOK_URL`.",
    )
    webhook_format: Literal["toolgate", "slack"] = Field(
        "toolgate", description="`toolgate` (the event as JSON) or `slack` (a Slack incoming-webhook message)."
    )
    webhook_timeout_ms: int = Field(2000, gt=0, le=60_000, description="Timeout of one delivery attempt.")
    webhook_max_attempts: int = Field(5, ge=1, le=20, description="Attempts per event before it is dead-lettered.")
    webhook_backoff_base_ms: int = Field(500, ge=1, le=60_000, description="First retry delay; doubled per attempt.")
    webhook_backoff_cap_ms: int = Field(60_000, ge=1, le=3_600_000, description="Longest retry delay.")
    webhook_queue_size: int = Field(1000, ge=1, le=100_000, description="Events waiting per worker (beyond: dead-lettered).")

    @property
    def webhook_signing_keys(self) -> list[tuple[str, bytes]]:
        """``[(kid, secret)]``, the signing key first (empty when unset)."""
        return parse_approval_keys(self.webhook_keys.get_secret_value()) if self.webhook_keys else []


class ConsoleSettings(_Section):
    """The web console at `/console` (approver inbox, auditor views)."""

    console_enabled: bool = Field(True, description="Serve the console at `/console`.")
    console_oidc_issuer: str | None = Field(
        None, pattern=r"^https?://[^\s]+$", description="OpenID Connect issuer of the console sign-in (its discovery document)."
    )
    console_oidc_client_id: str | None = Field(None, description="The console's OpenID Connect client id.")
    console_oidc_client_secret: SecretStr | None = Field(None, description="The console's OpenID Connect client secret.")
    console_oidc_scopes: str = Field("openid profile", description="Scopes asked for at sign-in.")
    console_public_url: str | None = Field(
        None, pattern=r"^https?://[^\s]+$", description="The console's external base URL (the redirect URI is built from it)."
    )
    console_session_ttl_s: int = Field(3600, ge=60, le=86_400, description="A console session lasts at most this long.")
    console_secure_cookies: bool = Field(
        True, description="Session cookies carry `Secure` (only `false` for plain-HTTP development on loopback)."
    )
    console_dev_sign_in: bool = Field(
        False,
        description="Development sign-in: pick a subject, tenant and roles without an identity provider (refused in production).",
    )


class ServerSettings(_Section):
    """The HTTP server (gunicorn, gthread workers)."""

    bind: str = Field(
        "127.0.0.1:8081",
        description="HOST:PORT (or `unix:PATH`) gunicorn listens on, behind the proxy (`TOOLGATE_PROXY_LISTEN`).",
    )
    workers: int = Field(2, ge=1, le=64, description="gunicorn worker processes.")
    threads: int = Field(4, ge=1, le=256, description="Request threads per worker.")
    worker_connections: int = Field(
        1000,
        ge=2,
        le=100_000,
        description="Connections one worker holds at most; keep it well above `TOOLGATE_THREADS` "
        "(gunicorn closes kept-alive connections beyond the difference).",
    )
    reuse_port: bool = Field(
        True,
        description="One `SO_REUSEPORT` listener per worker, so the kernel spreads connections over the workers "
        "(TCP binds only); the gateway refuses to start on an address already in use.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO", description="JSON log lines on stderr, one per request."
    )


class ProxySettings(_Section):
    """The reverse proxy (nginx) in front of gunicorn: it reads requests whole, with timeouts."""

    proxy_listen: str = Field(
        "127.0.0.1:8080",
        pattern=r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}$",
        description="HOST:PORT the proxy listens on: the gateway's public address.",
    )
    proxy_workers: int = Field(1, ge=1, le=64, description="nginx worker processes (each serves thousands of connections).")
    proxy_max_connections: int = Field(
        4096, ge=64, le=1_000_000, description="Connections one nginx worker holds at most (clients and upstream)."
    )
    proxy_client_timeout_s: int = Field(
        10, ge=1, le=600, description="How long the proxy waits for each read of a client's headers or body, and each write."
    )
    proxy_keepalive_timeout_s: int = Field(30, ge=0, le=3600, description="How long an idle client connection stays open.")


class ObservabilitySettings(_Section):
    """Metrics and traces."""

    metrics_token: SecretStr | None = Field(
        None, description="`GET /metrics` answers only `Authorization: Bearer <token>` (at least 16 bytes); unset: off (404)."
    )
    otel_traces_endpoint: str | None = Field(
        None,
        pattern=r"^https?://[^\s]+$",
        description="OTLP/HTTP traces endpoint (e.g. `http://otel-collector:4318/v1/traces`); set, it turns on span export "
        "(needs the `otel` extra).",
    )
    otel_service_name: str = Field("toolgate", min_length=1, max_length=128, description="`service.name` of the spans.")


class McpUpstream(BaseModel):
    """One upstream MCP server of ``toolgate mcp``: a command run over stdio, or a Streamable
    HTTP URL (with extra request headers, kept secret). ``tool_prefix`` is put before the names
    of its tools (to keep the tools of several upstreams apart)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    command: list[str] | None = Field(default=None, min_length=1)
    env: dict[str, str] | None = None
    cwd: str | None = None
    url: str | None = Field(default=None, pattern=r"^https?://[^\s]+$")
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    tool_prefix: str = Field(default="", pattern=r"^([A-Za-z][A-Za-z0-9_.-]{0,31})?$")

    @model_validator(mode="after")
    def _one_transport(self) -> McpUpstream:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"upstream {self.name}: give exactly one of command and url")
        if self.command is None and (self.env or self.cwd):
            raise ValueError(f"upstream {self.name}: env and cwd apply to a command only")
        if self.url is None and self.headers:
            raise ValueError(f"upstream {self.name}: headers apply to a url only")
        return self


class InterfaceSettings(_Section):
    """The standard interfaces: capabilities, AuthZEN 1.0 and the MCP gateway (`toolgate mcp`, docs/mcp.md)."""

    capability_path: str = Field(
        "toolgate/capability",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*$",
        description="The capability document asked whether a caller may use a tool at all "
        "(`data.toolgate.capability`, docs/design.md §3); undefined or malformed: the tool is not listed.",
    )
    authzen_pdp_url: str | None = Field(
        None,
        pattern=r"^https?://[^\s?#]+$",
        description="The `policy_decision_point` identifier published at `/.well-known/authzen-configuration` "
        "(no query or fragment); required in production; unset in development: the base URL of the metadata request.",
    )
    authzen_allowed_hosts: CsvList = Field(
        ["localhost", "127.0.0.1"],
        description="Without `TOOLGATE_AUTHZEN_PDP_URL`: the `Host` header names (port ignored; `.example.com` matches "
        "its subdomains) whose base URL the AuthZEN metadata may name; a metadata request with another `Host` is "
        "refused (400), so that a forged `Host` cannot make the gateway advertise foreign endpoints.",
    )
    authzen_pep_role: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_.:-]{1,64}$",
        description="The role of a PEP's credential (an API gateway, the interop's Todo backend): a token with it may "
        "ask AuthZEN evaluations about any subject of its own tenant, the subject then taken from the body and "
        "recorded as asserted by that PEP (`subject.asserted_by` in the policy input); unset: every caller may ask "
        "about itself only.",
    )
    authzen_decision_context: bool = Field(
        True,
        description="Whether AuthZEN decisions carry `context` (decision id, toolgate decision, reasons); a request's "
        "`options.include_context` overrides it. `false` answers `{\"decision\": bool}` alone, as PEPs that compare "
        "answers exactly expect.",
    )
    mcp_bind: str = Field("127.0.0.1:8090", description="HOST:PORT the MCP gateway serves Streamable HTTP on.")
    mcp_path: str = Field("/mcp", pattern=r"^/[A-Za-z0-9._~/-]*$", description="The MCP endpoint's path.")
    mcp_upstreams: list[McpUpstream] = Field(
        default_factory=list,
        description="The upstream MCP servers, a JSON list: `{\"name\", \"command\": [argv...], \"env\"?, \"cwd\"?}` "
        "(stdio) or `{\"name\", \"url\", \"headers\"?}` (Streamable HTTP), each with an optional `\"tool_prefix\"`; "
        "`toolgate mcp --upstream` adds more.",
    )
    mcp_call_timeout_ms: int = Field(
        30_000, gt=0, le=3_600_000, description="How long a forwarded `tools/call` may take upstream before it fails."
    )
    mcp_connect_timeout_ms: int = Field(
        10_000, gt=0, le=600_000, description="How long connecting to (and listing the tools of) an upstream may take."
    )
    mcp_tool_versions: CsvList = Field(
        [], description="`tool:version` pairs: the contract version a tool of the upstreams is decided under (default `1`)."
    )
    mcp_stdio_token: SecretStr | None = Field(
        None,
        description="The JWT that identifies the client of `toolgate mcp --transport stdio` "
        "(verified like a bearer token, on every call).",
    )
    mcp_authorization_servers: CsvList = Field(
        [],
        description="Issuer URLs of the OAuth authorization servers that issue `toolgate mcp`'s bearer tokens, "
        "published in its protected-resource metadata (RFC 9728, `/.well-known/oauth-protected-resource`) and "
        "named by `resource_metadata` in its 401 challenge; unset: no metadata is published.",
    )
    mcp_scopes: CsvList = Field(
        [], description="The OAuth scopes the protected-resource metadata lists as `scopes_supported`."
    )
    mcp_resource_url: str | None = Field(
        None,
        pattern=r"^https?://[^\s?#]+$",
        description="The `resource` identifier of the protected-resource metadata (the MCP endpoint's public URL); "
        "unset: the request's base URL and `TOOLGATE_MCP_PATH`.",
    )

    @field_validator("mcp_tool_versions", "mcp_authorization_servers", "mcp_scopes", "authzen_allowed_hosts", mode="before")
    @classmethod
    def _tool_versions_csv(cls, value: object) -> object:
        return _split_csv(value)


#: The sections in reference order.
# --- Policy bundles, signing and reload ---
class PolicyBundleSettings(_Section):
    """Policy bundles, signing and reload.

    Where the embedded engine reads bundles and how often it polls them, the key that verifies
    them (app/policy/signing.py), who may read GET /v1/policy/status, the sidecar's bundle name.
    """

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
    policy_operator_roles: CsvList = Field(
        ["operator"],
        description="Roles that may read GET /v1/policy/status and read and push tenant data "
        "(/v1/policy/tenants/<tenant>/data; comma-separated).",
    )
    opa_bundle_name: str = Field(
        "toolgate", pattern=r"^[A-Za-z0-9_.-]{1,64}$",
        description="Name of the policy bundle in the OPA sidecar's configuration (its status is read by name).",
    )

    @field_validator("policy_operator_roles", mode="before")
    @classmethod
    def _operator_roles_csv(cls, value: object) -> object:
        return _split_csv(value)


# --- Tenant data pushed by operators ---
class TenantDataSettings(_Section):
    """Tenant data pushed by operators.

    Where PUT /v1/policy/tenants/<tenant>/data stores each tenant's data (laid over the policy
    directory at tenants/<tenant>/data.json, app/policy/tenant_data.py) and how large it may be.
    """

    tenant_data_dir: Path | None = Field(
        None,
        description="Directory of pushed tenant data (<tenant>/data.json), read with the policy "
        "directory by every worker and by `toolgate policy serve-bundle`; unset, pushes are refused.",
    )
    tenant_data_max_bytes: int = Field(
        65_536, gt=0, le=8 * 1024 * 1024, description="Largest tenant data document accepted by a push, in bytes."
    )
    tenant_data_push_rate: str = Field(
        "10/60s",
        description="`<count>/<seconds>s`: pushes of one tenant's data (429 beyond, recorded), so that one tenant's "
        "pushes cannot keep every worker recompiling the policy.",
    )

    @field_validator("tenant_data_push_rate")
    @classmethod
    def _push_rate(cls, value: str) -> str:
        parse_rate(value)
        return value


class RolloutSettings(_Section):
    """Safe rollout: shadow policies and what a decision record keeps to evaluate its call again.

    A candidate policy is evaluated beside the active one (shadow); a decide record keeps the
    policy input so that its call can be evaluated again (docs/rollout.md)."""

    shadow_policy_dir: Path | None = Field(
        None,
        description="A candidate policy directory evaluated beside the active policy on every decide call "
        "(shadow: recorded and counted, never acted upon). Unset: no candidate.",
    )
    shadow_policy_bundle: str | None = Field(
        None,
        description="A candidate bundle instead of TOOLGATE_SHADOW_POLICY_DIR: a tarball path or an http(s):// "
        "bundle URL (polled like TOOLGATE_POLICY_BUNDLE, verified with the same key).",
    )
    shadow_deadline_ms: int = Field(
        50, gt=0, le=10_000,
        description="The candidate's time for one call, from its start (with the active evaluation): a call waits "
        "for it at most until then after its own decision; later, the candidate is abandoned and recorded as a "
        "timeout.",
    )
    shadow_workers: int = Field(
        2, ge=1, le=64,
        description="Threads per gateway worker that evaluate the candidate; when all are busy (abandoned "
        "evaluations included) a call records the shadow as overloaded instead of waiting.",
    )
    audit_context_fields: CsvList = Field(
        ["conversation_id"],
        description="The members of a decide call's context kept in its decision record's policy input "
        "(comma-separated); the others (prompts, untrusted caller text) are redacted there, and a "
        "record with redacted members is one `policy diff` cannot judge.",
    )

    @field_validator("audit_context_fields", mode="before")
    @classmethod
    def _context_fields_csv(cls, value: object) -> object:
        return _split_csv(value)

    @model_validator(mode="after")
    def _one_candidate(self) -> RolloutSettings:
        if self.shadow_policy_dir is not None and self.shadow_policy_bundle is not None:
            raise ValueError("set only one of shadow_policy_dir and shadow_policy_bundle")
        return self


SECTIONS: tuple[type[BaseModel], ...] = (
    DeploymentSettings,
    ServerSettings,
    ProxySettings,
    RequestLimits,
    JwtSettings,
    EngineSettings,
    EnginePoolSettings,
    OpaSidecarSettings,
    PolicyBundleSettings,
    TenantDataSettings,
    ContractSettings,
    RedisSettings,
    IdempotencySettings,
    SessionSettings,
    ApprovalSettings,
    WebhookSettings,
    ConsoleSettings,
    AuditSettings,
    CheckpointSettings,
    ReceiptSettings,
    ObservabilitySettings,
    InterfaceSettings,
    RolloutSettings,
)


class Settings(
    JwtSettings,
    ApprovalSettings,
    WebhookSettings,
    ConsoleSettings,
    EngineSettings,
    EnginePoolSettings,
    OpaSidecarSettings,
    PolicyBundleSettings,
    TenantDataSettings,
    ContractSettings,
    RedisSettings,
    IdempotencySettings,
    SessionSettings,
    CheckpointSettings,
    ReceiptSettings,
    AuditSettings,
    ServerSettings,
    ProxySettings,
    ObservabilitySettings,
    InterfaceSettings,
    RolloutSettings,
    BaseSettings,
):
    """Frozen configuration of one gateway process: every section (docs/settings.md)."""

    model_config = SettingsConfigDict(env_prefix="TOOLGATE_", frozen=True, extra="ignore")

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        problems: list[str] = []
        secret = self.jwt_hs256_secret.get_secret_value() if self.jwt_hs256_secret else None
        if secret is not None and len(secret.encode()) < 32:
            problems.append("TOOLGATE_JWT_HS256_SECRET must be at least 32 bytes")
        if self.env == "production":
            if secret == DEV_HS256_SECRET:
                problems.append("TOOLGATE_JWT_HS256_SECRET is the development secret, refused when TOOLGATE_ENV=production")
            if self.jwt_issuer == DEV_ISSUER:
                problems.append(f"TOOLGATE_JWT_ISSUER is the development issuer {DEV_ISSUER!r}; set your identity "
                                "provider's issuer in production")
            if self.jwt_audience == DEV_AUDIENCE:
                problems.append(f"TOOLGATE_JWT_AUDIENCE is the development audience {DEV_AUDIENCE!r}; set an audience of "
                                "your own (e.g. toolgate-prod) in production")
            if self.audit_key_hash_secret.get_secret_value().startswith("toolgate-development"):
                problems.append("set TOOLGATE_AUDIT_KEY_HASH_SECRET in production")
            if not (self.jwt_jwks_url or self.jwt_public_key or secret):
                problems.append("production needs TOOLGATE_JWT_JWKS_URL, TOOLGATE_JWT_PUBLIC_KEY or TOOLGATE_JWT_HS256_SECRET")
            if self.authzen_pdp_url is None:
                problems.append("set TOOLGATE_AUTHZEN_PDP_URL in production (the AuthZEN metadata's address, never taken "
                                "from a request's Host header)")
        if self.metrics_token is not None and len(self.metrics_token.get_secret_value().encode()) < 16:
            problems.append("TOOLGATE_METRICS_TOKEN must be at least 16 bytes")
        if self.jwt_jwks_url and self.jwt_public_key:
            problems.append("set only one of TOOLGATE_JWT_JWKS_URL and TOOLGATE_JWT_PUBLIC_KEY")
        problems.extend(self._console_and_webhook_problems())
        if self.approval_keys is not None:
            try:
                approval_keys = parse_approval_keys(self.approval_keys.get_secret_value())
            except ValueError as exc:
                problems.append(f"TOOLGATE_APPROVAL_KEYS: {exc}")
            else:
                if self.env == "production" and DEV_APPROVAL_KEY[1] in (s for _, s in approval_keys):
                    problems.append("TOOLGATE_APPROVAL_KEYS holds the development approval key, refused when "
                                    "TOOLGATE_ENV=production")
        if problems:
            raise ValueError("; ".join(problems))
        return self


    def _console_and_webhook_problems(self) -> list[str]:
        problems: list[str] = []
        if self.webhook_url and not self.webhook_keys:
            problems.append("TOOLGATE_WEBHOOK_URL needs TOOLGATE_WEBHOOK_KEYS")
        if self.webhook_keys is not None:
            try:
                parse_approval_keys(self.webhook_keys.get_secret_value())
            except ValueError as exc:
                problems.append("TOOLGATE_WEBHOOK_KEYS: " + str(exc).replace("approval key", "webhook key"))
        oidc = (self.console_oidc_issuer, self.console_oidc_client_id, self.console_public_url)
        if any(oidc) and not all(oidc):
            problems.append("the console's OpenID Connect sign-in needs TOOLGATE_CONSOLE_OIDC_ISSUER, _CLIENT_ID and "
                            "TOOLGATE_CONSOLE_PUBLIC_URL")
        if self.env == "production":
            if self.console_dev_sign_in:
                problems.append("the console's development sign-in is refused when TOOLGATE_ENV=production")
            if not self.console_secure_cookies:
                problems.append("console session cookies must be Secure when TOOLGATE_ENV=production")
        return problems


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """The ``TOOLGATE_*`` names in ``environ`` that are no setting, each with the setting it
    probably meant when one is close (a mistyped name is otherwise silently ignored)."""
    prefix = str(Settings.model_config.get("env_prefix", ""))
    known = [prefix + name.upper() for name in Settings.model_fields]
    found = []
    for name in sorted(n for n in environ if n.upper().startswith(prefix) and n.upper() not in known):
        close = difflib.get_close_matches(name.upper(), known, n=1, cutoff=0.8)
        found.append(f"{name} (did you mean {close[0]}?)" if close else name)
    return found


def load_settings(**overrides: object) -> Settings:
    """Read the environment (plus ``overrides``) into a frozen ``Settings``.

    Raises ``SettingsError`` naming every invalid setting at once. Logs a warning when a
    development convenience is on, and for every ``TOOLGATE_*`` variable that is no setting.
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
    for name in unknown_variables(os.environ):
        log.warning("unknown setting %s is ignored", name, extra={"event": "unknown_setting"})
    if settings.uses_dev_secret:
        log.warning(
            "development mode: accepting HS256 tokens signed with the built-in development secret; "
            "never use this in production",
            extra={"event": "insecure_dev_secret"},
        )
    if "TOOLGATE_APPROVAL_SELF_APPROVE_ROLES" in os.environ:
        log.warning(
            "TOOLGATE_APPROVAL_SELF_APPROVE_ROLES was removed and is ignored: whether a requester may confirm her own "
            "call is the policy's decision (approval.allow_self_approval, with a step-up token)",
            extra={"event": "removed_setting"},
        )
    if settings.approval_keys is None:
        log.warning(
            "TOOLGATE_APPROVAL_KEYS is unset: "
            + ("approval grants are signed with the built-in development key" if settings.env == "development"
               else "approvals cannot be granted until it is set"),
            extra={"event": "approval_keys_unset"},
        )
    return settings
