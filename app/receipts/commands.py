"""The ``toolgate receipt`` commands: checking decision receipts offline (docs/design.md §11).

    toolgate receipt verify [FILE] --keys FILE|URL [--json]

FILE (default ``-``, standard input) holds a receipt: the compact JWS itself, or a whole decide
response (a JSON object with a ``receipt`` member), in which case the response's
``decision_id``, ``decision``, ``policy_revision``, ``tool`` (its namespace and name against
the signed qualified name), ``matched_rules``, ``reasons`` and ``input`` (by its fingerprint)
must also agree with the signed claims. ``--keys`` is a key document with the receipt keys in ``keys`` (the gateway's
``/.well-known/toolgate-keys``, a saved copy of it, or any JWK Set); nothing else is needed,
no settings, no gateway, no database.

Prints the verified claims (escaped, ``app.terminal``), or ``--json`` ``{"ok", "kid",
"claims"}``. Exit codes: 0 the receipt verifies; 1 it does not (the reason is printed);
2 usage error (unreadable file, unusable key document).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from app.errors import ValidationFailed
from app.fingerprint import fingerprint
from app.receipts.claims import ReceiptClaims
from app.receipts.keys import MAX_KEY_DOCUMENT_BYTES, KeySetError, PublicKeys, read_key_document
from app.receipts.verify import ReceiptInvalid, VerifiedReceipt, verify_receipt
from app.terminal import json_printable, printable


class _UsageError(Exception):
    """The command cannot run as asked (exit 2)."""


def _read_input(source: str) -> str:
    try:
        if source == "-":
            return sys.stdin.read(MAX_KEY_DOCUMENT_BYTES + 1)
        with open(source, encoding="utf-8") as handle:
            return handle.read(MAX_KEY_DOCUMENT_BYTES + 1)
    except (OSError, UnicodeDecodeError) as exc:
        raise _UsageError(f"{source}: cannot be read ({type(exc).__name__})") from None


def _receipt_and_response(text: str) -> tuple[str, dict[str, Any] | None]:
    """The receipt in ``text``, and the decide response around it when there is one."""
    stripped = text.strip()
    if not stripped.startswith(("{", '"')):
        return stripped, None
    try:
        document = json.loads(stripped)
    except ValueError:
        raise _UsageError("the input is neither a receipt nor JSON") from None
    if isinstance(document, str):
        return document, None
    if not isinstance(document, dict) or not isinstance(document.get("receipt"), str):
        raise _UsageError("the JSON input has no receipt member (a decide response carries one when receipts are on)")
    return document["receipt"], document


def _response_mismatches(response: dict[str, Any], claims: ReceiptClaims) -> list[str]:
    """The members of a decide response that say otherwise than its receipt."""
    shown_tool = response.get("tool")
    tool: dict[str, Any] = shown_tool if isinstance(shown_tool, dict) else {}
    namespace = tool.get("namespace")
    qualified = f"{namespace}/{tool.get('name')}" if namespace else tool.get("name")
    expected: dict[str, tuple[Any, Any]] = {
        "decision_id": (response.get("decision_id"), claims.decision_id),
        "decision": (response.get("decision"), claims.decision),
        "policy_revision": (response.get("policy_revision"), claims.policy_revision),
        "tool.name": (qualified, claims.tool),
        "tool.version": (tool.get("version"), claims.version),
        "matched_rules": (response.get("matched_rules") or None, claims.matched_rules),
    }
    if claims.reasons is not None:
        expected["reasons"] = (response.get("reasons"), claims.reasons)
    if claims.shown_input_fingerprint is not None:
        expected["input"] = (_shown_fingerprint(response.get("input"), claims), claims.shown_input_fingerprint)
    return [name for name, (shown, signed) in expected.items() if shown != signed]


def _shown_fingerprint(shown_input: Any, claims: ReceiptClaims) -> str | None:
    """The fingerprint of a response's ``input`` under the receipt's tenant, subject and tool
    (None when it is no object or has no RFC 8785 form)."""
    if not isinstance(shown_input, dict):
        return None
    try:
        return fingerprint(claims.tenant, claims.subject, claims.tool, claims.version, shown_input)
    except ValidationFailed:
        return None


def _text(verified: VerifiedReceipt) -> str:
    claims = verified.claims
    rules = ", ".join(str(rule.get("id", "?")) for rule in claims.matched_rules) if claims.matched_rules else "-"
    rows = [
        ("decision_id", claims.decision_id),
        ("time", claims.time),
        ("tenant", claims.tenant),
        ("subject", claims.subject),
        ("tool", f"{claims.tool} {claims.version}"),
        ("input_fingerprint", claims.input_fingerprint or "-"),
        ("decision", claims.decision),
        ("matched_rules", rules),
        ("policy_revision", claims.policy_revision),
        ("grant_id", claims.grant_id or "-"),
    ]
    lines = [f"ok: receipt signed by key {printable(verified.kid)}"]
    lines += [f"{name:<18} {printable(value)}" for name, value in rows]
    return "\n".join(lines)


def _verify(args: argparse.Namespace) -> int:
    try:
        try:
            keys = PublicKeys.from_jwks(read_key_document(args.keys).get("keys"), what="keys")
        except KeySetError as exc:
            raise _UsageError(str(exc)) from None
        receipt, response = _receipt_and_response(_read_input(args.file))
    except _UsageError as exc:
        print(f"toolgate receipt verify: {printable(str(exc))}", file=sys.stderr)
        return 2
    try:
        verified = verify_receipt(receipt, keys)
        mismatches = _response_mismatches(response, verified.claims) if response is not None else []
        if mismatches:
            raise ReceiptInvalid(f"the response does not match its receipt ({', '.join(mismatches)})")
    except ReceiptInvalid as exc:
        if args.json:
            print(json_printable(json.dumps({"ok": False, "reason": str(exc)}, ensure_ascii=False)))
        else:
            print(f"invalid receipt: {printable(str(exc))}")
        return 1
    if args.json:
        document = {"ok": True, "kid": verified.kid, "claims": verified.claims.payload()}
        print(json_printable(json.dumps(document, ensure_ascii=False)))
    else:
        print(_text(verified))
    return 0


def add_receipt_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``receipt verify`` to the ``toolgate`` subcommands."""
    receipt = sub.add_parser("receipt", help="decision receipts: verify offline")
    receipt_sub = receipt.add_subparsers(dest="receipt_command", required=True)
    verify = receipt_sub.add_parser("verify", help="check a receipt's signature and claims with the published keys")
    verify.add_argument("file", nargs="?", default="-", help="a receipt, or a decide response carrying one (default: stdin)")
    verify.add_argument("--keys", required=True, help="key document (file or http(s) URL), e.g. /.well-known/toolgate-keys")
    verify.add_argument("--json", action="store_true", help="print {ok, kid, claims} as JSON")
    verify.set_defaults(func=_verify)
