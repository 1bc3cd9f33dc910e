-- SPDX-License-Identifier: MIT
-- One short chat message to each of N users in turn (bench/tickcost.sh): users t0 .. t{N-1},
-- 16 posts to a pipeline, round and round, so a run long enough gives every user hot rows and
-- a flush makes one cold object per user. wrk -t1 (one counter). Argument: N.
local n, i = 10000, 0
init = function(args) n = tonumber(args[1] or n) end
local function post()
  local u = "t" .. (i % n)
  i = i + 1
  return wrk.format("POST", "/v1/users/" .. u .. "/messages", {["Content-Type"] = "application/json"},
    '{"conversation_id":"c","from":"bench","content":"hello ' .. i .. '"}')
end
request = function()
  local batch = {}
  for k = 1, 16 do batch[k] = post() end
  return table.concat(batch)
end
