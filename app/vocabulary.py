"""The shared words and name patterns of the API (DESIGN §2, §3, §6): one home for each.

Nothing here imports anything of the app; every layer may import it.
"""

from __future__ import annotations

from typing import Literal, get_args

#: A policy decision (DESIGN §3).
DecisionWord = Literal["allow", "deny", "user-approval"]
DECISIONS: tuple[str, ...] = get_args(DecisionWord)

#: The AI SDK's tool-approval status of a decision: ``approved`` for an allow after a verified
#: grant, ``not-applicable`` for any other allow.
AiSdkStatus = Literal["not-applicable", "approved", "denied", "user-approval"]
AI_SDK_STATUSES: tuple[str, ...] = get_args(AiSdkStatus)

#: What a decision record records (DESIGN §6): a decide call, a dry-run decide call (evaluated,
#: nothing reserved or created), an approver's answer, an execution report, an operator's
#: resolution of an idempotency record, a scoped grant's revocation, an operator's push of tenant
#: data.
EventType = Literal[
    "decide", "decide_dry_run", "approval_answer", "execution_complete", "execution_fail", "idempotency_resolve",
    "grant_revoke", "tenant_data_put",
]
EVENT_TYPES: tuple[str, ...] = get_args(EventType)

#: How a decide call's shadow policy compared with the active one (DESIGN §6): it decided the
#: same, decided otherwise, or gave no decision (an error); indexed as ``shadow_outcome``.
ShadowOutcomeWord = Literal["agrees", "disagrees", "error"]
SHADOW_OUTCOMES: tuple[str, ...] = get_args(ShadowOutcomeWord)

#: Tool names resolve by exact membership only (DESIGN §3).
TOOL_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_.-]{0,127}$"
VERSION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$"
#: A tool suite's namespace, so that two suites can each have ``send_email``; empty: the default.
NAMESPACE_PATTERN = r"^([a-z][a-z0-9_-]{0,63})?$"


def qualified_tool(namespace: str, name: str) -> str:
    """A tool's name across namespaces: ``namespace/name``, or ``name`` in the default
    namespace (``/`` is never in a tool name, so the two forms cannot collide)."""
    return f"{namespace}/{name}" if namespace else name
#: A policy rule id: ``family.rule`` (``toolgate.rule`` for the library's own), dotted Rego names.
RULE_ID_PATTERN = r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)+$"
#: The model's tool call id: printable ASCII without spaces, 1-128 characters.
CALL_ID_PATTERN = r"^[\x21-\x7e]{1,128}$"
#: ``X-Request-Id`` accepted from a client (DESIGN §2 step 1).
REQUEST_ID_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"
#: An approval id: ``ap_`` and 32 base64url characters (192 random bits).
APPROVAL_ID_PATTERN = r"^ap_[A-Za-z0-9_-]{32}$"
#: A decision id: a ULID (26 characters, Crockford base32).
DECISION_ID_PATTERN = r"^[0-9A-HJKMNP-TV-Z]{26}$"
#: An idempotency key: 1-255 printable ASCII characters other than a comma. No comma:
#: servers and proxies join repeated header lines with commas, so "a,b" could be two keys
#: that another hop would read differently.
IDEMPOTENCY_KEY_PATTERN = r"^[\x20-\x2b\x2d-\x7e]{1,255}$"
#: A reservation token handed out with a reserved idempotency key.
RESERVATION_TOKEN_PATTERN = r"^[A-Za-z0-9_-]{16,64}$"
#: The id of a limit or rate limit a policy names (docs/session.md).
LIMIT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
#: A label a contract puts on a tool's output (``output_labels``, docs/session.md).
LABEL_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"

#: How far an approval reaches (DESIGN §5): ``once`` (the one call, the default),
#: ``conversation`` (this tool, within constraints, in the requester's conversation, for a
#: while), ``duration`` (this tool, within constraints, for a while).
GrantScope = Literal["once", "conversation", "duration"]
GRANT_SCOPES: tuple[str, ...] = get_args(GrantScope)
#: A scoped grant id: ``sg_`` and 32 base64url characters.
SCOPED_GRANT_ID_PATTERN = r"^sg_[A-Za-z0-9_-]{32}$"
