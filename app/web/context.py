"""What a view needs from the running app: the worker's ``Deps`` and the facts of the current
request for the decision record."""

from __future__ import annotations

from typing import cast

from flask import current_app

from app.decide.deps import Deps
from app.decide.events import RequestFacts
from app.web.requests import request_id, traceparent


def current_deps() -> Deps:
    """The collaborators ``create_app`` built for this worker."""
    return cast(Deps, current_app.extensions["toolgate"])


def request_facts() -> RequestFacts:
    """The request id and trace id of the current request."""
    return RequestFacts(request_id=request_id(), trace_id=traceparent()[1])
