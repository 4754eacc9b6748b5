"""Redirects to the gateway itself carry a path, never a host taken from the request.

werkzeug builds its trailing-slash redirect (``/console`` -> ``/console/``) as an absolute URL
from the ``Host`` header: behind a proxy that forwards another ``Host`` the port is lost, and a
forged ``Host`` makes the gateway send the browser to a foreign host. A relative reference
(RFC 9110 §10.2.2) is resolved by the client against the URL it actually used.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from flask import Flask, Response, request

_REDIRECTS = frozenset({301, 302, 303, 307, 308})


def _relative_location(response: Response) -> Response:
    if response.status_code in _REDIRECTS and response.location:
        target = urlsplit(response.location)
        if target.netloc and target.netloc == request.host:
            response.location = urlunsplit(("", "", target.path or "/", target.query, target.fragment))
    return response


def register(app: Flask) -> None:
    app.after_request(_relative_location)
