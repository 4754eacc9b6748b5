"""toolgate's benchmark (DESIGN §8) and its load and fault runs; never part of the test suite.

    python -m bench [--duration SECONDS] [--out FILE.json]      the benchmark (bench.run)
    python -m bench.faults soak|kill-worker|redis-outage ...    load and fault runs (bench.faults)

Everything runs on this machine, on loopback: a private Redis and the gateway under gunicorn
(``bench.stack``), load from wrk with Lua scripts (``bench.wrk``, ``bench/lua``), the mix of
``bench.workloads``, the in-process engine comparison of ``bench.engine``, and the report of
``bench.report``.
"""
