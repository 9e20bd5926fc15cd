-- wrk script for bench/entitlements.ts: non-reserving CREDIT checks, round-robin over the customers given after `--`.
-- done() runs in wrk's main Lua state: it reads each thread's count through the threads kept by setup().
local threads = {}
setup = function(thread) table.insert(threads, thread) end

local customers = {}
local counter = 0
local headers = {}

init = function(args)
  for _, id in ipairs(args) do
    if id:sub(1, 7) == "Bearer " then headers["Authorization"] = id else customers[#customers + 1] = id end
  end
  headers["Content-Type"] = "application/json"
end

request = function()
  counter = counter + 1
  local body = '{"customerId":"' .. customers[(counter % #customers) + 1] ..
    '","meter":"CREDIT","agentKey":"chat","usage":{"model":"gpt-4o","inputTokens":1000,"outputTokens":200}}'
  return wrk.format("POST", "/api/v1/entitlements/check", headers, body)
end

-- A check answered but not allowed is still a 200: counted apart (notAllowed), so a run shows every check was allowed.
refused = 0 -- a global: thread:get reads globals
response = function(status, headers, body)
  if status == 200 and not body:find('"allowed":true', 1, true) then refused = refused + 1 end
end

done = function(summary, latency, requests)
  local notAllowed = 0
  for _, thread in ipairs(threads) do notAllowed = notAllowed + thread:get("refused") end
  io.write(string.format('WRK {"requests":%d,"seconds":%.3f,"statusErrors":%d,"connectErrors":%d,"readErrors":%d,"writeErrors":%d,"timeouts":%d,"p50Ms":%.2f,"p99Ms":%.2f,"maxMs":%.2f,"notAllowed":%d}\n',
    summary.requests, summary.duration / 1e6, summary.errors.status, summary.errors.connect, summary.errors.read,
    summary.errors.write, summary.errors.timeout, latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000, notAllowed))
end
