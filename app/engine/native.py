"""The embedded OPA engine with its JSON crossing done by orjson (``app.engine.wire``).

``OpaEngine.eval_document`` of opa-golib-python-bindings (0.4.4, pinned in scripts/install.sh)
encodes the input with the standard library's ``json.dumps`` and decodes the whole answer
envelope with ``json.loads``. ``JsonEngine.eval_json`` hands the bridge the input already
encoded (``encode_input``) and reads every native answer through ``wire.loads``; everything
else (the lock, the per-evaluation state, prints, errors) is the bindings' own
``eval_document`` path, through the private members it uses (``_call``'s contract: a native
function returning a NUL-terminated JSON envelope ``{"result"?, "error"?, "prints"?}`` that
``OpaFreeString`` releases).
"""

from __future__ import annotations

import ctypes
import json
from typing import Any

from opa_bindings import OpaEngine, OpaError, OpaUndefinedError

from app.engine import wire


def _bindings_dumps(value: Any) -> bytes:
    """The bindings' own encoding: a lone surrogate is refused, not escaped."""
    try:
        return json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise OpaError("invalid_argument", f"value is not valid UTF-8: {exc}") from None


def encode_input(value: Any) -> bytes:
    """``value`` as the UTF-8 JSON text the bridge reads. Raises ``OpaError("invalid_argument")``
    for text that is not valid UTF-8 (a lone surrogate), as the bindings do."""
    return wire.dumps(value, _bindings_dumps)


class JsonEngine(OpaEngine):
    """``OpaEngine`` whose native answers are decoded with orjson, with ``eval_json``."""

    def _call(self, fn: Any, *args: Any) -> Any:
        handle = self._handle
        if handle is None:
            raise OpaError("closed", "engine has been closed")
        ptr = fn(handle, *args)
        if not ptr:
            raise OpaError("internal", "native call returned NULL")
        try:
            raw = ctypes.string_at(ptr)
        finally:
            self._lib.OpaFreeString(ptr)
        envelope = wire.loads(raw)
        if envelope.get("error") is not None:
            err = envelope["error"]
            raise OpaError(err.get("code", "unknown"), err.get("message", ""))
        return envelope

    def eval_json(self, path: str, input_json: bytes) -> Any:
        """The value of ``data.<path>`` for the input ``input_json`` (``encode_input``'s output).
        Raises ``OpaUndefinedError`` when the document is undefined and ``OpaError`` for an
        evaluation error or a closed engine."""
        self._check_open()
        with self._eval_lock:
            self._eval_reset()
            rs = self._eval_result(self._call(self._lib.OpaEvalDocument, path.encode(), input_json, 0, 0))
        if not rs or not rs[0].get("expressions"):
            raise OpaUndefinedError(f"data.{path}")
        return rs[0]["expressions"][0]["value"]
