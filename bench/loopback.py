"""Local servers on loopback, for the benchmark and the test suite: free ports, a redis-server
process and the gateway under gunicorn.

    port = free_port()                          # a port nobody listens on, not handed out before
    wait_for_port(port)                         # until something accepts TCP connections there
    redis = RedisServer(workdir).start()        # redis-server, no persistence; .url, .port
    redis.stop(); redis.start(); redis.restart_empty(); redis.pause(); redis.resume()
    gateway = GatewayProcess(env, workers=2).start()   # gunicorn -c gunicorn.conf.py; .url
    gateway.stop()

Ports. ``free_port()`` picks at random in 15000-32767: below the kernel's ephemeral range
(32768-60999 by default), where every outgoing connection takes its local port, and above the
usual fixed service ports (5432, 6379, 8080, 8181). Each pytest-xdist worker (``gw0``, ``gw1``,
...) draws from its own slice of that range, so parallel workers never pick the same port, and
a process never hands out a port twice. Another program may still take a port between the pick
and the bind, so the process harnesses here start their server on a fresh port again when it
could not bind (``Address already in use``), up to ``BIND_ATTEMPTS`` times, and only count a
server as started once *their own* process listens on the port (``listens_on``), not merely
something.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import requests

PROJECT_ROOT = Path(__file__).resolve().parent.parent

#: Ports ``free_port`` picks from: [first, last], below the kernel's default ephemeral range.
PORT_RANGE = (15_000, 32_767)
#: Slices of ``PORT_RANGE``; pytest-xdist worker ``gwN`` picks from slice ``N % PORT_SLICES``.
PORT_SLICES = 8
#: How often a harness starts its server on a fresh port after ``Address already in use``.
BIND_ATTEMPTS = 5

_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()
_random = random.Random()  # its own generator: tests that seed ``random`` do not repeat ports


class AddressInUse(RuntimeError):
    """The server could not bind its port (another program took it after ``free_port``)."""


def _slice() -> range:
    first, last = PORT_RANGE
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) % PORT_SLICES if worker.startswith("gw") and worker[2:].isdigit() else None
    if index is None:
        return range(first, last + 1)
    size = (last - first + 1) // PORT_SLICES
    return range(first + index * size, first + (index + 1) * size)


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(*, also_free_at: int | None = None) -> int:
    """A TCP port on 127.0.0.1 that nothing was bound to a moment ago and that this process has
    not handed out before (see the module docstring). ``also_free_at=10000`` also requires
    ``port + 10000`` to be free, and reserves it (a Redis Cluster node's bus port).

    Raises ``RuntimeError`` if no port is found in 1000 tries."""
    candidates = _slice()
    for _ in range(1000):
        port = _random.choice(candidates)
        ports = [port] if also_free_at is None else [port, port + also_free_at]
        with _handed_out_lock:
            if any(p in _handed_out or p > 65_535 for p in ports):
                continue
            if all(_bindable(p) for p in ports):
                _handed_out.update(ports)
                return port
    raise RuntimeError(f"no free loopback port in {candidates}")


def wait_for_port(port: int, timeout_s: float = 10.0) -> None:
    """Block until something accepts TCP connections on 127.0.0.1:``port``; raises
    ``TimeoutError``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout_s} s")


def tcp_inodes(port: int, state: str = "0A") -> set[str]:
    """Inodes of the TCP sockets on local port ``port`` in ``state`` (/proc/net/tcp{,6}; the
    kernel's hex state: ``0A`` LISTEN, ``01`` ESTABLISHED)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == state:
                inodes.add(fields[9])
    return inodes


def socket_inodes(pid: int) -> set[str]:
    """Inodes of the sockets that process ``pid`` holds open (its /proc/<pid>/fd links)."""
    inodes: set[str] = set()
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    return inodes


def listens_on(pid: int, port: int) -> bool:
    """True when process ``pid`` itself holds a listening TCP socket on ``port``."""
    return bool(tcp_inodes(port) & socket_inodes(pid))


def child_pids(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc/*/stat), sorted."""
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Field 4 is the parent pid; the command name (field 2) may hold spaces and parentheses.
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:
            children.append(int(entry.name))
    return sorted(children)


def _stop_process(proc: subprocess.Popen, timeout_s: float) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class RedisServer:
    """A ``redis-server`` (Debian's) on a loopback port, persistence off; its log is
    ``workdir/redis-<port>.log``.

    ``port=None`` picks a free port, and another one if that is taken before the first start; a
    given port, and the port of a server that started once, stay as they are (a restarted
    server keeps its address). ``cluster=True`` starts the node with cluster mode on (its bus port is
    ``port + 10000``). ``stop()``/``start()``/``restart_empty()``/``pause()``/``resume()`` are for
    fault runs; ``start()`` raises ``RuntimeError`` with the log tail when Redis does not come up.
    """

    BUS_OFFSET = 10_000

    def __init__(self, workdir: Path, *, port: int | None = None, cluster: bool = False) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (scripts/install.sh installs it)")
        self.binary = binary
        self.workdir = Path(workdir)
        self.cluster = cluster
        self._port_settled = port is not None
        self.port = port if port is not None else self._pick_port()
        self.proc: subprocess.Popen | None = None

    def _pick_port(self) -> int:
        return free_port(also_free_at=self.BUS_OFFSET if self.cluster else None)

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.workdir / f"redis-{self.port}.log"

    def start(self, timeout_s: float = 10.0) -> RedisServer:
        """Start redis-server and wait until this process listens on its port."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        for attempt in range(BIND_ATTEMPTS):
            try:
                self._start_once(timeout_s)
                self._port_settled = True
                return self
            except AddressInUse:
                if self._port_settled or attempt == BIND_ATTEMPTS - 1:
                    raise
                self.port = self._pick_port()
        raise AssertionError("unreachable")

    def _start_once(self, timeout_s: float) -> None:
        args = [
            self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.workdir),
            "--save", "", "--appendonly", "no", "--protected-mode", "yes", "--loglevel", "warning",
            "--logfile", str(self.log_path),
        ]
        if self.cluster:
            args += ["--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{self.port}.conf",
                     "--cluster-node-timeout", "2000"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while not listens_on(self.proc.pid, self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self._fail_start()
            time.sleep(0.02)

    def _fail_start(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is None:
            _stop_process(self.proc, 5)
        self.proc = None
        log = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        if "Address already in use" in log:
            raise AddressInUse(f"redis-server could not bind 127.0.0.1:{self.port}")
        raise RuntimeError(f"redis-server did not start on 127.0.0.1:{self.port}:\n{log[-2000:]}")

    def stop(self) -> None:
        """Terminate Redis (its data is lost: persistence is off)."""
        if self.proc is not None:
            _stop_process(self.proc, 5)
            self.proc = None

    def restart_empty(self) -> None:
        """Stop and start again on the same port, with no data."""
        self.stop()
        self.start()

    def pause(self) -> None:
        """Freeze Redis with SIGSTOP: connections stay open, commands time out."""
        assert self.proc is not None, "redis-server is not running"
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Undo ``pause`` with SIGCONT."""
        assert self.proc is not None, "redis-server is not running"
        self.proc.send_signal(signal.SIGCONT)


class GatewayProcess:
    """The gateway under gunicorn (``gunicorn -c gunicorn.conf.py`` in the project root) on a free
    loopback port.

    The environment is ``base_env`` (default: this process's), then ``TOOLGATE_LOG_LEVEL=WARNING``,
    then ``env`` (the ``TOOLGATE_*`` settings of this gateway), then ``TOOLGATE_BIND``,
    ``TOOLGATE_WORKERS`` and ``TOOLGATE_THREADS`` from the arguments. gunicorn's output goes to
    ``log_path`` (appended) or to a temporary file; the last 2000 characters are in the error
    when the start fails.

    ``start()`` returns once every worker listens on the port and ``/readyz`` answered 200
    ``readyz_probes`` times in a row. It starts again on another port when the master refuses a
    taken one (see the module docstring), and raises ``RuntimeError`` when gunicorn exits or
    ``TimeoutError`` when it is not ready in time.
    """

    def __init__(self, env: Mapping[str, str], *, workers: int = 2, threads: int = 4,
                 base_env: Mapping[str, str] | None = None, log_path: Path | None = None) -> None:
        self.workers = workers
        self.threads = threads
        self.port = free_port()
        self._env = {**(os.environ if base_env is None else base_env), "TOOLGATE_LOG_LEVEL": "WARNING", **env}
        self._log_path = log_path
        self._log: Path | None = None  # the file gunicorn writes to in this run
        self._temporary_log: Path | None = None  # made when no log_path was given; removed by stop()
        self.proc: subprocess.Popen | None = None
        #: The exit status of the last gunicorn run, once stopped (``None`` while it runs).
        self.returncode: int | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """The environment of the gunicorn process (this gateway's bind, workers and threads)."""
        return {
            **self._env,
            "TOOLGATE_BIND": f"127.0.0.1:{self.port}",
            "TOOLGATE_WORKERS": str(self.workers),
            "TOOLGATE_THREADS": str(self.threads),
        }

    @property
    def master_pid(self) -> int:
        assert self.proc is not None, "gateway not started"
        return self.proc.pid

    def worker_pids(self) -> list[int]:
        """The pids of the gunicorn workers alive now."""
        return child_pids(self.master_pid)

    def start(self, timeout_s: float = 60.0, *, readyz_probes: int = 1) -> GatewayProcess:
        for attempt in range(BIND_ATTEMPTS):
            try:
                self._start_once(timeout_s, readyz_probes)
                return self
            except AddressInUse:
                if attempt == BIND_ATTEMPTS - 1:
                    raise
                self.port = free_port()
        raise AssertionError("unreachable")

    def _start_once(self, timeout_s: float, readyz_probes: int) -> None:
        if self._log_path is None and self._temporary_log is None:
            handle, name = tempfile.mkstemp(prefix="toolgate-gunicorn-", suffix=".log")
            os.close(handle)
            self._temporary_log = Path(name)
        self._log = self._log_path or self._temporary_log
        assert self._log is not None
        self.returncode = None
        # gunicorn holds its own copy of the descriptor: this process closes the file at once.
        with open(self._log, "ab" if self._log_path is not None else "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gunicorn", "-c", str(PROJECT_ROOT / "gunicorn.conf.py")],
                cwd=PROJECT_ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout_s
        with requests.Session() as http:
            http.trust_env = False  # loopback only: never a proxy
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    output = self.output()
                    self.stop()
                    if f"port {self.port}: Address already in use" in output:
                        raise AddressInUse(f"gunicorn could not bind 127.0.0.1:{self.port}")
                    raise RuntimeError(f"the gateway exited during start:\n{output[-2000:]}")
                if self._all_workers_listen() and self._ready(http, readyz_probes):
                    return
                time.sleep(0.1)
        output = self.output()
        self.stop()
        raise TimeoutError(f"the gateway did not become ready in {timeout_s} s:\n{output[-2000:]}")

    def _all_workers_listen(self) -> bool:
        workers = self.worker_pids()
        return len(workers) == self.workers and all(listens_on(pid, self.port) for pid in workers)

    def _ready(self, http: requests.Session, probes: int) -> bool:
        try:
            return all(http.get(self.url + "/readyz", timeout=5).status_code == 200 for _ in range(probes))
        except requests.RequestException:
            return False

    def output(self) -> str:
        """What gunicorn wrote so far (stdout and stderr) in this run."""
        if self._log is None or not self._log.exists():
            return ""
        return self._log.read_text(errors="replace")

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM (graceful), then SIGKILL after ``timeout_s``."""
        if self.proc is not None:
            _stop_process(self.proc, timeout_s)
            self.returncode = self.proc.returncode
            self.proc = None
        if self._temporary_log is not None:
            self._temporary_log.unlink(missing_ok=True)
            self._temporary_log = None
        self._log = None
