"""Results of a benchmark run: the JSON document, the target checks and the printed table.

``summarize(run)`` turns a ``WrkRun`` into ``{rps, p50_ms, p90_ms, p99_ms, p99_9_ms,
requests, errors, unexpected}``; ``build_results`` assembles the document written by
``--out`` (keys listed in ``RESULT_KEYS``) and ``format_table`` prints it. Targets are those of
DESIGN §8, plus the worker CPU per decide call in the mix.
"""

from __future__ import annotations

from typing import Any

from bench.phases import format_phases
from bench.workloads import unexpected
from bench.wrk import WrkRun

RESULT_KEYS = (
    "ceiling_rps", "decide_rps", "mix_rps", "ratio_decide", "ratio_mix", "p50_ms", "p99_ms",
    "p99_ms_half_load", "worker_cpu_ms_per_decide", "engine_us", "raw_engine_us", "engine_overhead_ratio", "rss_mib", "rss_growth_mib",
)
TARGETS = {
    "ratio_mix": (">=", 0.5),
    "worker_cpu_ms_per_decide": ("<=", 1.5),
    "p99_ms_half_load": ("<=", 10.0),
    "engine_overhead_ratio": ("<=", 2.0),
    "rss_mib": ("<", 150.0),
    # "No growth": allow 2 MiB of allocator noise between 50k and 100k decisions.
    "rss_growth_mib": ("<=", 2.0),
}


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def summarize(run: WrkRun, *, check_kinds: bool = False) -> dict[str, Any]:
    """Requests/s, latency percentiles (ms) and errors of one run.

    ``errors`` counts socket errors and timeouts plus, for runs whose script tallies kinds
    (``check_kinds``), every response its kind does not expect (listed in ``unexpected``);
    for fixed-request runs, wrk's count of non-2xx/3xx responses.
    """
    socket = sum(v for k, v in run.socket_errors.items() if k != "status")
    bad = unexpected(run.responses) if check_kinds else {}
    errors = socket + (sum(bad.values()) if check_kinds else run.socket_errors.get("status", 0))
    return {
        "rps": _r(run.rps, 1),
        "requests": run.requests,
        "p50_ms": _r(run.latency_ms(50)),
        "p90_ms": _r(run.latency_ms(90)),
        "p99_ms": _r(run.latency_ms(99)),
        "p99_9_ms": _r(run.latency_ms(99.9)),
        "errors": errors,
        "unexpected": bad,
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if not a or not b else round(a / b, 3)


def check_targets(results: dict[str, Any]) -> dict[str, bool | None]:
    """``{key: met}`` for each DESIGN §8 target (None when the figure is missing)."""
    met: dict[str, bool | None] = {}
    for key, (op, limit) in TARGETS.items():
        value = results.get(key)
        if value is None:
            met[key] = None
        elif op == ">=":
            met[key] = value >= limit
        elif op == "<=":
            met[key] = value <= limit
        else:
            met[key] = value < limit
    return met


def build_results(
    *,
    ceiling: dict[str, Any],
    decide: dict[str, Any],
    mix: dict[str, Any],
    half: dict[str, Any] | None,
    engine: dict[str, float] | None,
    rss_50k: dict[int, float] | None,
    rss_100k: dict[int, float] | None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The result document: the headline keys (``RESULT_KEYS``), ``targets`` and ``workloads``.

    ``rss_*`` map worker pid -> MiB; ``rss_mib`` is the largest worker after 100k decisions and
    ``rss_growth_mib`` the largest growth of a worker present at both samples.
    """
    growth = None
    if rss_50k and rss_100k:
        common = set(rss_50k) & set(rss_100k)
        growth = max((rss_100k[p] - rss_50k[p] for p in common), default=None)
    results: dict[str, Any] = {
        "ceiling_rps": ceiling["rps"],
        "decide_rps": decide["rps"],
        "mix_rps": mix["rps"],
        "ratio_decide": _ratio(decide["rps"], ceiling["rps"]),
        "ratio_mix": _ratio(mix["rps"], ceiling["rps"]),
        "p50_ms": mix["p50_ms"],
        "p99_ms": mix["p99_ms"],
        "p99_ms_half_load": half["p99_ms"] if half else None,
        "worker_cpu_ms_per_decide": mix.get("worker_cpu_ms_per_call"),
        "engine_us": _r(engine["engine_us"], 1) if engine else None,
        "raw_engine_us": _r(engine["raw_engine_us"], 1) if engine else None,
        "engine_overhead_ratio": _ratio(engine["engine_us"], engine["raw_engine_us"]) if engine else None,
        "rss_mib": _r(max(rss_100k.values()), 1) if rss_100k else None,
        "rss_growth_mib": _r(growth, 2),
    }
    results["targets"] = check_targets(results)
    results["workloads"] = {"ceiling": ceiling, "decide": decide, "mix": mix, "mix_half_load": half}
    results["rss_by_worker_mib"] = {
        "after_50k": {str(p): _r(v, 1) for p, v in (rss_50k or {}).items()},
        "after_100k": {str(p): _r(v, 1) for p, v in (rss_100k or {}).items()},
    }
    results.update(extra or {})
    return results


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}{unit}" if value < 100 else f"{value:,.0f}{unit}"
    return f"{value}{unit}"


def format_table(results: dict[str, Any]) -> str:
    """A plain-text table of the workloads, the ratios and the targets."""
    lines = [f"{'workload':<22}{'req/s':>10}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}{'p99.9 ms':>10}{'errors':>8}"
             f"{'CPU ms/call':>13}"]
    names = {"ceiling": "(a) GET /healthz", "decide": "(b) decide allow", "mix": "(c) mix, peak",
             "mix_half_load": "(c) mix, half peak"}
    for key, label in names.items():
        w = results["workloads"].get(key)
        if w:
            lines.append(
                f"{label:<22}{_fmt(w['rps']):>10}{_fmt(w['p50_ms']):>9}{_fmt(w['p90_ms']):>9}"
                f"{_fmt(w['p99_ms']):>9}{_fmt(w['p99_9_ms']):>10}{w['errors']:>8}"
                f"{_fmt(w.get('worker_cpu_ms_per_call')):>13}"
            )
    lines.append("")
    lines.append(f"(d) engine: {_fmt(results['engine_us'])} us/eval embedded vs {_fmt(results['raw_engine_us'])} us raw")
    lines.append(f"ratio (b)/(a) {_fmt(results['ratio_decide'])}   ratio (c)/(a) {_fmt(results['ratio_mix'])}")
    n = results.get("decisions_total")
    lines.append(f"worker RSS after {n if n is not None else '100k'} decisions {_fmt(results['rss_mib'], ' MiB')}, "
                 f"growth over the second half {_fmt(results['rss_growth_mib'], ' MiB')}")
    variants = results.get("variants")
    if variants:
        base = variants[0]["mix"]
        lines.append("")
        lines.append(f"{'variant (c) mix':<22}{'req/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}{'CPU ms/call':>13}"
                     f"{'CPU ratio':>11}{'RSS MiB':>9}")
        for v in variants:
            m = v["mix"]
            cpu_ratio = _ratio(m.get("worker_cpu_ms_per_call"), base.get("worker_cpu_ms_per_call"))
            lines.append(f"{v['name']:<22}{_fmt(m['rps']):>10}{_fmt(m['p50_ms']):>9}{_fmt(m['p99_ms']):>9}"
                         f"{m['errors']:>8}{_fmt(m.get('worker_cpu_ms_per_call')):>13}{_fmt(cpu_ratio):>11}"
                         f"{_fmt(v.get('rss_mib')):>9}")
    anchors = results.get("anchors")
    if anchors:
        bare, side = anchors["bare_opa"], anchors["sidecar_mix"]
        lines.append("")
        lines.append(f"{'anchor':<22}{'req/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}{'worker CPU ms':>15}{'OPA CPU ms':>12}")
        lines.append(f"{'bare opa run --server':<22}{_fmt(bare['rps']):>10}{_fmt(bare['p50_ms']):>9}{_fmt(bare['p99_ms']):>9}"
                     f"{bare['errors']:>8}{'-':>15}{_fmt(bare.get('opa_cpu_ms_per_call')):>12}")
        lines.append(f"{'(c) mix, ENGINE=opa':<22}{_fmt(side['rps']):>10}{_fmt(side['p50_ms']):>9}{_fmt(side['p99_ms']):>9}"
                     f"{side['errors']:>8}{_fmt(side.get('worker_cpu_ms_per_call')):>15}"
                     f"{_fmt(side.get('opa_cpu_ms_per_call')):>12}")
        lines.append(f"ratios: mix ENGINE=opa / mix embedded {_fmt(anchors['ratio_sidecar_mix_to_embedded_mix'])}, "
                     f"(b) embedded / bare OPA {_fmt(anchors['ratio_embedded_decide_to_bare_opa'])}, "
                     f"(c) embedded / bare OPA {_fmt(anchors['ratio_embedded_mix_to_bare_opa'])}")
    phases = results.get("phases_us")
    if phases:
        lines.append("")
        lines.append(format_phases(phases))
    lines.append("")
    for key, met in results["targets"].items():
        op, limit = TARGETS[key]
        verdict = "n/a" if met is None else ("met" if met else "MISSED")
        lines.append(f"target {key} {op} {limit:g}: {_fmt(results.get(key))} {verdict}")
    return "\n".join(lines)
