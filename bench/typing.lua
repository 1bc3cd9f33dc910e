-- SPDX-License-Identifier: MIT
-- A typing burst for bench/typing.sh: POST /v1/rooms/{room}/typing {"user"} from USERS members
-- (t0 … t{USERS-1}) in turn, each connection waiting DELAY ms between its requests (0: as fast as
-- it goes). Arguments: room, users, delay in ms. With wrk -cUSERS -t1 and DELAY 100, each user
-- signals about 10 times a second; strata coalesces them to one frame per user per second.
local room, users, wait = "lat", 100, 0
local n = 0
init = function(args)
  room = args[1] or room
  users = tonumber(args[2] or users)
  wait = tonumber(args[3] or wait)
end
request = function()
  local u = "t" .. (n % users)
  n = n + 1
  return wrk.format("POST", "/v1/rooms/" .. room .. "/typing", {["Content-Type"] = "application/json"},
    '{"user":"' .. u .. '"}')
end
delay = function()
  return wait
end
