-- wrk script for the Keycast reference server's POST /api/nostr.
-- Environment: KC_TOKEN (access token, required), KC_METHOD (get_public_key | sign_event |
-- nip44_encrypt; default get_public_key), KC_PUBKEY (the user's hex pubkey, for sign_event),
-- KC_PEER (a hex pubkey, for nip44_encrypt), KC_PIPELINE (requests written back to back on a
-- connection before wrk reads their answers, HTTP/1.1 pipelining; default 1, no pipelining).
-- Bodies are exactly what the Keycast load tool sends (docs/protocol-keycast.md, RPC request
-- bodies); they are built once, so wrk spends no Lua time per request (with KC_PIPELINE above 1,
-- one request() call per batch returns the prebuilt batch).
local token = os.getenv("KC_TOKEN")
if token == nil or token == "" then
  io.stderr:write("keycast-rpc.lua: set KC_TOKEN to an access token\n")
  os.exit(2)
end
local method = os.getenv("KC_METHOD") or "get_public_key"
local now = os.time()
local body
if method == "get_public_key" then
  body = '{"method":"get_public_key","params":[]}'
elseif method == "sign_event" then
  local pk = os.getenv("KC_PUBKEY") or ""
  body = '{"method":"sign_event","params":[{"content":"Load test ' .. now .. '","created_at":' .. now ..
    ',"kind":1,"pubkey":"' .. pk .. '","tags":[]}]}'
elseif method == "nip44_encrypt" then
  local peer = os.getenv("KC_PEER") or ""
  body = '{"method":"nip44_encrypt","params":["' .. peer .. '","test message for load testing"]}'
else
  io.stderr:write("keycast-rpc.lua: unknown KC_METHOD " .. method .. "\n")
  os.exit(2)
end
wrk.method = "POST"
wrk.path = "/api/nostr"
wrk.body = body
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. token

local pipeline = tonumber(os.getenv("KC_PIPELINE") or "1")
if pipeline == nil or pipeline < 1 or pipeline ~= math.floor(pipeline) then
  io.stderr:write("keycast-rpc.lua: KC_PIPELINE must be a whole number of at least 1, not " .. os.getenv("KC_PIPELINE") .. "\n")
  os.exit(2)
end
if pipeline > 1 then
  local batch
  init = function(args)
    local one = wrk.format()
    local parts = {}
    for i = 1, pipeline do parts[i] = one end
    batch = table.concat(parts)
  end
  request = function()
    return batch
  end
end

local statuses = {}
function done(summary, latency, requests)
  local s = summary.errors
  io.write(string.format("keycast-rpc: method=%s requests=%d duration_s=%.2f rps=%.0f non2xx=%d connect_err=%d read_err=%d timeouts=%d p50_us=%d p99_us=%d\n",
    method, summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6), s.status, s.connect, s.read,
    s.timeout, latency:percentile(50), latency:percentile(99)))
end
