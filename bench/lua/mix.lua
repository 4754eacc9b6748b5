-- The realistic decide mix, optionally paced to a fixed request rate.
--
-- CONFIG = {
--   deck = {kind, ...}             request kinds in a fixed shuffled order, cycled per thread
--   kinds = {[kind] = {method, path, headers, body, key = "fresh"|"replay"|nil,
--                      replay_keys = "k1 k2 ..."}}
--   complete = {path_prefix, headers, body}   sent for every decide answered state=reserved
--   rate = requests/s over all threads (0: as fast as possible), threads = wrk threads,
--   timeline = true to keep per-second counts and histograms,
--   conversation_calls = decide calls per conversation: "{{conversation}}" in a body becomes
--                        "c<thread>-<n>", a new n every conversation_calls calls of the thread }
--
-- Every request carries X-Request-Id "<kind>.<start µs>.<id>", echoed by the gateway, so a
-- response is matched to its kind and start time without per-connection state. The key of a
-- fresh mutating call is its <id>; when its decide answers "state":"reserved", the key is queued
-- and the thread's next request is POST <path_prefix><key>/complete.
--
-- Pacing (wrk has no rate limit, wrk2 is not packaged): each thread owns a schedule of send
-- slots `interval` µs apart; delay() hands the next slot to the connection that just became
-- free and waits until it. Latency is measured from min(slot, actual send): a request that
-- had to wait for a free connection is charged for the wait (no coordinated omission).
local kinds, deck = CONFIG.kinds, CONFIG.deck
local ndeck = #deck
local pos, seq = 0, 0
local ready = {}
local slots = {}
local interval, next_slot = 0, 0
local replay = {}
local body_parts = {}
local CONVERSATION = "{{conversation}}"

function init(args)
  pos = (tid * 37) % ndeck
  math.randomseed(tid * 7919 + math.floor(now_us()))
  for kind, k in pairs(kinds) do
    local at = k.body:find(CONVERSATION, 1, true)
    if at then
      body_parts[kind] = {k.body:sub(1, at - 1), k.body:sub(at + #CONVERSATION)}
    end
    if k.replay_keys then
      local list = {}
      for key in k.replay_keys:gmatch("%S+") do list[#list + 1] = key end
      replay[kind] = list
    end
  end
  if CONFIG.rate > 0 then
    interval = 1000000 * CONFIG.threads / CONFIG.rate
    next_slot = now_us() + (tid - 1) * interval / CONFIG.threads
  end
end

if CONFIG.rate > 0 then
  function delay()
    local slot = next_slot
    next_slot = next_slot + interval
    slots[#slots + 1] = slot
    local wait_ms = (slot - now_us()) / 1000
    if wait_ms < 1 then return 0 end
    return math.floor(wait_ms)
  end
end

local function headers(base, rid, key)
  local h = {}
  for name, value in pairs(base) do h[name] = value end
  h["X-Request-Id"] = rid
  if key then h["Idempotency-Key"] = key end
  return h
end

function request()
  local start = now_us()
  if interval > 0 then
    local slot = table.remove(slots, 1)
    if slot and slot < start then start = slot end
  end
  seq = seq + 1
  local stamp = string.format("%d", start)
  local key = table.remove(ready, 1)
  if key then
    local c = CONFIG.complete
    return wrk.format("POST", c.path_prefix .. key .. "/complete", headers(c.headers, "complete." .. stamp .. "." .. seq), c.body)
  end
  pos = pos % ndeck + 1
  local kind = deck[pos]
  local k = kinds[kind]
  local id = tostring(seq)
  local idem = nil
  if k.key == "fresh" then
    idem = string.format("bk%d-%d-%d", tid, seq, math.random(1, 999999999))
    id = idem
  elseif k.key == "replay" then
    local list = replay[kind]
    idem = list[seq % #list + 1]
  end
  local body = k.body
  local parts = body_parts[kind]
  if parts then
    local conversation = string.format("c%d-%d", tid, math.floor(seq / CONFIG.conversation_calls))
    body = parts[1] .. conversation .. parts[2]
  end
  return wrk.format(k.method, k.path, headers(k.headers, kind .. "." .. stamp .. "." .. id, idem), body)
end

function response(status, hdrs, body)
  local now = now_us()
  local rid = hdrs["X-Request-Id"] or hdrs["x-request-id"] or ""
  local kind, start, id = rid:match("^(%a+)%.(%d+)%.(.+)$")
  local decision = "-"
  if status == 200 and body then
    decision = body:match('"decision":"([%a-]+)"') or "-"
    if kind == "mutating" and body:find('"state":"reserved"', 1, true) then
      ready[#ready + 1] = id
    end
  end
  if kind then
    record(kind, status, decision, now - tonumber(start), now)
  else
    record("unknown", status, decision, nil, now)
  end
end
