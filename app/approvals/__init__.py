"""Approvals and grants (DESIGN §5).

- ``records``: an approval's request, answer and state; the call it is bound to.
- ``store``: the Redis layout and its Lua scripts.
- ``service``: ``ApprovalService``: open, list, show and answer approvals; check a presented grant.
- ``presented``: the outcomes of a presented approval (verified, or rejected with a stable reason).
- ``grants``: the signed grant token (``tgg1.<kid>.<payload>.<mac>``).
"""
