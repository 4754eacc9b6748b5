-- One fixed request repeated as fast as the connections allow (wrk's static request path,
-- no per-request Lua): the ceiling (GET /healthz) and the read-only allow decision.
-- CONFIG = {method, path, headers = {name = value}, body = string or nil}
wrk.method = CONFIG.method
wrk.path = CONFIG.path
wrk.body = CONFIG.body
for name, value in pairs(CONFIG.headers) do wrk.headers[name] = value end
