-- The same request with bodies in turn, as fast as the connections allow: the bare OPA
-- anchor (POST /v1/data/<path> with each policy input of the mix).
-- CONFIG = {method, path, headers = {name = value}, bodies = {string, ...}, kind = name}
-- Latency is wrk's own; each response is counted as (kind, status, "decision" of the body).
local bodies, nbodies = CONFIG.bodies, #CONFIG.bodies
local pos = 0

function init(args)
  pos = (tid * 7) % nbodies
end

function request()
  pos = pos % nbodies + 1
  return wrk.format(CONFIG.method, CONFIG.path, CONFIG.headers, bodies[pos])
end

function response(status, hdrs, body)
  local decision = "-"
  if status == 200 and body then
    decision = body:match('"decision":"([%a-]+)"') or "-"
  end
  record(CONFIG.kind, status, decision, nil, now_us())
end
