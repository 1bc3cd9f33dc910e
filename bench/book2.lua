-- SPDX-License-Identifier: MIT
-- Booking throughput: 2 explicit random adjacent seats in a 1000x1000 section (the same work as
-- bench/book.redis.lua does inside Redis). The event id is the first script argument.
local event = "bench2"
init = function(args)
  if args[1] then event = args[1] end
  math.randomseed(os.time() + math.random(1000))
end
request = function()
  local r, c = math.random(1000), math.random(999)
  local body = '{"section":"F","seats":["' .. r .. '-' .. c .. '","' .. r .. '-' .. (c + 1) .. '"]}'
  return wrk.format("POST", "/v1/events/" .. event .. "/bookings", {["Content-Type"] = "application/json"}, body)
end
