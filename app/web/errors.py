"""The one error handler: every error leaves as the structured body of DESIGN §7."""

from __future__ import annotations

import logging

from flask import Flask, jsonify
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from app import metrics
from app.errors import InternalError, NotFound, ToolgateError, ValidationFailed
from app.web.body import TOO_LARGE
from app.web.requests import log_fields, request_id

log = logging.getLogger(__name__)


def render(error: ToolgateError):
    """A Flask response for ``error`` with its status and headers; the log gets the detail."""
    metrics.ERRORS.labels(error.code).inc()
    log_fields(error_code=error.code)
    if error.log_detail:
        log_fields(error_detail=error.log_detail[:500])
    response = jsonify(error.to_body(request_id()))
    response.status_code = error.http_status
    response.headers.update(error.headers)
    return response


def _http_exception(exc: HTTPException):
    if isinstance(exc, RequestEntityTooLarge):
        return render(ValidationFailed(TOO_LARGE, http_status=413))
    if exc.code == 404:
        return render(NotFound("no such endpoint"))
    if exc.code == 405:
        err = ValidationFailed("method not allowed for this endpoint", http_status=405)
        response = render(err)
        valid = getattr(exc, "valid_methods", None)
        if valid:
            response.headers["Allow"] = ", ".join(valid)
        return response
    if exc.code and 400 <= exc.code < 500:
        return render(ValidationFailed("bad request", http_status=exc.code))
    return _unexpected(exc)


def _unexpected(exc: Exception):
    log.error(
        "unhandled exception",
        exc_info=exc,
        extra={"event": "unhandled_exception", "request_id": request_id()},
    )
    return render(InternalError())


def register(app: Flask) -> None:
    app.register_error_handler(ToolgateError, render)
    app.register_error_handler(HTTPException, _http_exception)
    app.register_error_handler(Exception, _unexpected)
