-- wrk script of the benches (bench/support.ts `wrkLoad`): POSTs of one JSON body, round-robin over customers.
-- Its arguments (after `--`): the `Bearer ...` header, the path, the body with {customer} where the customer's
-- id goes, the text every 200 answer must hold ("" for none), then the customers' ids.
-- done() runs in wrk's main Lua state: it reads each thread's count through the threads kept by setup().
local threads = {}
setup = function(thread) table.insert(threads, thread) end

local customers = {}
local counter = 0
local headers = {}
local path, body, expected

init = function(args)
  headers["Authorization"] = args[1]
  headers["Content-Type"] = "application/json"
  path, body, expected = args[2], args[3], args[4]
  for i = 5, #args do customers[#customers + 1] = args[i] end
end

request = function()
  counter = counter + 1
  local customer = customers[(counter % #customers) + 1]
  return wrk.format("POST", path, headers, (body:gsub("{customer}", customer)))
end

-- A 200 whose body lacks the expected text (a check answered but not allowed) is counted apart.
unexpected = 0 -- a global: thread:get reads globals
response = function(status, headers, answer)
  if expected ~= "" and status == 200 and not answer:find(expected, 1, true) then unexpected = unexpected + 1 end
end

done = function(summary, latency, requests)
  local notExpected = 0
  for _, thread in ipairs(threads) do notExpected = notExpected + thread:get("unexpected") end
  io.write(string.format('WRK {"requests":%d,"seconds":%.3f,"statusErrors":%d,"connectErrors":%d,"readErrors":%d,"writeErrors":%d,"timeouts":%d,"p50Ms":%.2f,"p99Ms":%.2f,"maxMs":%.2f,"unexpected":%d}\n',
    summary.requests, summary.duration / 1e6, summary.errors.status, summary.errors.connect, summary.errors.read,
    summary.errors.write, summary.errors.timeout, latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    notExpected))
end
