-- SPDX-License-Identifier: MIT
-- Restore benchmark data (bench/backup.sh): mode "counters" (a new counter per request) or
-- "messages" (short messages, 1000 users x 10 conversations).
local mode, n = "counters", 0
init = function(args)
  mode = args[1] or "counters"
  math.randomseed(os.time() + math.random(100000))
  n = math.random(1000000000)
end
request = function()
  n = n + 1
  if mode == "counters" then
    return wrk.format("POST", "/v1/counters/k" .. n .. "/incr", {["Content-Type"] = "application/json"}, '{"by":1}')
  end
  return wrk.format("POST", "/v1/users/u" .. (n % 1000) .. "/messages", {["Content-Type"] = "application/json"},
    '{"conversation_id":"c' .. (n % 10) .. '","from":"bench","content":"message ' .. n .. '"}')
end
