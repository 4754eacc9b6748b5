"""The decision log (DESIGN §6): one append-only, hash-chained record for every decide call,
approval answer, execution report and idempotency resolution.

- ``records``: ``AuditEvent`` (appended) and ``AuditRecord`` (stored: with ``seq``,
  ``prev_hash``, ``hash``), and the chain head and checkpoint rows.
- ``queries``: filters, pages, cursors, the subject history of ``input.history``.
- ``interfaces``: ``DecisionLog`` (the writer) and ``DecisionLogReader`` (the reader).
- ``stores``: ``open_decision_log(dsn)`` / ``open_from_settings``: one store implementing both.
- ``schema``, ``sql_base``, ``sql_writer``, ``sql_reader``, ``sql_store``: the SQL shared by the
  ``dialects`` (``sqlite``, ``postgres``).
- ``chain``: sealing records, signing purge checkpoints, verifying chains.
- ``export``: JSON Lines, CSV and table output; ``commands``: ``toolgate audit ...``.
"""
