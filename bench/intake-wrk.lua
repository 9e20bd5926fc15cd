-- wrk script for bench/intake.ts: credit signals to /signal/credit, round-robin over the customers given after `--`.
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
    '","agentKey":"chat","usage":{"model":"gpt-4o","inputTokens":1000,"outputTokens":200}}'
  return wrk.format("POST", "/api/v1/signal/credit", headers, body)
end

done = function(summary, latency, requests)
  io.write(string.format('WRK {"requests":%d,"seconds":%.3f,"statusErrors":%d,"connectErrors":%d,"readErrors":%d,"writeErrors":%d,"timeouts":%d,"p50Ms":%.2f,"p99Ms":%.2f,"maxMs":%.2f}\n',
    summary.requests, summary.duration / 1e6, summary.errors.status, summary.errors.connect, summary.errors.read,
    summary.errors.write, summary.errors.timeout, latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
end
