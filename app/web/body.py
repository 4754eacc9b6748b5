"""The request body, read with its size limit enforced whatever the framing: a declared
``Content-Length`` over ``TOOLGATE_MAX_BODY_BYTES`` is refused before reading, and a chunked
body is read to one byte past the limit, so an oversized one is refused too instead of being
cut at the limit (where a valid JSON prefix would parse)."""

from __future__ import annotations

from flask import current_app, request

from app.errors import ValidationFailed

TOO_LARGE = "request body is too large"


def request_body() -> bytes:
    """The whole body, at most ``MAX_CONTENT_LENGTH`` bytes. Raises ``ValidationFailed`` (413)
    for a longer one (werkzeug's ``RequestEntityTooLarge`` for a declared length renders as the
    same 413).

    A body without a declared length is read from the server's own terminated stream
    (``wsgi.input_terminated``, which gunicorn sets for chunked bodies): werkzeug's limited
    stream cannot tell a body of exactly the limit from a longer one, and cuts a longer one
    short. A server that does not terminate its stream gets no body, as werkzeug does.
    """
    if request.content_length is not None:
        return request.get_data(cache=False)
    if not request.environ.get("wsgi.input_terminated"):
        return b""
    limit = int(current_app.config["MAX_CONTENT_LENGTH"])
    stream = request.environ["wsgi.input"]
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = stream.read(limit + 1 - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise ValidationFailed(TOO_LARGE, http_status=413)
    return b"".join(chunks)
