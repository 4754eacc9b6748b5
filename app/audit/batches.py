"""Group commit: one writer per process, and the items that arrive while it writes go together.

``Batches(commit).submit(item)`` queues ``item`` and waits for its result. A caller that finds
no batch being written becomes the writer: it takes every queued item (its own and those that
arrived meanwhile) and hands them to ``commit`` in one call, i.e. one transaction and one
``fsync``; the others sleep until their batch is done, and the first of them still queued when
the writer finishes writes the next batch. No thread of its own: the writer is always a caller,
so a call that arrives alone is written at once, on its own thread, without a hand-over.

``commit(items)`` returns one result per item, in order, or raises: then every item of that
batch gets the exception (none of them was written). Build after fork.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class _Slot(Generic[T, R]):
    """One queued item, then its result or the exception that stopped its batch."""

    __slots__ = ("done", "error", "item", "result")

    def __init__(self, item: T) -> None:
        self.item = item
        self.result: R | None = None
        self.error: BaseException | None = None
        self.done = False


class Batches(Generic[T, R]):
    """Group commit of items through ``commit`` (see the module docstring). Thread-safe."""

    def __init__(self, commit: Callable[[Sequence[T]], Sequence[R]]) -> None:
        self._commit = commit
        self._changed = threading.Condition()
        self._queue: list[_Slot[T, R]] = []
        self._writing = False

    def submit(self, item: T) -> R:
        """Write ``item`` with the batch it joins; returns its result once that batch is
        committed. Raises what ``commit`` raised for that batch."""
        slot: _Slot[T, R] = _Slot(item)
        with self._changed:
            self._queue.append(slot)
            while self._writing and not slot.done:
                self._changed.wait()
            if slot.done:
                return self._outcome(slot)
            self._writing = True
            batch, self._queue = self._queue, []
        try:
            self._write(batch)
        finally:
            with self._changed:
                self._writing = False
                self._changed.notify_all()
        return self._outcome(slot)

    def _write(self, batch: list[_Slot[T, R]]) -> None:
        try:
            results = self._commit([slot.item for slot in batch])
        except BaseException as exc:  # noqa: BLE001 - raised to every caller of the batch, the writer too
            for slot in batch:
                slot.error, slot.done = exc, True
            return
        for slot, result in zip(batch, results, strict=True):
            slot.result, slot.done = result, True

    @staticmethod
    def _outcome(slot: _Slot[T, R]) -> R:
        if slot.error is not None:
            raise slot.error
        return slot.result  # type: ignore[return-value]
