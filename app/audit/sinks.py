"""Where signed checkpoints go, outside the database: an append-only JSON Lines file, and
optionally a Redis stream. Both carry the same lines (``app.audit.checkpoints``), one
statement each; both can be read back by ``toolgate audit verify``.

- ``FileSink``: opens the file with ``O_APPEND`` for each statement (so an append-only file,
  ``chattr +a``, works), takes an exclusive ``flock`` (several workers and commands write one
  file), writes the whole line, ``fsync``s it (and the folder when the file is new), closes.
- ``RedisStreamSink``: ``XADD <stream> * statement <line>``; never trimmed by toolgate.

Checkpoints are written once per interval per worker, never on the decide path, so the cost of
an ``fsync`` per statement does not reach the callers (docs/performance.md).
"""

from __future__ import annotations

import fcntl
import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from app.errors import DependencyUnavailable
from app.redis_client import RedisConnection

#: The field of a stream entry that holds the statement line.
STREAM_FIELD = "statement"
_STREAM_BATCH = 1000


class SinkLine(NamedTuple):
    """One stored statement line: where it was read (``path:N``, or ``redis stream NAME entry
    ID``), its text (no newline), and whether it was complete (a file's last line without its
    newline is a write a crash cut short)."""

    source: str
    text: str
    complete: bool


class CheckpointSinkError(Exception):
    """A statement could not be stored in a sink; the message says which and why (safe)."""


class CheckpointSink(Protocol):
    """Something signed checkpoint lines are appended to."""

    #: What the sink is, for messages and statement sources (a path or ``redis stream NAME``).
    name: str

    def append(self, line: str) -> None:
        """Store ``line`` (one JSON object, no newline) durably. Raises ``CheckpointSinkError``."""


class FileSink:
    """The checkpoint file at ``path`` (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.name = str(self.path)

    def append(self, line: str) -> None:
        data = (line + "\n").encode("utf-8")
        try:
            created = not self.path.exists()
            if created:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)  # releases the lock
            if created:
                _fsync_folder(self.path.parent)
        except OSError as exc:
            raise CheckpointSinkError(f"{self.path}: {exc.strerror or type(exc).__name__}") from exc


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_file(path: Path) -> Iterator[SinkLine]:
    """Each non-blank line of the checkpoint file ``path``, read in constant memory. Raises
    ``OSError`` (``UnicodeDecodeError``, a ``ValueError``, for bytes that are not UTF-8)."""
    with open(path, encoding="utf-8", newline="\n") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield SinkLine(f"{path}:{number}", line.rstrip("\n"), line.endswith("\n"))


class RedisStreamSink:
    """The Redis stream ``stream`` on ``redis`` (see the module docstring)."""

    def __init__(self, redis: RedisConnection, stream: str) -> None:
        self._redis = redis
        self.stream = stream
        self.name = f"redis stream {stream}"

    def append(self, line: str) -> None:
        try:
            self._redis.run("checkpoint xadd", lambda client: client.xadd(self.stream, {STREAM_FIELD: line}))
        except DependencyUnavailable as exc:
            raise CheckpointSinkError(f"{self.name}: {exc.log_detail or exc.message}") from exc

    def read(self) -> Iterator[SinkLine]:
        """Every entry, oldest first, read in batches. Raises ``DependencyUnavailable``."""
        after = "-"
        while True:
            entries = self._redis.run("checkpoint xrange", functools.partial(self._range, after))
            for entry_id, fields in entries:
                yield SinkLine(f"{self.name} entry {entry_id}", fields.get(STREAM_FIELD, ""), True)
            if len(entries) < _STREAM_BATCH:
                return
            after = "(" + entries[-1][0]

    def _range(self, start: str, client: Any) -> Any:
        return client.xrange(self.stream, min=start, max="+", count=_STREAM_BATCH)
