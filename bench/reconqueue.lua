-- SPDX-License-Identifier: MIT
-- One short message to each of N conversations (users q0 .. q{N-1}, conversation c), 16 posts a
-- pipeline, then reads only (GET /healthz): exactly N posts however long the run, so what the
-- sides hold differs by the queue alone (more posts grow other things). bench/reconqueue.sh.
local n, i = 200000, 0
init = function(args) n = tonumber(args[1] or n) end
local function post()
  if i >= n then return wrk.format("GET", "/healthz") end
  local u = "q" .. (i % n)
  i = i + 1
  return wrk.format("POST", "/v1/users/" .. u .. "/messages", {["Content-Type"] = "application/json"},
    '{"conversation_id":"c","from":"bench","content":"hello ' .. i .. '"}')
end
request = function()
  local batch = {}
  for k = 1, 16 do batch[k] = post() end
  return table.concat(batch)
end
