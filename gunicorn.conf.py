"""gunicorn settings for toolgate (`toolgate serve` and `gunicorn -c gunicorn.conf.py app.wsgi:app`).

gthread workers; counts from TOOLGATE_WORKERS / TOOLGATE_THREADS, bind from TOOLGATE_BIND, one
listening socket per worker (SO_REUSEPORT) unless TOOLGATE_REUSE_PORT=false.
The app is not preloaded: each worker builds its own clients and its own embedded OPA engine
after fork (a Go runtime does not survive fork reliably).

Metrics: prometheus-client's multiprocess mode, so GET /metrics sums every worker. The library
picks its storage when it is first imported, and importing ``app.settings`` imports it
(``app`` -> ``app.pipeline`` -> ``app.metrics``), so ``PROMETHEUS_MULTIPROC_DIR`` is chosen here,
before that import: the operator's value, else a fresh private temporary directory.
``on_starting`` empties it (stale files of an earlier run would be summed in) and
``child_exit`` marks an exited worker dead for live gauges; ``on_exit`` removes the directory
if it was made here. The workers' policy status files (``TOOLGATE_POLICY_STATUS_DIR``, read by
``GET /v1/policy/status``) get the same treatment.

Start-up check: ``on_starting`` runs ``python -m app.policy.preflight`` in a child process (the
Go runtime of the OPA engine must not start in the master): policies that do not load, verify
or compile stop the gateway with exit 1 and the error on stderr, before any worker forks.
"""

import os
import tempfile

_OWN_METRICS_DIR = None
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    _OWN_METRICS_DIR = os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="toolgate-metrics-")
_OWN_STATUS_DIR = None
if not os.environ.get("TOOLGATE_POLICY_STATUS_DIR"):
    _OWN_STATUS_DIR = os.environ["TOOLGATE_POLICY_STATUS_DIR"] = tempfile.mkdtemp(prefix="toolgate-policy-status-")

from app.settings import load_settings  # noqa: E402 - after the multiprocess directory is set

_settings = load_settings()

wsgi_app = "app.wsgi:app"
bind = os.environ.get("TOOLGATE_BIND", _settings.bind)
worker_class = "gthread"
workers = _settings.workers
threads = _settings.threads
worker_connections = _settings.worker_connections
preload_app = False
# SO_REUSEPORT is for TCP listeners only (a unix socket refuses it: EOPNOTSUPP).
reuse_port = _settings.reuse_port and not bind.startswith(("unix:", "fd://"))
keepalive = 5
timeout = 30
graceful_timeout = 20
max_requests = 0
accesslog = None
errorlog = "-"
loglevel = "warning"
limit_request_field_size = 16384


def on_starting(server):
    """Master, before the workers fork: refuse a taken address (with ``reuse_port``) and
    policies that cannot be used, create the metrics directory and remove stale files."""
    if server.cfg.reuse_port:
        _refuse_taken_addresses(server)
    _refuse_unusable_policies(server)
    directory = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    os.makedirs(directory, mode=0o700, exist_ok=True)
    for name in os.listdir(directory):
        if name.endswith(".db"):
            os.remove(os.path.join(directory, name))


def _refuse_taken_addresses(server):
    """Exit 1 when a TCP address to bind is already in use, or is port 0. Each worker binds its
    own ``SO_REUSEPORT`` socket, so a taken port would otherwise crash-loop the workers (a plain
    listener) or silently share the port with another gateway (a ``SO_REUSEPORT`` one), and
    port 0 would give every worker a different random port."""
    import socket
    import sys

    for address in server.cfg.address:
        if not isinstance(address, tuple):  # a unix socket path
            continue
        if address[1] == 0:
            server.log.error("port 0 gives every worker its own random port: bind a port, or set TOOLGATE_REUSE_PORT=false")
            sys.exit(1)
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address[:2])
            except OSError as exc:
                server.log.error("cannot listen on %s port %s: %s", address[0], address[1], exc.strerror)
                sys.exit(1)


def _refuse_unusable_policies(server):
    """Exit 1 when ``app.policy.preflight`` fails (its message is already on stderr)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "app.policy.preflight"], check=False)
    if done.returncode != 0:
        server.log.error("start-up policy check failed (exit %s): not starting", done.returncode)
        sys.exit(1)


def child_exit(server, worker):
    """Master, after a worker exited: drop its live-gauge series (prometheus multiprocess) and
    its policy status file."""
    from prometheus_client import multiprocess

    from app.engine.status import remove_worker

    multiprocess.mark_process_dead(worker.pid)
    remove_worker(os.environ["TOOLGATE_POLICY_STATUS_DIR"], worker.pid)


def on_exit(server):
    """Master, on shutdown: remove the metrics and status directories if this file created them."""
    import shutil

    for directory in (_OWN_METRICS_DIR, _OWN_STATUS_DIR):
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
