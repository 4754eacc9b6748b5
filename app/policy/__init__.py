"""Policy tooling: bundles (``bundle``), bundle signatures (``signing``), the Rego test runners
(``testing``: embedded; ``opa_cli``: the ``opa`` binary), pushing to a running OPA (``push``), the
pinned toolchain (``toolchain``) and the ``toolgate policy`` commands (``commands``).

Production code (the engines) imports ``bundle`` and ``signing`` only, never the test runners.
"""
