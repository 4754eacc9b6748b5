"""``require_subject``: the one way an endpoint authenticates its caller (bearer JWT,
``app.auth.verifier``). ``POST /v1/decide`` authenticates inside the decide pipeline instead,
where authentication is step 2 and is timed and recorded with the others."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from flask import request

from app.web.context import current_deps
from app.web.requests import log_fields

R = TypeVar("R")


def require_subject(view: Callable[..., R]) -> Callable[..., R]:
    """Decorate a view so it is called with the verified ``Subject`` as its first argument.
    Raises ``Unauthenticated`` (401) or ``DependencyUnavailable`` (503, JWKS down) before the
    view runs."""

    @functools.wraps(view)
    def authenticated(*args: Any, **kwargs: Any) -> R:
        subject = current_deps().verifier.verify(request.headers.getlist("Authorization"))
        log_fields(tenant=subject.tenant, subject=subject.id)
        return view(subject, *args, **kwargs)

    return authenticated
