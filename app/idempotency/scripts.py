"""The Lua scripts of the idempotency state machine: every state change is one script, so the
check and the write happen in Redis atomically; complete, fail and re-claim compare-and-set on
the owner token. Nothing is read in Python and then written.

Keys of every script: ``KEYS[1]`` the record hash, ``KEYS[2]`` the lease (``Scope.redis_keys``).
"""

from __future__ import annotations

from app.redis_client import LuaScript

_CLASSIFY = """
local function classify(record, lease, fp, retry_safe)
  local f = redis.call('HMGET', record, 'state', 'fp', 'result', 'reason')
  if not f[1] then return {'fresh'} end
  if f[2] ~= fp then return {'mismatch'} end
  if f[1] == 'processing' then
    local ttl = redis.call('PTTL', lease)
    if ttl > 0 then return {'processing', ttl} end
    if retry_safe == '1' then return {'reclaimable'} end
    return {'unknown'}
  end
  if f[1] == 'completed' then return {'completed', f[3]} end
  return {'failed', f[4]}
end
"""

# KEYS: record, lease. ARGV: fingerprint, retry_safe ('1'|'0').
INSPECT = LuaScript(_CLASSIFY + "return classify(KEYS[1], KEYS[2], ARGV[1], ARGV[2])")

# KEYS: record, lease. ARGV: fingerprint, retry_safe, token, lease_ms, retention_ms, now_ms,
# subject, tool, version, decision id of the reserving call ('' = none).
# A free or re-claimable record becomes 'processing' for ``token``.
CLAIM = LuaScript(_CLASSIFY + """
local c = classify(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
if c[1] ~= 'fresh' and c[1] ~= 'reclaimable' then return c end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'state', 'processing', 'fp', ARGV[1], 'token', ARGV[3], 'subject', ARGV[7],
  'tool', ARGV[8], 'version', ARGV[9], 'reserved_at_ms', ARGV[6], 'decision', ARGV[10] or '')
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[4]) + tonumber(ARGV[5]))
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
return {'reserved'}
""")

# Replies of COMPLETE and FAIL end with the decision id of the reserving call ('' when unknown).
_OWNED = """
local f = redis.call('HMGET', KEYS[1], 'state', 'subject', 'token', 'result', 'reason', 'decision')
if not f[1] or f[2] ~= ARGV[1] then return {'not_found'} end
if ARGV[2] ~= '' and ARGV[2] ~= f[3] then return {'stale'} end
local reserved_by = f[6] or ''
"""

# KEYS: record, lease. ARGV: subject, token ('' = the current reservation), result JSON,
# retention_ms, now_ms. Repeating the same report is answered like the first one.
COMPLETE = LuaScript(_OWNED + """
if f[1] == 'completed' and f[4] == ARGV[3] then return {'completed', redis.call('PTTL', KEYS[1]), reserved_by} end
if f[1] ~= 'processing' then return {'settled', f[1]} end
redis.call('HSET', KEYS[1], 'state', 'completed', 'result', ARGV[3], 'settled_at_ms', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('DEL', KEYS[2])
return {'completed', tonumber(ARGV[4]), reserved_by}
""")

# KEYS: record, lease. ARGV: subject, token, retryable ('1'|'0'), reason, retention_ms, now_ms.
# The reply's fourth element is 1 when the report came while the reservation's lease was still
# running (the lease key holds its token), else 0: a late or repeated report (it gives back
# nothing, docs/session.md).
FAIL = LuaScript(_OWNED + """
if f[1] == 'failed' and ARGV[3] == '0' and f[5] == ARGV[4] then return {'failed', redis.call('PTTL', KEYS[1]), reserved_by, 0} end
if f[1] ~= 'processing' then return {'settled', f[1]} end
local in_lease = 0
if redis.call('GET', KEYS[2]) == f[3] then in_lease = 1 end
if ARGV[3] == '1' then
  redis.call('DEL', KEYS[1], KEYS[2])
  return {'released', 0, reserved_by, in_lease}
end
redis.call('HSET', KEYS[1], 'state', 'failed', 'reason', ARGV[4], 'settled_at_ms', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('DEL', KEYS[2])
return {'failed', tonumber(ARGV[5]), reserved_by, in_lease}
""")

# KEYS: record, lease. ARGV: resolution ('completed'|'released'), retention_ms, now_ms.
RESOLVE = LuaScript("""
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return {'not_found'} end
if state == 'processing' then
  local ttl = redis.call('PTTL', KEYS[2])
  if ttl > 0 then return {'in_flight', ttl} end
end
if ARGV[1] == 'released' then
  if state == 'completed' and redis.call('HGET', KEYS[1], 'resolved_by') ~= 'operator' then
    return {'completed_before'}
  end
  redis.call('DEL', KEYS[1], KEYS[2])
  return {'released'}
end
if state ~= 'completed' then
  redis.call('HSET', KEYS[1], 'state', 'completed', 'result', 'null', 'resolved_by', 'operator', 'settled_at_ms', ARGV[3])
  redis.call('HDEL', KEYS[1], 'reason')
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {'completed'}
""")
