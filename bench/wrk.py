"""Driving wrk and reading what it reports.

``build_script(name, config)`` writes one wrk script: ``local CONFIG = <config as a Lua
literal>`` followed by ``lua/common.lua`` and ``lua/<name>.lua``. ``run_wrk`` runs wrk on
loopback with it and returns a ``WrkRun`` parsed from the script's ``BENCH_JSON {...}`` line
(see ``lua/common.lua`` for the flat ``stats`` keys). Latencies are microseconds throughout;
histogram buckets hold ``[2^(b/16), 2^((b+1)/16))`` µs.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LUA_DIR = Path(__file__).resolve().parent / "lua"
_MARKER = "BENCH_JSON "


class WrkError(RuntimeError):
    """wrk is missing, failed, or printed no ``BENCH_JSON`` line."""


def lua_literal(value: Any) -> str:
    """``value`` (dict with str keys, list, tuple, str, int, float, bool, None) as a Lua literal.

    Strings are written with decimal escapes for anything outside printable ASCII, so the
    result is plain ASCII. Raises ``TypeError`` for other types and non-finite floats.
    """
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError("non-finite float")
        return repr(value)
    if isinstance(value, str):
        out = []
        for byte in value.encode("utf-8"):
            ch = chr(byte)
            if ch in '"\\' or not 32 <= byte < 127:
                out.append(f"\\{byte:03d}")
            else:
                out.append(ch)
        return '"' + "".join(out) + '"'
    if isinstance(value, (list, tuple)):
        return "{" + ", ".join(lua_literal(v) for v in value) + "}"
    if isinstance(value, dict):
        items = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError("Lua table keys must be strings")
            items.append(f"[{lua_literal(key)}] = {lua_literal(item)}")
        return "{" + ", ".join(items) + "}"
    raise TypeError(f"cannot write {type(value).__name__} as Lua")


def build_script(name: str, config: Mapping[str, Any], directory: Path) -> Path:
    """Write ``<directory>/<name>.lua`` (config + common.lua + lua/<name>.lua); returns its path."""
    text = "local CONFIG = " + lua_literal(dict(config)) + "\n"
    text += (LUA_DIR / "common.lua").read_text() + "\n" + (LUA_DIR / f"{name}.lua").read_text()
    path = directory / f"{name}.lua"
    path.write_text(text)
    return path


def bucket_value_us(bucket: int) -> float:
    """The geometric middle of histogram bucket ``bucket`` in µs."""
    return 2 ** ((bucket + 0.5) / 16)


def percentile_us(hist: Mapping[int, int], q: float) -> float | None:
    """The ``q``-th percentile (0-100) of a bucket histogram in µs, None when it is empty."""
    total = sum(hist.values())
    if total == 0:
        return None
    rank = max(1, math.ceil(total * q / 100))
    seen = 0
    for bucket in sorted(hist):
        seen += hist[bucket]
        if seen >= rank:
            return bucket_value_us(bucket)
    return bucket_value_us(max(hist))  # pragma: no cover - unreachable: seen reaches total


def merge_hists(hists: Iterable[Mapping[int, int]]) -> dict[int, int]:
    """Sum bucket histograms."""
    merged: dict[int, int] = {}
    for hist in hists:
        for bucket, n in hist.items():
            merged[bucket] = merged.get(bucket, 0) + n
    return merged


@dataclass
class WrkRun:
    """One wrk run: totals, wrk's own latency percentiles, and the script's counters.

    ``responses[(kind, status, decision)]`` counts responses; ``hist`` is the script's latency
    histogram (paced runs: from the scheduled slot); ``timeline[second]`` holds
    ``{"counts": {(kind, status): n}, "hist": {bucket: n}}`` per monotonic second.
    """

    requests: int
    duration_s: float
    socket_errors: dict[str, int]
    wrk_latency_us: dict[str, float]
    responses: dict[tuple[str, int, str], int] = field(default_factory=dict)
    hist: dict[int, int] = field(default_factory=dict)
    timeline: dict[int, dict[str, dict]] = field(default_factory=dict)

    @property
    def rps(self) -> float:
        """Completed requests per second."""
        return self.requests / self.duration_s if self.duration_s > 0 else 0.0

    def count(self, kind: str | None = None, status: int | None = None, decision: str | None = None) -> int:
        """Responses matching every given field."""
        return sum(
            n
            for (k, s, d), n in self.responses.items()
            if (kind is None or k == kind) and (status is None or s == status) and (decision is None or d == decision)
        )

    def latency_ms(self, q: float) -> float | None:
        """Percentile ``q`` in ms from the script's histogram, else from wrk's own figures."""
        if self.hist:
            value = percentile_us(self.hist, q)
            return None if value is None else value / 1000
        key = {50: "p50", 90: "p90", 99: "p99", 99.9: "p99.9"}.get(q)
        return self.wrk_latency_us[key] / 1000 if key else None


def parse_output(stdout: str) -> WrkRun:
    """The ``WrkRun`` of wrk's stdout; raises ``WrkError`` when there is no ``BENCH_JSON`` line."""
    line = next((ln for ln in stdout.splitlines() if ln.startswith(_MARKER)), None)
    if line is None:
        raise WrkError("wrk printed no BENCH_JSON line")
    data = json.loads(line[len(_MARKER):])
    run = WrkRun(
        requests=int(data["requests"]),
        duration_s=float(data["duration_us"]) / 1e6,
        socket_errors={k: int(v) for k, v in data["errors"].items()},
        wrk_latency_us={k: float(v) for k, v in data["latency_us"].items() if v is not None},
    )
    for key, n in data["stats"].items():
        parts = key.split("|")
        if parts[0] == "n":
            run.responses[(parts[1], int(parts[2]), parts[3])] = int(n)
        elif parts[0] == "h":
            run.hist[int(parts[1])] = int(n)
        elif parts[0] == "t":
            slot = run.timeline.setdefault(int(parts[1]), {"counts": {}, "hist": {}})
            slot["counts"][(parts[2], int(parts[3]))] = int(n)
        elif parts[0] == "th":
            slot = run.timeline.setdefault(int(parts[1]), {"counts": {}, "hist": {}})
            slot["hist"][int(parts[2])] = int(n)
    return run


def ensure_wrk() -> str:
    """The path of the wrk binary; raises ``WrkError`` with the install hint when missing."""
    path = shutil.which("wrk")
    if path is None:
        raise WrkError("wrk is not installed: apt-get install wrk (scripts/install.sh --bench)")
    return path


def start_wrk(
    url: str,
    script: Path,
    *,
    duration_s: float,
    connections: int,
    threads: int = 1,
    timeout_s: float = 5.0,
) -> subprocess.Popen:
    """Start wrk against ``url`` (loopback only) for ``duration_s`` seconds; see ``wait_wrk``.

    Raises ``ValueError`` for a non-loopback URL and ``WrkError`` when wrk is missing.
    """
    if not url.startswith(("http://127.", "http://localhost", "http://[::1]")):
        raise ValueError("the benchmark only targets loopback addresses")
    argv = [
        ensure_wrk(), "-t", str(threads), "-c", str(max(connections, threads)),
        "-d", f"{max(1, round(duration_s))}s", "--timeout", f"{timeout_s:g}s", "-s", str(script), url,
    ]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_wrk(proc: subprocess.Popen, timeout_s: float) -> WrkRun:
    """Wait for a wrk started by ``start_wrk`` and parse its report; raises ``WrkError``."""
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise WrkError("wrk did not finish in time") from None
    except BaseException:  # Ctrl-C or SIGTERM: do not leave wrk running
        proc.kill()
        proc.wait()
        raise
    if proc.returncode != 0:
        raise WrkError(f"wrk exited {proc.returncode}: {stderr.strip()[:500]}")
    return parse_output(stdout)


def run_wrk(url: str, script: Path, *, duration_s: float, connections: int, threads: int = 1,
            timeout_s: float = 5.0) -> WrkRun:
    """Run wrk to completion (``start_wrk`` then ``wait_wrk``)."""
    proc = start_wrk(url, script, duration_s=duration_s, connections=connections, threads=threads, timeout_s=timeout_s)
    return wait_wrk(proc, duration_s + 60)
