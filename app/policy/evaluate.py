"""``toolgate policy eval``: evaluate one policy input document (DESIGN §3) offline, on a policy
directory or a bundle tarball, as the gateway's embedded engine would.

The decision is evaluated by the embedded engine on the bundle without its tests and normalized
strictly (``app.engine.base.normalize``, the gateway's own), so what is printed is what a
decide call would answer: the decision, its reasons, the matched rules, the approval; an
undefined or malformed result shows as the gateway's fail-closed deny.

The trace (``explain``), one of OPA's explain modes:

- with the ``opa`` binary: ``opa eval --explain=<mode>`` on a tarball of the same bundle (the
  same files, the same revision) and the same input: ``notes`` (the policy's ``trace()`` notes
  only; the shipped library writes none), ``fails`` (every rule entered and every expression
  that failed, with their file:line), ``full`` (every step), ``debug`` (``full`` with the
  compiler's generated expressions);
- without it, the embedded engine's own trace of the same evaluation: ``fails`` and ``notes``
  print its ``Enter`` and ``Fail`` events (the entered rule's head, the failed expression as
  the compiler rewrote it, with the local variables OPA recorded), ``full`` and ``debug`` every
  event. The embedded engine records no ``trace()`` notes.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from app.engine.base import normalize
from app.models import PolicyDecision
from app.policy.bundle import PolicyBundle, PolicyLoadError, build_tarball, load_into, with_manifest

ExplainMode = Literal["notes", "fails", "full", "debug"]
EXPLAIN_MODES: tuple[str, ...] = ("notes", "fails", "full", "debug")
#: The members of a policy input document (DESIGN §3); a missing one is reported, not refused.
INPUT_MEMBERS = ("subject", "tool", "call", "context", "history", "approval", "request")
_OPA_TIMEOUT_S = 120
_NODE_CHARS = 240


class PolicyInputError(ValueError):
    """The input document cannot be used (not JSON, not an object); the message says why."""


class EvaluationError(RuntimeError):
    """The policy raised an error while evaluating (the gateway answers 503 for it)."""


@dataclass(frozen=True)
class Evaluation:
    """One offline evaluation: the normalized ``decision``, the raw ``document`` (None when
    undefined), the bundle ``revision``, and the ``trace`` text with what made it
    (``trace_source``) when asked for."""

    decision: PolicyDecision
    document: Any
    defined: bool
    revision: str
    trace: str | None = None
    trace_source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"decision", "reasons", "matched_rules", "approval"?, "policy_revision",
        "normalized_from_invalid", "result", "trace"?, "trace_source"?}``."""
        d = self.decision
        out: dict[str, Any] = {
            "decision": d.decision,
            "reasons": list(d.reasons),
            "matched_rules": [r.model_dump() for r in d.matched_rules],
            "policy_revision": self.revision,
            "normalized_from_invalid": d.normalized_from_invalid,
            "result": self.document if self.defined else None,
        }
        if d.decision == "user-approval":
            out["approval"] = {"reason": d.approval_reason, "approver_roles": list(d.approver_roles or ()),
                               "ttl_s": d.approval_ttl_s}
        if self.trace is not None:
            out["trace"] = self.trace
            out["trace_source"] = self.trace_source
        return out

    def format_text(self) -> str:
        """The decision, reasons, matched rules (effect, id, message), the approval, the
        revision, then the trace under a ``trace (<source>):`` line."""
        d = self.decision
        lines = [f"decision: {d.decision}"]
        if d.normalized_from_invalid:
            result = json.dumps(self.document, sort_keys=True)[:500] if self.defined else "undefined"
            lines.append(f"  (the policy's result is not a decision, so the gateway denies: {result})")
        lines.append("reasons:")
        lines.extend(f"  - {reason}" for reason in d.reasons)
        lines.append("matched rules:" if d.matched_rules else "matched rules: none")
        width = max((len(r.id) for r in d.matched_rules), default=0)
        lines.extend(f"  {r.effect:8s} {r.id:{width}s}  {r.message}" for r in d.matched_rules)
        if d.decision == "user-approval":
            lines.append(f"approval: {d.approval_reason} (approver roles: {', '.join(d.approver_roles or ()) or 'none'}; "
                         f"ttl {d.approval_ttl_s} s)")
        lines.append(f"policy revision: {self.revision}")
        if self.trace is not None:
            lines.append(f"trace ({self.trace_source}):")
            lines.append(self.trace.rstrip("\n"))
        return "\n".join(lines)


def parse_input(text: str) -> tuple[dict[str, Any], list[str]]:
    """The policy input in ``text`` and notes on members missing from the DESIGN §3 shape.
    Raises ``PolicyInputError`` when it is not one JSON object."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise PolicyInputError(f"the input is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise PolicyInputError(f"the input must be a JSON object (DESIGN §3), not a {type(document).__name__}")
    notes = [f"the input has no {m!r} member (DESIGN §3)" for m in INPUT_MEMBERS if m not in document]
    return document, notes


def evaluate(
    bundle: PolicyBundle, policy_input: dict[str, Any], *, decision_path: str,
    explain: ExplainMode | None = None, opa: Path | None = None,
) -> Evaluation:
    """Evaluate ``data.<decision_path>`` of ``bundle`` (its ``*_test.rego`` modules are never
    loaded) for ``policy_input``; with ``explain``, also the trace (through ``opa`` when given,
    else the embedded engine's). Raises ``PolicyLoadError`` (the bundle does not load),
    ``EvaluationError`` (the policy raised), ``RuntimeError`` (``opa`` could not run)."""
    from opa_bindings import OpaEngine, OpaError, OpaUndefinedError

    document_path = decision_path.replace("/", ".")
    bundle = _without_tests(bundle)
    engine = OpaEngine()
    try:
        load_into(engine, bundle)
        embedded_trace = explain is not None and opa is None
        try:
            document: Any = engine.eval_document(document_path, policy_input, trace=embedded_trace)
            defined = True
        except OpaUndefinedError:
            document, defined = None, False
        except OpaError as exc:
            raise EvaluationError(f"the policy raised an error: {exc.message}") from None
        trace_events = list(getattr(engine, "last_trace", None) or []) if embedded_trace else []
    finally:
        engine.close()
    decision = normalize(document, defined=defined, policy_revision=bundle.revision)
    if explain is None:
        return Evaluation(decision, document, defined, bundle.revision)
    if opa is not None:
        trace = _opa_explain(opa, bundle, policy_input, document_path, explain)
        source = f"opa eval --explain={explain}"
    else:
        trace = format_embedded_trace(trace_events, explain)
        source = f"embedded engine trace, {explain}"
    return Evaluation(decision, document, defined, bundle.revision, _with_locations(trace, bundle), source)


_ROW = re.compile(r"^(?P<where>\S+)\s{2,}(?P<event>(\| )*[A-Z][a-z]+ .*)$")


def _with_locations(trace: str, bundle: PolicyBundle) -> str:
    """The trace with the locations of ``bundle``'s modules as paths beside the policy
    directory (``policies/tools/x/x.rego:12``) when the bundle is one, columns re-aligned;
    lines that are no trace event stay as they are."""
    root = Path(bundle.source) if bundle.source and Path(bundle.source).is_dir() else None
    if root is not None and root.resolve().is_relative_to(Path.cwd()):
        root = root.resolve().relative_to(Path.cwd())
    rows: list[tuple[str | None, str]] = []
    for line in trace.splitlines():
        match = _ROW.match(line)
        if match is None:
            rows.append((None, line))
            continue
        where = match["where"]
        file, colon, row = where.rpartition(":")
        if colon and root is not None and file.lstrip("/") in bundle.files:
            where = f"{(root / file.lstrip('/')).as_posix()}:{row}"
        rows.append((where, match["event"]))
    width = max((len(where) for where, _ in rows if where is not None), default=0) + 2
    return "\n".join(event if where is None else f"{where:{width}s}{event}" for where, event in rows)


def _without_tests(bundle: PolicyBundle) -> PolicyBundle:
    files = {p: raw for p, raw in bundle.files.items() if not p.endswith("_test.rego")}
    if len(files) == len(bundle.files):
        return bundle
    return PolicyBundle(files=files, revision=bundle.revision, roots=bundle.roots, source=bundle.source,
                        manifest=bundle.manifest)


def _opa_explain(opa: Path, bundle: PolicyBundle, policy_input: dict[str, Any], document_path: str,
                 mode: ExplainMode) -> str:
    """What ``opa eval --explain=<mode> --format pretty`` prints for a tarball of ``bundle``."""
    with tempfile.TemporaryDirectory(prefix="toolgate-eval-") as tmp:
        tarball = Path(tmp) / "bundle.tar.gz"
        tarball.write_bytes(build_tarball(with_manifest(bundle, revision=bundle.revision)))
        input_file = Path(tmp) / "input.json"
        input_file.write_text(json.dumps(policy_input), encoding="utf-8")
        argv = [str(opa), "eval", "--bundle", str(tarball), "--input", str(input_file), f"--explain={mode}",
                "--format", "pretty", f"data.{document_path}"]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=_OPA_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise RuntimeError(f"opa eval could not run: {exc}") from None
    if done.returncode != 0:
        raise RuntimeError(f"opa eval failed: {(done.stderr or done.stdout).strip()[-2000:]}")
    return _trace_part(done.stdout)


def _trace_part(output: str) -> str:
    """OPA prints the trace, then the result; the trace part (the result is printed above)."""
    lines = output.rstrip("\n").splitlines()
    for index, line in enumerate(lines):
        if line == "undefined" or line.startswith(("{", "[")):
            return "\n".join(lines[:index]) or "(no trace events for this mode)"
    return "\n".join(lines) or "(no trace events for this mode)"


def format_embedded_trace(events: list[dict[str, Any]], mode: ExplainMode) -> str:
    """The embedded engine's trace events as lines ``location  | | Op node {locals}``, nested by
    query; ``fails``/``notes``: ``Enter`` and ``Fail`` events only."""
    depth: dict[int, int] = {}
    lines = []
    wanted = None if mode in ("full", "debug") else {"Enter", "Fail", "Note"}
    for event in events:
        query, parent = int(event.get("query_id", 0)), int(event.get("parent_id", 0))
        if query not in depth:
            depth[query] = 0 if query == parent else depth.get(parent, 0) + 1
        op = str(event.get("op", ""))
        if wanted is not None and op not in wanted:
            continue
        node = str(event.get("node", ""))
        if op == "Enter" and " if {" in node:
            node = node.split(" if {", 1)[0]
        if len(node) > _NODE_CHARS:
            node = node[: _NODE_CHARS - 3] + "..."
        locals_ = event.get("locals")
        shown = f"  {json.dumps(locals_, sort_keys=True)}" if locals_ else ""
        location = str(event.get("location", ""))
        lines.append(f"{location:44s} {'| ' * depth[query]}{op} {node}{shown}")
    return "\n".join(lines) or "(no trace events)"


def read_policies(directory: Path | None, bundle_file: Path | None, *, tenant_data_dir: Path | None = None) -> PolicyBundle:
    """The bundle of the tarball ``bundle_file``, else of ``directory`` with the pushed tenant
    data of ``tenant_data_dir`` over it, as the gateway reads them. Raises ``PolicyLoadError``."""
    from app.policy.bundle import read_directory, read_tarball

    if bundle_file is not None:
        try:
            raw = bundle_file.read_bytes()
        except OSError as exc:
            raise PolicyLoadError(f"cannot read {bundle_file}: {exc.strerror}") from None
        return read_tarball(raw, source=str(bundle_file))
    if directory is None:
        raise PolicyLoadError("no policy directory or bundle given")
    return read_directory(directory, tenant_data_dir=tenant_data_dir)
