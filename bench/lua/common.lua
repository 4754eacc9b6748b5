-- Shared part of every bench wrk script (prepended by bench/wrk.py after `local CONFIG = {...}`).
--
-- Owns: a monotonic microsecond clock (LuaJIT ffi, CLOCK_MONOTONIC, the clock of Python's
-- time.monotonic), log-bucket latency histograms, the per-thread flat `stats` table and the
-- done() report: one line "BENCH_JSON {...}" on stdout.
--
-- wrk copies only flat tables between Lua states (nested tables crash Debian's wrk 4.1.0),
-- so each thread keeps one flat table `stats` of counters with composite string keys:
--   "n|<kind>|<status>|<decision>"  responses by request kind, HTTP status, decision word
--   "h|<bucket>"                    latency histogram (see bucket_of)
--   "t|<second>|<kind>|<status>"    the same counts per monotonic second (CONFIG.timeline)
--   "th|<second>|<bucket>"          latency histogram per second (CONFIG.timeline)
local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clk_id, bench_timespec *tp);
]]
local _ts = ffi.new("bench_timespec")

-- Microseconds on CLOCK_MONOTONIC (clk_id 1 on Linux).
function now_us()
  ffi.C.clock_gettime(1, _ts)
  return tonumber(_ts.tv_sec) * 1000000 + tonumber(_ts.tv_nsec) / 1000
end

-- 16 buckets per doubling (about 4.4 % wide): bucket b holds [2^(b/16), 2^((b+1)/16)) µs.
local LOG2 = math.log(2)
function bucket_of(us)
  if us < 1 then us = 1 end
  return math.floor(math.log(us) / LOG2 * 16)
end

stats = {}
tid = tid or 0

function count(key, n)
  stats[key] = (stats[key] or 0) + (n or 1)
end

-- Record one latency (µs) under `kind`/`status`/`decision`, at monotonic time `now` (µs).
function record(kind, status, decision, latency_us, now)
  count("n|" .. kind .. "|" .. status .. "|" .. decision)
  if latency_us then
    local b = bucket_of(latency_us)
    count("h|" .. b)
    if CONFIG.timeline then
      local sec = math.floor(now / 1000000)
      count("t|" .. sec .. "|" .. kind .. "|" .. status)
      count("th|" .. sec .. "|" .. b)
    end
  end
end

local _threads = {}
local _next_tid = 0

function setup(thread)
  _next_tid = _next_tid + 1
  thread:set("tid", _next_tid)
  table.insert(_threads, thread)
end

local function json_string(s)
  return '"' .. tostring(s):gsub('[%c"\\]', function(c) return string.format("\\u%04x", c:byte()) end) .. '"'
end

local function json_number(x)
  if x ~= x or x == math.huge or x == -math.huge then return "null" end
  return string.format("%.17g", x)
end

function done(summary, latency, requests)
  local merged = {}
  for _, thread in ipairs(_threads) do
    local s = thread:get("stats")
    if s then
      for k, v in pairs(s) do merged[k] = (merged[k] or 0) + v end
    end
  end
  local parts = {}
  for k, v in pairs(merged) do parts[#parts + 1] = json_string(k) .. ":" .. json_number(v) end
  local e = summary.errors
  local head = string.format(
    '{"requests":%s,"duration_us":%s,"bytes":%s,' ..
    '"errors":{"connect":%s,"read":%s,"write":%s,"status":%s,"timeout":%s},' ..
    '"latency_us":{"p50":%s,"p90":%s,"p99":%s,"p99.9":%s,"max":%s,"mean":%s},"stats":{',
    json_number(summary.requests), json_number(summary.duration), json_number(summary.bytes),
    json_number(e.connect), json_number(e.read), json_number(e.write), json_number(e.status), json_number(e.timeout),
    json_number(latency:percentile(50)), json_number(latency:percentile(90)), json_number(latency:percentile(99)),
    json_number(latency:percentile(99.9)), json_number(latency.max), json_number(latency.mean))
  io.write("BENCH_JSON ", head, table.concat(parts, ","), "}}\n")
end
