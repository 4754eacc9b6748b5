"""Approvals and grants (DESIGN §5).

- ``records``: an approval's request, votes, answer and state; the call it is bound to; the
  standing (scoped) grants an answer may leave.
- ``store``: the Redis layout and its Lua scripts.
- ``service``: ``ApprovalService``: open, list, show, wait for and answer approvals (quorum,
  edits, scopes, who may answer); check a presented grant against its signature and the stored
  record; find standing grants; expire and escalate.
- ``presented``: the outcomes of a presented approval (verified, standing, or rejected with a
  stable reason).
- ``grants``: the signed grant token (``tgg1.<kid>.<payload>.<mac>``).
- ``scoped``: the constraints of a scoped grant on a call's input.
- ``webhooks``: signed webhooks on approval events, delivered with retries.
- ``sweeper``: the thread that expires and escalates on time.
"""
