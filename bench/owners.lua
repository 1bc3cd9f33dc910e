-- SPDX-License-Identifier: MIT
-- One short chat message to each of N users in turn: users PREFIX0 .. PREFIX{N-1} (PREFIX "t"
-- unless given), conversation c, 16 posts to a pipeline. wrk -t1 (one counter).
--   -- N           round and round, so a run long enough gives every user hot rows and a flush
--                  makes one cold object per user (bench/tickcost.sh);
--   -- N once q    exactly N posts however long the run, then reads only (GET /healthz), so what
--                  two servers hold differs by what they keep per conversation
--                  (bench/reconqueue.sh).
local n, i, once, prefix = 10000, 0, false, "t"
init = function(args)
  n = tonumber(args[1] or n)
  once = args[2] == "once"
  prefix = args[3] or prefix
end
local function post()
  if once and i >= n then return wrk.format("GET", "/healthz") end
  local u = prefix .. (i % n)
  i = i + 1
  return wrk.format("POST", "/v1/users/" .. u .. "/messages", {["Content-Type"] = "application/json"},
    '{"conversation_id":"c","from":"bench","content":"hello ' .. i .. '"}')
end
request = function()
  local batch = {}
  for k = 1, 16 do batch[k] = post() end
  return table.concat(batch)
end
