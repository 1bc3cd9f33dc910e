-- SPDX-License-Identifier: MIT
-- One user's messages, pipelined (bench/loopstall.sh erase): wrk -t1 -s bench/userload.lua URL --
-- USER N CONVS [PREFIX]. Sends N posts (rounded up to 16) to /v1/users/USER/messages (8-40
-- words each, over conversations PREFIX1..PREFIXCONVS in turn, 16 to a pipeline per
-- connection), then GET /healthz until wrk's duration ends (wrk cannot end a run early: a
-- thread's stop() does not end its sleep); the caller sizes the duration and reads the user's
-- count from GET /v1/users/USER/stats.
local words = {"the", "ticket", "seat", "counter", "hello", "thanks", "order", "refund", "agent",
  "please", "when", "does", "my", "flight", "leave", "can", "you", "help", "booking", "event",
  "row", "section", "price", "sold", "out", "again", "today", "message", "reply", "status"}
local user, left, convs, prefix, n, posts, first = "u", 0, 10, "c", 0, false, true
init = function(args)
  user, left, convs, prefix = args[1], tonumber(args[2]), tonumber(args[3] or "10"), args[4] or "c"
  math.randomseed(os.time() + math.random(100000))
end
local function post()
  local k, t = math.random(8, 40), {}
  for i = 1, k do t[i] = words[math.random(#words)] end
  n = n + 1
  return wrk.format("POST", "/v1/users/" .. user .. "/messages",
    {["Content-Type"] = "application/json"},
    '{"conversation_id":"' .. prefix .. (n % convs + 1) .. '","from":"' .. user ..
      '","content":"' .. table.concat(t, " ") .. '"}')
end
request = function()
  -- wrk 4.1 drops a thread's first request() (made before its connections are up): no posts in it
  if first then first = false; return wrk.format("GET", "/healthz") end
  posts = left > 0
  if not posts then return wrk.format("GET", "/healthz") end
  local batch = {}
  for i = 1, 16 do batch[i] = post() end
  left = left - 16
  return table.concat(batch)
end
-- once the posts are out, the GETs only wait for the end of the run (a delayed request is made
-- again when its delay ends: the posts are never delayed)
delay = function() return posts and 0 or 200 end
