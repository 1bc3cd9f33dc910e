-- SPDX-License-Identifier: MIT
-- Counter reads: GET <path> (path from the first script argument, default the bench counter).
local path = "/v1/counters/bench"
init = function(args)
  if args[1] then path = args[1] end
end
request = function()
  return wrk.format("GET", path)
end
