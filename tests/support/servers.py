"""Real servers for tests on loopback: the harnesses of ``bench.loopback`` (one copy for the
benchmark and the tests), under the names the tests import.

``free_port()`` is safe across pytest-xdist workers; ``RedisServer`` and ``GatewayProcess``
start again on a fresh port when another program took theirs (see ``bench.loopback``).
"""

from bench.loopback import GatewayProcess, RedisServer, free_port, wait_for_port

__all__ = ["GatewayProcess", "RedisServer", "free_port", "wait_for_port"]
