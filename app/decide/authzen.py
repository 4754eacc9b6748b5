"""AuthZEN Authorization API 1.0 (OpenID, https://openid.net/specs/authorization-api-1_0.html)
mapped onto dry-run decide calls: toolgate as the external PDP of another gateway.

One access evaluation ``{subject, action, resource, context?}`` becomes one dry-run decide
call of the authenticated caller (no key reserved, no approval opened, recorded as
``decide_dry_run``) that the PEP enforces: unlike a plain dry run it spends what the call would
spend, a slot of each rate limit and a share of each limit (budgets, counts) for a ``true``, kept
spent since no execution report can follow an AuthZEN answer (docs/design.md §12):

- ``resource {"type": "tool", "id": T, "properties"?: {"version"?: V}}`` with ``action.name``
  ``tools/call`` (the COAZ-MCP default mapping) or ``call``: tool ``T`` version ``V`` (default
  ``1``), input ``action.properties.arguments`` (default ``{}``);
- any other resource: tool ``action.name``, input ``{"resource": {type, id, properties?},
  "action"?: action.properties}`` (an API gateway's "may alice GET /orders/7?");
- ``context`` becomes the untrusted decide ``context``.

The subject: an end user's token asks about itself only (``subject.id`` must be the verified
caller's id, its ``type`` not interpreted, else 403). A PEP's credential (a token with the role
``authzen_pep_role``) may ask about any subject of its own tenant: the call is decided for
``subject.id`` (1-256 printable characters, else 400), with no roles of its own and
``subject.asserted_by`` = the PEP in the policy input (and so in the decision record).

Answer: ``{"decision": true}`` only for ``allow``; ``deny`` and ``user-approval`` are
``false``. The decision ``context`` carries ``decision_id``, ``toolgate_decision`` and
``reasons`` (``reason`` too when not allowed); it is left out when ``authzen_decision_context``
is off or the request's ``options.include_context`` is ``false`` (the request's option wins).
Unknown request members are ignored, as the specification requires. A batch takes at most
``TOOLGATE_AUTHZEN_MAX_EVALUATIONS`` evaluations (413 above) and stops at the request deadline
(``TOOLGATE_REQUEST_DEADLINE_MS``, 503).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from app.auth.claims import identity_text
from app.bodies import parse_body
from app.deadline import Deadline
from app.decide import session_step
from app.decide.deps import Deps
from app.decide.phases import Phases
from app.decide.pipeline import decide
from app.decide.stages import DecideCall, Decided, Progress
from app.errors import (
    ContractMismatch,
    DependencyUnavailable,
    Forbidden,
    RateLimited,
    ToolgateError,
    Unauthenticated,
    ValidationFailed,
)
from app.models import DecideResponse, Subject

TOOL_ACTIONS = ("tools/call", "call")
Semantic = Literal["execute_all", "deny_on_first_deny", "permit_on_first_permit"]


class _Entity(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    properties: dict[str, Any] | None = None


class AuthzenSubject(_Entity):
    type: str = Field(min_length=1)
    id: str = Field(min_length=1)


class AuthzenResource(_Entity):
    type: str = Field(min_length=1)
    id: str = Field(min_length=1)


class AuthzenAction(_Entity):
    name: str = Field(min_length=1)


class EvaluationItem(BaseModel):
    """One member of ``evaluations``: any entity may be left to the top-level default."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    subject: AuthzenSubject | None = None
    action: AuthzenAction | None = None
    resource: AuthzenResource | None = None
    context: dict[str, Any] | None = None


class EvaluationOptions(BaseModel):
    """``options`` of either endpoint: ``include_context`` overrides ``authzen_decision_context``."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    include_context: StrictBool | None = None


class EvaluationRequest(BaseModel):
    """Body of ``POST /access/v1/evaluation``."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    subject: AuthzenSubject
    action: AuthzenAction
    resource: AuthzenResource
    context: dict[str, Any] | None = None
    options: EvaluationOptions = Field(default_factory=EvaluationOptions)


class EvaluationsOptions(EvaluationOptions):
    evaluations_semantic: Semantic = "execute_all"


class EvaluationsRequest(EvaluationItem):
    """Body of ``POST /access/v1/evaluations``: defaults, the evaluations, options."""

    evaluations: list[EvaluationItem] | None = None
    options: EvaluationsOptions = Field(default_factory=EvaluationsOptions)


def _parse(model: type[Any], body: bytes) -> Any:
    """``parse_body``, with a schema mismatch answered 400 as AuthZEN §12.1.1 requires."""
    try:
        return parse_body(model, body, "request does not match the AuthZEN evaluation schema")
    except ValidationFailed as exc:
        raise ValidationFailed(exc.message, http_status=400, details=exc.details) from None


def asserted_subject(caller: Subject, request: EvaluationRequest, pep_role: str | None) -> str | None:
    """The subject id the caller asserts for this evaluation (None: the caller itself). Raises
    ``Forbidden`` (403) for another subject without the PEP role, ``ValidationFailed`` (400)
    for an asserted id that is not 1-256 printable characters."""
    subject_id = request.subject.id
    if subject_id == caller.id:
        return None
    if pep_role is None or pep_role not in caller.roles:
        raise Forbidden("the evaluation's subject is not the authenticated caller")
    if not identity_text(subject_id):
        raise ValidationFailed(
            "the subject id must be 1-256 printable characters",
            http_status=400,
            details={"problems": [{"path": "/subject/id", "message": "1-256 printable characters"}]},
        )
    return subject_id


def _decide_body(request: EvaluationRequest) -> bytes:
    """The dry-run decide body of one evaluation. Raises ``ValidationFailed`` (400) for a tool
    resource with another action."""
    resource, action = request.resource, request.action
    if resource.type == "tool":
        if action.name not in TOOL_ACTIONS:
            raise ValidationFailed(
                "a tool resource takes the action tools/call",
                http_status=400,
                details={"problems": [{"path": "/action/name", "message": "expected tools/call"}]},
            )
        tool, version = resource.id, (resource.properties or {}).get("version", "1")
        tool_input = (action.properties or {}).get("arguments", {})
    else:
        tool, version = action.name, "1"
        tool_input = {"resource": resource.model_dump(exclude_none=True)}
        if action.properties:
            tool_input["action"] = action.properties
    body = {"tool": tool, "version": version, "input": tool_input, "context": request.context or {}, "dry_run": True}
    return json.dumps(body).encode()


def decision_of(response: DecideResponse, *, with_context: bool = True) -> dict[str, Any]:
    """The AuthZEN decision of a decide response (``{"decision": bool}`` alone without context)."""
    allowed = response.decision == "allow"
    if not with_context:
        return {"decision": allowed}
    context: dict[str, Any] = {
        "decision_id": response.decision_id,
        "toolgate_decision": response.decision,
        "reasons": list(response.reasons),
    }
    if not allowed:
        context["reason"] = "; ".join(response.reasons) or "not allowed"
    return {"decision": allowed, "context": context}


def _error_decision(error: ToolgateError, *, with_context: bool) -> dict[str, Any]:
    """A refused evaluation inside a batch: closed, with the error in its context."""
    if not with_context:
        return {"decision": False}
    detail: dict[str, Any] = {"status": error.http_status, "code": error.code, "message": error.message}
    if error.details is not None:
        detail["details"] = error.details
    return {"decision": False, "context": {"error": detail}}


#: Where each entity of an evaluation was written, and the evaluation itself: a JSON Pointer
#: prefix by name ("" at the top level, "/evaluations/<n>" inside a batch).
Origins = dict[str, str]
WHOLE_REQUEST: Origins = {"evaluation": "", "subject": "", "action": "", "resource": "", "context": ""}


Authorization = tuple[str, ...]


class Evaluator:
    """Runs AuthZEN evaluations for one authenticated HTTP request: ``request_id`` and the
    ``authorization`` header values are those of that request (each evaluation is a decide
    call of its own, verified and recorded like any other)."""

    def __init__(self, deps: Deps, subject: Subject, request_id: str, authorization: Authorization,
                 traceparent: str | None = None) -> None:
        self._deps = deps
        self._subject = subject
        self._request_id = request_id
        self._authorization = authorization
        self._traceparent = traceparent
        self._deadline = Deadline(deps.settings.request_deadline_ms)

    def _evaluate(
        self, request: EvaluationRequest, *, with_context: bool, decided: list[Decided] | None = None,
        origins: Origins = WHOLE_REQUEST,
    ) -> dict[str, Any]:
        """One evaluation as an enforced dry-run decide call; its ``Decided`` stage is appended to
        ``decided`` (when given) so that a batch that fails later can give back what it took.
        A mapped call that fails validation is a 400 whose problems name the AuthZEN request's
        paths (``origins``: where each entity was written)."""
        call = DecideCall(
            request_id=self._request_id,
            authorization=self._authorization,
            body=_decide_body(request),
            traceparent=self._traceparent,
            asserted_subject=asserted_subject(self._subject, request, self._deps.settings.authzen_pep_role),
            enforced=True,
        )
        progress = Progress(call)
        try:
            response = decide(self._deps, progress, Phases())
        except ValidationFailed as exc:
            raise in_request_terms(exc, request, origins) from None
        answer = decision_of(response, with_context=with_context)
        if decided is not None and isinstance(progress.stage, Decided):
            decided.append(progress.stage)
        return answer

    def _with_context(self, options: EvaluationOptions) -> bool:
        chosen = options.include_context
        return self._deps.settings.authzen_decision_context if chosen is None else chosen

    def evaluation(self, body: bytes) -> dict[str, Any]:
        """``POST /access/v1/evaluation``: one decision. Raises ``ValidationFailed`` (400),
        ``Forbidden`` (403), ``Unauthenticated`` (401), ``RateLimited`` (429),
        ``DependencyUnavailable`` (503) and what ``decide`` raises for the mapped call, a
        ``ValidationFailed`` of it as 400 in the request's paths (``in_request_terms``)."""
        request: EvaluationRequest = _parse(EvaluationRequest, body)
        return self._evaluate(request, with_context=self._with_context(request.options))

    def evaluations(self, body: bytes) -> dict[str, Any]:
        """``POST /access/v1/evaluations``: ``{"evaluations": [decision...]}`` in request order
        (stopping early for the short-circuit semantics), or one decision when the request has
        no ``evaluations``. An evaluation that is refused (400, 403, 409) is ``false`` with
        the error in its context; a rejected token (401), a full rate limit (429), an outage or
        the request deadline (503) fail the whole request, the rest left unevaluated, and the
        evaluations already decided give back their limit shares (their answers are never
        delivered, so none of their budget may stay spent; their rate-limit slots do). More than
        ``TOOLGATE_AUTHZEN_MAX_EVALUATIONS`` evaluations: ``ValidationFailed`` (413), none run."""
        request: EvaluationsRequest = _parse(EvaluationsRequest, body)
        if not request.evaluations:
            return self.evaluation(body)
        cap = self._deps.settings.authzen_max_evaluations
        if len(request.evaluations) > cap:
            raise ValidationFailed(
                f"a batch takes at most {cap} evaluations", http_status=413, details={"max_evaluations": cap}
            )
        with_context = self._with_context(request.options)
        semantic = request.options.evaluations_semantic
        stop: Callable[[bool], bool] = {
            "execute_all": lambda _: False,
            "deny_on_first_deny": lambda decided: not decided,
            "permit_on_first_permit": lambda decided: decided,
        }[semantic]
        answers: list[dict[str, Any]] = []
        decided: list[Decided] = []
        try:
            for position, item in enumerate(request.evaluations):
                self._deadline.check()
                try:
                    merged, origins = _merged(request, item, position)
                    answer = self._evaluate(merged, with_context=with_context, decided=decided, origins=origins)
                except (DependencyUnavailable, Unauthenticated, RateLimited):
                    raise
                except ToolgateError as error:
                    answer = _error_decision(error, with_context=with_context)
                answers.append(answer)
                if stop(answer["decision"]):
                    break
        except ToolgateError:
            for stage in decided:
                session_step.give_back(stage, session_step.Admitted(stage.decision, stage.shares), self._deps.sessions)
            raise
        return {"evaluations": answers}


def _merged(defaults: EvaluationsRequest, item: EvaluationItem, position: int) -> tuple[EvaluationRequest, Origins]:
    """One evaluation with the top-level defaults filled in (AuthZEN §7.1.1), and where each
    entity was written (``/evaluations/<position>`` or the top level). Raises
    ``ValidationFailed`` (400) when a required entity is in neither."""
    names = ("subject", "action", "resource", "context")
    own = {name for name in names if getattr(item, name) is not None}
    values = {name: getattr(item if name in own else defaults, name) for name in names}
    here = f"/evaluations/{position}"
    origins = {"evaluation": here, **{name: here if name in own else "" for name in names}}
    missing = [name for name in ("subject", "action", "resource") if values[name] is None]
    if missing:
        raise ValidationFailed(
            "an evaluation lacks a required entity and there is no default for it",
            http_status=400,
            details={"problems": [{"path": f"/evaluations/{position}/{name}", "message": "required"} for name in missing]},
        )
    return EvaluationRequest(**values), origins


def in_request_terms(error: ValidationFailed, request: EvaluationRequest, origins: Origins) -> ValidationFailed:
    """``error`` of the mapped decide call as the AuthZEN request's error: a 422 becomes 400 (the
    error responses AuthZEN defines are 400, 401, 403 and 500: arguments that fail the tool's
    contract make a bad request) and each problem's path moves from the decide body
    (``/input/...``, ``/tool``, ``/version``, ``/context/...``) to where the PEP wrote it
    (``/action/properties/arguments/...``, ``/resource/id``, ...); a path with no counterpart
    names the evaluation itself."""
    details = error.details
    if isinstance(details, dict) and isinstance(details.get("problems"), list):
        moves = _path_moves(request, origins)
        inside = "/input" if isinstance(error, ContractMismatch) else ""  # its paths start inside the input
        problems = [{**p, "path": _moved(inside + str(p.get("path", "")), moves, origins)} for p in details["problems"]]
        details = {**details, "problems": problems}
    status = 400 if error.http_status == 422 else error.http_status
    return ValidationFailed(error.message, http_status=status, details=details, log_detail=error.log_detail)


def _path_moves(request: EvaluationRequest, origins: Origins) -> list[tuple[str, str]]:
    """(decide body prefix, AuthZEN request prefix), most specific first (``_decide_body``'s
    mapping read backwards)."""
    action, resource, context = origins["action"] + "/action", origins["resource"] + "/resource", origins["context"]
    if request.resource.type == "tool":
        moves = [("/input", action + "/properties/arguments"), ("/tool", resource + "/id"),
                 ("/version", resource + "/properties/version")]
    else:
        moves = [("/input/resource", resource), ("/input/action", action + "/properties"), ("/tool", action + "/name")]
    return [*moves, ("/context", context + "/context")]


def _moved(path: str, moves: list[tuple[str, str]], origins: Origins) -> str:
    for decide_prefix, request_prefix in moves:
        if path == decide_prefix or path.startswith(decide_prefix + "/"):
            return request_prefix + path[len(decide_prefix):]
    return origins["evaluation"]
