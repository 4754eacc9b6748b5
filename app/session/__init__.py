"""The session: what the gateway itself remembers of each verified subject, for the policy
(``input.session``) and for the limits it enforces (docs/session.md, DESIGN §12).

- ``keys``: where a subject's session and a tenant's rate limits live in Redis (hash-tagged,
  so every script is single-slot in a Redis Cluster).
- ``pointers``: JSON Pointers with ``*``, as contracts mark fields.
- ``events``: what one decided call leaves in the session, and what its execution report adds.
- ``view``: ``input.session`` (and ``input.history``) built from the stored events.
- ``limits``: counts and budgets (``limits``) and rate limits (``rate_limits``) as Redis units.
- ``scripts``: the Lua scripts; ``store``: ``SessionStore``, the one class that runs them.
"""
