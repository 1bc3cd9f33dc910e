-- SPDX-License-Identifier: MIT
-- Durable 1 KiB posts as the client libraries send them: each with an Idempotency-Key of its own
-- (100 users x 10 conversations, as bench/chat.lua's "post"). The stored answer and, since
-- session 11, its entry in the user's index (so an erasure can delete it) are written in the
-- post's batch. Used with bench/cost.sh for old/new comparisons.
local content = string.rep("x", 1024)
local prefix, n = "", 0
init = function(args)
  math.randomseed(os.time() + math.random(100000))
  prefix = string.format("%08x-", math.random(0, 0x7fffffff))
end
request = function()
  n = n + 1
  local u, c = math.random(100), math.random(10)
  return wrk.format("POST", "/v1/users/u" .. u .. "/messages",
    {["Content-Type"] = "application/json", ["Idempotency-Key"] = prefix .. n},
    '{"conversation_id":"c' .. c .. '","from":"bench","content":"' .. content .. '"}')
end
