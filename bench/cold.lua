-- SPDX-License-Identifier: MIT
-- Cold-tier load for strata (bench/cold.sh): mode "post" sends chat messages of 8-40 words
-- (100 users x 10 conversations) 16 to a pipeline; "messages" reads the newest 50 of one
-- conversation, which after a flush are all cold.
local mode = "post"
local words = {"the", "ticket", "seat", "counter", "hello", "thanks", "order", "refund", "agent",
  "please", "when", "does", "my", "flight", "leave", "can", "you", "help", "booking", "event",
  "row", "section", "price", "sold", "out", "again", "today", "message", "reply", "status"}
init = function(args)
  mode = args[1] or "post"
  math.randomseed(os.time() + math.random(100000))
end
local function post()
  local n, t = math.random(8, 40), {}
  for i = 1, n do t[i] = words[math.random(#words)] end
  return wrk.format("POST", "/v1/users/u" .. math.random(100) .. "/messages",
    {["Content-Type"] = "application/json"},
    '{"conversation_id":"c' .. math.random(10) .. '","from":"bench","content":"' ..
      table.concat(t, " ") .. '"}')
end
request = function()
  if mode == "post" then
    local batch = {}
    for i = 1, 16 do batch[i] = post() end
    return table.concat(batch)
  end
  return wrk.format("GET", "/v1/users/u" .. math.random(100) .. "/messages?conversation_id=c" ..
    math.random(10) .. "&limit=50&order=desc")
end
