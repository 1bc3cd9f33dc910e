-- SPDX-License-Identifier: MIT
-- Durable 1 KiB posts to one room as "bench" (a member), for bench/rooms.sh. The room id is the
-- first script argument (default "r10"); the user-conversation peer is bench/post1.lua.
local room = "r10"
init = function(args)
  if args[1] then room = args[1] end
  wrk.path = "/v1/rooms/" .. room .. "/messages"
end
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"from":"bench","content":"' .. string.rep("x", 1024) .. '"}'
request = function()
  return wrk.format("POST", "/v1/rooms/" .. room .. "/messages")
end
