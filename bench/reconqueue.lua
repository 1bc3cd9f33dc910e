-- SPDX-License-Identifier: MIT
-- One short message to each of N conversations (users q0 .. q{N-1}, conversation c), 16 posts a
-- pipeline, then round again (marks of keys already queued: no growth). bench/reconqueue.sh.
local n, i = 200000, 0
init = function(args) n = tonumber(args[1] or n) end
local function post()
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
