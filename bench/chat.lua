-- SPDX-License-Identifier: MIT
-- Chat load for strata, mirroring bench/pg/*.sql: mode "post" (1 KiB content, 100 users x 10
-- conversations), "messages" (newest 50 of one conversation) or "conversations"; "newconv":
-- posts as "post", each to a conversation never posted to (the path that finds no hot record).
local mode = "post"
local content = string.rep("x", 1024)
local fresh = 0
init = function(args)
  mode = args[1] or "post"
  math.randomseed(os.time() + math.random(1000))
end
request = function()
  local u, c = math.random(100), math.random(10)
  if mode == "post" then
    return wrk.format("POST", "/v1/users/u" .. u .. "/messages", {["Content-Type"] = "application/json"},
      '{"conversation_id":"c' .. c .. '","from":"bench","content":"' .. content .. '"}')
  elseif mode == "newconv" then
    fresh = fresh + 1
    return wrk.format("POST", "/v1/users/u" .. u .. "/messages", {["Content-Type"] = "application/json"},
      '{"conversation_id":"n' .. os.time() .. "-" .. fresh .. '","from":"bench","content":"' .. content .. '"}')
  elseif mode == "messages" then
    return wrk.format("GET", "/v1/users/u" .. u .. "/messages?conversation_id=c" .. c .. "&limit=50&order=desc")
  end
  return wrk.format("GET", "/v1/users/u" .. u .. "/conversations")
end
