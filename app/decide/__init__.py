"""The decide pipeline and the other calls that leave a decision record (DESIGN §2, §6).

- ``stages``: the frozen values a decide call passes through (received, authenticated,
  parsed, validated, prepared, decided) and ``Progress``, the furthest one reached.
- ``validation``: parse the body and validate the input against the tool contract.
- ``reservations``: the call's idempotency key, checked before the policy, settled after.
- ``presented``: an approval presented on the call: verified, refused, or none.
- ``policy_input``: the document the policy is asked about.
- ``approval_outcome``: after the policy: use a grant, or open a pending approval.
- ``pipeline``: ``decide()``, the ordered steps.
- ``recorder``: ``Recorder.run``: do it and record it, the one shape of every recorded call.
- ``events``: the decision record of each kind of call.
- ``answers``, ``reports``, ``resolutions``: an approver's answer, a tool service's execution
  report and an operator's resolution, each recorded like a decide call.
- ``phases``: per-phase durations; ``deps``: the collaborators, built once per worker.
"""
