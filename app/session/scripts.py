"""The Lua scripts of the session (keys: ``app.session.keys``). Every check and the write it
guards happen in one script, so concurrent calls of one subject (over any number of workers
and instances) cannot both take the last unit of a limit or the last slot of a rate limit.

Event scripts take ``KEYS = SubjectKeys.events``: timeline, events, outcomes, args, shares.
"""

from __future__ import annotations

from app.redis_client import LuaScript

# KEYS: timeline, events, outcomes, args. ARGV: since_ms (exclusive), max_events, recent.
# Returns {flat [id, ms, ...] newest first (at most max_events + 1), events, outcomes, args of
# the first ``recent``}.
SNAPSHOT = LuaScript("""
local flat = redis.call('ZREVRANGEBYSCORE', KEYS[1], '+inf', '(' .. ARGV[1], 'WITHSCORES', 'LIMIT', 0,
  tonumber(ARGV[2]) + 1)
local ids = {}
for i = 1, #flat, 2 do ids[#ids + 1] = flat[i] end
if #ids == 0 then return {flat, {}, {}, {}} end
local recent = {}
for i = 1, math.min(#ids, tonumber(ARGV[3])) do recent[i] = ids[i] end
local args = {}
if #recent > 0 then args = redis.call('HMGET', KEYS[4], unpack(recent)) end
return {flat, redis.call('HMGET', KEYS[2], unpack(ids)), redis.call('HMGET', KEYS[3], unpack(ids)), args}
""")

_DROP = """
local function drop(ids)
  for first = 1, #ids, 500 do
    local chunk = {unpack(ids, first, math.min(first + 499, #ids))}
    for k = 2, 5 do redis.call('HDEL', KEYS[k], unpack(chunk)) end
    redis.call('ZREM', KEYS[1], unpack(chunk))
  end
end
"""

# KEYS: timeline, events, outcomes, args, shares. ARGV: id, now_ms, event JSON, args JSON
# ('' none), shares JSON ('' none), retention_ms, max_events, recent. Adds the event, then
# drops events older than the retention or beyond the newest max_events + 1 (the one more
# tells a snapshot that the session was cut short: ``truncated``), and the arguments
# of all but the newest ``recent``; every key lives a retention past its last write.
NOTE = LuaScript(_DROP + """
local id, now, retain = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[6])
redis.call('ZADD', KEYS[1], now, id)
redis.call('HSET', KEYS[2], id, ARGV[3])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[4], id, ARGV[4]) end
if ARGV[5] ~= '' then redis.call('HSET', KEYS[5], id, ARGV[5]) end
drop(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - retain))
drop(redis.call('ZRANGE', KEYS[1], 0, -(tonumber(ARGV[7]) + 2)))
local recent = tonumber(ARGV[8])
local older = redis.call('ZREVRANGE', KEYS[1], recent, recent + 1)
if #older > 0 then redis.call('HDEL', KEYS[4], unpack(older)) end
for k = 1, 5 do redis.call('PEXPIRE', KEYS[k], retain) end
return 1
""")

# KEYS: timeline, events, outcomes, args, shares. ARGV: id. Removes one event (a decision
# that could not be recorded was never answered).
FORGET = LuaScript(_DROP + "drop({ARGV[1]}) return 1")

# KEYS: events, outcomes. ARGV: id, outcome JSON, retention_ms. The execution report of a
# call still in the session (0: it dropped out).
SETTLE = LuaScript("""
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
""")

# KEYS: shares, then per share its limit set and the set's sum. ARGV: id, the shares JSON
# expected under id ('' = not linked to an event yet: give back unconditionally), then one
# member per share. Gives back a call's reserved units once (1), or does nothing (0: already
# given back). A member that already left its window is not in its set any more: nothing to
# give back there.
RELEASE = LuaScript("""
if ARGV[2] ~= '' then
  if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
  redis.call('HDEL', KEYS[1], ARGV[1])
end
for i = 1, (#KEYS - 1) / 2 do
  local member = ARGV[i + 2]
  if redis.call('ZREM', KEYS[2 * i], member) == 1 then
    redis.call('DECRBY', KEYS[2 * i + 1], string.match(member, ':(%d+)$'))
  end
end
return 1
""")

# KEYS: n_rate GCRA keys, then per limit its set and the set's sum. ARGV: now_ms, n_rate,
# commit ('1'|'0'), member prefix (the decision id), then per rate limit: emission_ms,
# period_ms; then per limit: window_ms, max units, units.
#
# Rate limits (GCRA): a call is over when its theoretical arrival time would lie more than a
# period ahead. Any over: {'rate_limited', index, ms to wait}, nothing written. Else (commit)
# every arrival time moves on. Limits: a set holds "<id>:<units>" by reservation time and its
# sum the units of its members, so the units in the window are the sum less the members that
# left the window (removed here, when committing). The units in the window plus this call's
# must not exceed the maximum. One over: {'limit_reached', index, units used}, no unit
# reserved (the rate limits still count the call: it got a decision). Else (commit) each set
# gets the call's member: {'admitted'}. Without commit nothing is written (a dry run).
ADMIT = LuaScript("""
local now, n_rate, commit, id = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3] == '1', ARGV[4]
local at, arrivals, worst, which = 5, {}, 0, 0
for i = 1, n_rate do
  local emission, period = tonumber(ARGV[at]), tonumber(ARGV[at + 1])
  at = at + 2
  local tat = math.max(tonumber(redis.call('GET', KEYS[i]) or '0'), now)
  arrivals[i] = tat + emission
  local over = arrivals[i] - now - period
  if over > worst then worst, which = over, i end
end
if which > 0 then return {'rate_limited', which, math.ceil(worst)} end
if commit then
  for i = 1, n_rate do redis.call('SET', KEYS[i], string.format('%.3f', arrivals[i]), 'PX', math.ceil(arrivals[i] - now)) end
end
local limits = {}
for j = 1, (#KEYS - n_rate) / 2 do
  local set, total = KEYS[n_rate + 2 * j - 1], KEYS[n_rate + 2 * j]
  local window, max, units = tonumber(ARGV[at]), tonumber(ARGV[at + 1]), ARGV[at + 2]
  at = at + 3
  local used = tonumber(redis.call('GET', total) or '0')
  local gone = redis.call('ZRANGEBYSCORE', set, '-inf', now - window)
  for _, member in ipairs(gone) do used = used - tonumber(string.match(member, ':(%d+)$')) end
  if commit and #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', set, '-inf', now - window)
    redis.call('SET', total, used)
  end
  if used + tonumber(units) > max then return {'limit_reached', j, used} end
  limits[j] = {set, total, window, units}
end
if commit then
  for _, limit in ipairs(limits) do
    redis.call('ZADD', limit[1], now, id .. ':' .. limit[4])
    redis.call('INCRBY', limit[2], limit[4])
    redis.call('PEXPIRE', limit[1], limit[3])
    redis.call('PEXPIRE', limit[2], limit[3])
  end
end
return {'admitted'}
""")
