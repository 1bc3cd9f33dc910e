-- SPDX-License-Identifier: MIT
-- bench/get.lua plus a response() callback that tallies statuses: what counting 2xx inside wrk
-- would cost (bench/wrkcost.sh compares the two).
local path = "/v1/counters/bench"
local counts = {}
init = function(args)
  if args[1] then path = args[1] end
end
request = function()
  return wrk.format("GET", path)
end
response = function(status, headers, body)
  counts[status] = (counts[status] or 0) + 1
end
