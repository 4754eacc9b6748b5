"""A real gateway process for tests: gunicorn with gunicorn.conf.py on a free loopback port
(``bench.loopback.GatewayProcess``; the environment is this process's plus the given
``TOOLGATE_*`` settings)."""

from bench.loopback import PROJECT_ROOT, GatewayProcess

__all__ = ["PROJECT_ROOT", "GatewayProcess"]
