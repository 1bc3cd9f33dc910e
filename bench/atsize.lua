-- SPDX-License-Identifier: MIT
-- The data set of bench/atsize.sh: USERS users x MSGS messages, each user's messages in turn
-- (message m of every user before message m + 1 of any), two conversations a user, 16 posts to a
-- pipeline. Past USERS x MSGS posts it sends GET /healthz instead, so a run longer than the load
-- adds nothing; wrk builds one batch it never sends, so the script waits for strata's 201 count to
-- come within a batch of the target and stop moving.
-- Mode "read": the newest 50 of a random user (all cold after the flush).
-- Arguments: mode (load | read), users, msgs. Use with wrk -t1 (one counter).
local mode, users, msgs = "load", 10000, 2
local n = 0
init = function(args)
  mode = args[1] or mode
  users = tonumber(args[2] or users)
  msgs = tonumber(args[3] or msgs)
  math.randomseed(os.time())
end
local function post()
  if n >= users * msgs then return wrk.format("GET", "/healthz") end
  local u, m = n % users, math.floor(n / users)
  n = n + 1
  return wrk.format("POST", "/v1/users/a" .. u .. "/messages", {["Content-Type"] = "application/json"},
    '{"conversation_id":"c' .. (m % 2) .. '","from":"a' .. u .. '","content":"message ' .. m ..
      ' of a user at size, about as long as a chat line"}')
end
request = function()
  if mode == "read" then
    return wrk.format("GET", "/v1/users/a" .. math.random(0, users - 1) .. "/messages?limit=50")
  end
  local batch = {}
  for i = 1, 16 do batch[i] = post() end
  return table.concat(batch)
end
