"""Idempotency (DESIGN §4): a retried call never executes twice.

- ``keys``: the key of a decide call (header or contract field) and its ``Scope``.
- ``store``: ``IdempotencyStore``, the Redis state machine (inspect, claim, complete, fail, resolve).
- ``scripts``: its Lua scripts, one per state change.
- ``executions``: the tool service's reports (complete, fail).
"""
