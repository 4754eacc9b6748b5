"""toolgate's benchmark (DESIGN §8) and its load and fault runs; never part of the test suite.

    python -m bench [--duration SECONDS] [--out FILE.json]      the benchmark (bench.run)
    python -m bench.faults soak|kill-worker|redis-outage ...    load and fault runs (bench.faults)
    python -m bench.phases --standalone                         CPU per phase of a decide call
    python -m bench.compare --before REV                        that breakdown, before and after

Everything runs on this machine, on loopback: a private Redis and the gateway under gunicorn
(``bench.stack``), load from wrk with Lua scripts (``bench.wrk``, ``bench/lua``), the mix of
``bench.workloads``, the in-process engine comparison of ``bench.engine``, the per-phase CPU
driver of ``bench.phases``, the anchors of ``bench.anchors`` (a bare OPA server, the OPA
sidecar) and the report of ``bench.report``.
"""
