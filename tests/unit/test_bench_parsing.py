"""The benchmark's parsing and report code (the benchmark itself never runs in the suite)."""

from __future__ import annotations

import json

import pytest

from bench.report import RESULT_KEYS, build_results, check_targets, format_table, summarize
from bench.stack import metric_sum
from bench.workloads import MIX_WEIGHTS, mix_deck, unexpected
from bench.wrk import bucket_value_us, lua_literal, parse_output, percentile_us


def _wrk_stdout(stats: dict[str, int], *, requests: int = 1000, status_errors: int = 0) -> str:
    doc = {
        "requests": requests, "duration_us": 2_000_000, "bytes": 12345,
        "errors": {"connect": 0, "read": 1, "write": 0, "status": status_errors, "timeout": 2},
        "latency_us": {"p50": 1500, "p90": 3000, "p99": 9000, "p99.9": 20000, "max": 30000, "mean": 1800.5},
        "stats": stats,
    }
    return "Running 2s test @ http://127.0.0.1:1\n  1 threads and 4 connections\nBENCH_JSON " + json.dumps(doc) + "\n"


def test_lua_literal_escapes_and_nests():
    assert lua_literal({"a": [1, 2.5, True, None], "b": 'x"y\\z\n\u00e9'}) == (
        '{["a"] = {1, 2.5, true, nil}, ["b"] = "x\\034y\\092z\\010\\195\\169"}'
    )
    with pytest.raises(TypeError):
        lua_literal({1: "numeric key"})
    with pytest.raises(TypeError):
        lua_literal(float("nan"))


def test_parse_output_reads_totals_counts_histograms_and_timeline():
    run = parse_output(_wrk_stdout({
        "n|allow|200|allow": 600, "n|invalid|422|-": 20, "n|mutating|503|-": 3,
        "h|160": 10, "h|176": 5, "t|1234|mutating|503": 3, "th|1234|160": 2,
    }))
    assert run.requests == 1000 and run.rps == 500.0
    assert run.socket_errors == {"connect": 0, "read": 1, "write": 0, "status": 0, "timeout": 2}
    assert run.count(kind="allow") == 600 and run.count(status=422) == 20 and run.count() == 623
    assert run.hist == {160: 10, 176: 5}
    assert run.timeline[1234] == {"counts": {("mutating", 503): 3}, "hist": {160: 2}}


def test_parse_output_without_the_marker_fails():
    with pytest.raises(RuntimeError, match="BENCH_JSON"):
        parse_output("wrk: connection refused\n")


def test_percentiles_from_buckets():
    # bucket 160 is [1024, 1069) us; bucket 176 is [2048, 2139) us.
    hist = {160: 90, 176: 10}
    assert percentile_us(hist, 50) == pytest.approx(bucket_value_us(160))
    assert percentile_us(hist, 90) == pytest.approx(bucket_value_us(160))
    assert percentile_us(hist, 91) == pytest.approx(bucket_value_us(176))
    assert 1024 < bucket_value_us(160) < 1069
    assert percentile_us({}, 99) is None


def test_latency_falls_back_to_wrk_figures_for_fixed_runs():
    run = parse_output(_wrk_stdout({}))
    assert run.latency_ms(99) == 9.0 and run.latency_ms(99.9) == 20.0


def test_unexpected_responses_are_those_a_kind_does_not_expect():
    responses = {
        ("allow", 200, "allow"): 10, ("deny", 200, "allow"): 1, ("invalid", 422, "-"): 2,
        ("mutating", 503, "-"): 4, ("complete", 200, "-"): 5, ("unknown", 200, "-"): 1,
    }
    assert unexpected(responses) == {"deny:200:allow": 1, "mutating:503:-": 4, "unknown:200:-": 1}


def test_summarize_counts_socket_errors_and_unexpected_statuses():
    run = parse_output(_wrk_stdout({"n|allow|200|allow": 990, "n|allow|500|-": 7, "h|160": 997}, status_errors=7))
    mixed = summarize(run, check_kinds=True)
    assert mixed["errors"] == 3 + 7 and mixed["unexpected"] == {"allow:500:-": 7}
    fixed = summarize(parse_output(_wrk_stdout({}, status_errors=7)))
    assert fixed["errors"] == 3 + 7 and fixed["rps"] == 500.0


def test_mix_deck_has_the_issue_proportions():
    deck = mix_deck()
    assert len(deck) == sum(MIX_WEIGHTS.values()) == 102
    assert {kind: deck.count(kind) for kind in MIX_WEIGHTS} == MIX_WEIGHTS
    assert deck == mix_deck()  # fixed order


def _workload(rps: float, p50: float = 1.0, p99: float = 5.0, cpu_ms: float | None = 1.2) -> dict:
    return {"rps": rps, "requests": 1, "p50_ms": p50, "p90_ms": 2.0, "p99_ms": p99, "p99_9_ms": 9.0,
            "errors": 0, "unexpected": {}, "worker_cpu_ms_per_call": cpu_ms}


def test_build_results_has_every_key_ratio_and_target():
    results = build_results(
        ceiling=_workload(4000), decide=_workload(2400), mix=_workload(2000, p50=3.0, p99=12.0),
        half=_workload(1000, p99=4.0), engine={"engine_us": 60.0, "raw_engine_us": 50.0},
        rss_50k={1: 90.0, 2: 95.0}, rss_100k={1: 90.5, 2: 96.0, 3: 40.0},
    )
    assert set(RESULT_KEYS) <= set(results)
    assert results["ratio_decide"] == 0.6 and results["ratio_mix"] == 0.5
    assert results["p50_ms"] == 3.0 and results["p99_ms"] == 12.0 and results["p99_ms_half_load"] == 4.0
    assert results["engine_overhead_ratio"] == 1.2
    assert results["rss_mib"] == 96.0 and results["rss_growth_mib"] == 1.0  # pid 3 was not sampled at 50k
    assert results["worker_cpu_ms_per_decide"] == 1.2
    assert results["targets"] == {"ratio_mix": True, "worker_cpu_ms_per_decide": True, "p99_ms_half_load": True,
                                  "engine_overhead_ratio": True, "rss_mib": True, "rss_growth_mib": True}
    table = format_table(results)
    assert "(c) mix, half peak" in table and "target ratio_mix >= 0.5: 0.500 met" in table
    assert "target worker_cpu_ms_per_decide <= 1.5: 1.200 met" in table


def test_targets_missed_and_missing():
    met = check_targets({"ratio_mix": 0.3, "worker_cpu_ms_per_decide": 1.51, "p99_ms_half_load": None,
                         "engine_overhead_ratio": 2.5, "rss_mib": 150.0, "rss_growth_mib": 0.0})
    assert met == {"ratio_mix": False, "worker_cpu_ms_per_decide": False, "p99_ms_half_load": None,
                   "engine_overhead_ratio": False, "rss_mib": False, "rss_growth_mib": True}


def test_metric_sum_adds_matching_series():
    text = "\n".join([
        "# HELP toolgate_decisions_total Decisions.",
        "# TYPE toolgate_decisions_total counter",
        'toolgate_decisions_total{decision="allow",tool="readFile",version="1"} 6.0',
        'toolgate_decisions_total{decision="deny",tool="readFile",version="1"} 2.0',
        'toolgate_decisions_total_created{decision="deny",tool="readFile",version="1"} 1.7e9',
        'toolgate_errors_total{code="CONFLICT"} 3.0',
    ])
    assert metric_sum(text, "toolgate_decisions_total") == 8.0
    assert metric_sum(text, "toolgate_decisions_total", decision="deny") == 2.0
    assert metric_sum(text, "toolgate_errors_total", code="CONFLICT") == 3.0


def test_cpu_seconds_reads_utime_and_stime_of_live_processes():
    import os
    import time

    from bench.stack import cpu_seconds

    before = cpu_seconds([os.getpid(), 2**22 + 12345])  # the second pid is beyond pid_max: absent
    deadline = time.process_time() + 0.2
    while time.process_time() < deadline:
        pass
    after = cpu_seconds([os.getpid()])
    assert list(before) == [os.getpid()]
    assert 0.1 <= after[os.getpid()] - before[os.getpid()] <= 5.0


def test_phase_clock_counts_each_phase_without_the_phases_inside_it():
    import time

    from bench.phases import PhaseClock

    def burn(seconds: float) -> None:
        deadline = time.thread_time() + seconds
        while time.thread_time() < deadline:
            pass

    clock = PhaseClock()
    with clock.phase("total"):
        burn(0.02)
        with clock.phase("approval"):
            burn(0.01)
            with clock.phase("policy"):
                burn(0.03)
        with clock.phase("log"):
            burn(0.01)
    ms = {name: ns / 1e6 for name, ns in clock.ns.items()}
    assert set(ms) == {"pipeline", "approval", "policy", "record"}  # total and log under their report names
    assert 19 <= ms["pipeline"] <= 30 and 9 <= ms["approval"] <= 15 and 29 <= ms["policy"] <= 40
    assert 9 <= ms["record"] <= 20


def test_mix_weighted_weighs_the_kinds_as_the_mix_sends_them():
    from bench.phases import PHASE_ORDER, mix_weighted

    kinds = {kind: dict.fromkeys(PHASE_ORDER, 0.0) for kind in MIX_WEIGHTS}
    kinds["allow"]["policy"] = 102.0  # 60 of 102 calls
    kinds["invalid"]["policy"] = 51.0  # 2 of 102
    assert mix_weighted(kinds)["policy"] == 61.0


def test_parse_variant():
    from bench.run import Variant, parse_variant

    assert parse_variant("t2:threads=2,TOOLGATE_ENGINE_GO_MAX_PROCS=1") == Variant(
        "t2", 2, None, {"TOOLGATE_ENGINE_GO_MAX_PROCS": "1"})
    assert parse_variant("w3t2:workers=3,threads=2") == Variant("w3t2", 2, 3, {})
    assert parse_variant("baseline:") == Variant("baseline", None, None, {})
    for bad in ("no-colon", ":threads=2", "x:threads"):
        with pytest.raises(ValueError):
            parse_variant(bad)
