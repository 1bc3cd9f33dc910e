-- SPDX-License-Identifier: MIT
-- Pipelined GETs: depth requests written back to back per connection (args: path, depth).
local req
init = function(args)
  local path = args[1] or "/v1/counters/bench"
  local depth = tonumber(args[2] or "16")
  local r = {}
  for i = 1, depth do r[i] = wrk.format("GET", path) end
  req = table.concat(r)
end
request = function()
  return req
end
