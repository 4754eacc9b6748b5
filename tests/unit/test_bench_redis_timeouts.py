"""bench.redis_timeouts reads the gateway's ``toolgate_redis_command_seconds`` exposition: the
buckets of every worker summed, the round trips between two scrapes counted over each bound."""

from __future__ import annotations

from bench.redis_timeouts import over_bounds, round_trip_buckets

#: Two workers' buckets, as prometheus-client's multiprocess exposition prints them.
BEFORE = "\n".join([
    "# HELP toolgate_redis_command_seconds Duration of each Redis round trip.",
    "# TYPE toolgate_redis_command_seconds histogram",
    'toolgate_redis_command_seconds_bucket{le="0.005",pid="1"} 8.0',
    'toolgate_redis_command_seconds_bucket{le="0.1",pid="1"} 9.0',
    'toolgate_redis_command_seconds_bucket{le="0.5",pid="1"} 10.0',
    'toolgate_redis_command_seconds_bucket{le="+Inf",pid="1"} 10.0',
    'toolgate_redis_command_seconds_bucket{le="0.005",pid="2"} 1.0',
    'toolgate_redis_command_seconds_bucket{le="0.1",pid="2"} 2.0',
    'toolgate_redis_command_seconds_bucket{le="0.5",pid="2"} 2.0',
    'toolgate_redis_command_seconds_bucket{le="+Inf",pid="2"} 2.0',
    "",
])


def test_buckets_are_summed_over_the_workers():
    assert round_trip_buckets(BEFORE) == {0.005: 9.0, 0.1: 11.0, 0.5: 12.0, float("inf"): 12.0}


def test_the_round_trips_between_two_scrapes_are_counted_over_each_bound():
    before = {0.005: 9.0, 0.1: 11.0, 0.5: 12.0, float("inf"): 12.0}
    after = {0.005: 99.0, 0.1: 105.0, 0.5: 111.0, float("inf"): 112.0}
    counted = over_bounds(before, after)
    assert counted["round_trips"] == 100
    assert counted["over_ms"]["5"] == 10 and counted["over_ms"]["100"] == 6 and counted["over_ms"]["500"] == 1
    assert counted["per_million_over_ms"]["500"] == 10_000.0
