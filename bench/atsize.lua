-- SPDX-License-Identifier: MIT
-- The data set of bench/atsize.sh: USERS users x MSGS messages, each user's messages in turn
-- (message m of every user before message m + 1 of any), two conversations a user, 16 posts to a
-- pipeline. Past USERS x MSGS posts it sends GET /healthz instead, so a run longer than the load
-- adds nothing; wrk builds one batch it never sends, so the script waits for strata's 201 count to
-- come within a batch of the target and stop moving.
-- Mode "rooms": ROOMS rooms of ROOM_MEMBERS members each (users a0.. taken in turn), each room's
-- creation and its MSGS posts in one pipeline (one connection answers them in order, so a post
-- never comes before its room); past the last room GET /healthz as above.
-- Mode "read": the newest 50 of a random user (all cold after the flush).
-- Arguments: mode (load | rooms | read), users, msgs, rooms, room members. Use with wrk -t1
-- (one counter).
local mode, users, msgs, rooms, members = "load", 10000, 2, 0, 10
local n = 0
init = function(args)
  mode = args[1] or mode
  users = tonumber(args[2] or users)
  msgs = tonumber(args[3] or msgs)
  rooms = tonumber(args[4] or rooms)
  members = tonumber(args[5] or members)
  math.randomseed(os.time())
end
local json = {["Content-Type"] = "application/json"}
local function room()
  if n >= rooms then return wrk.format("GET", "/healthz") end
  local r, first = n, (n * members) % users
  n = n + 1
  local names = {}
  for i = 0, members - 1 do names[#names + 1] = '"a' .. ((first + i) % users) .. '"' end
  local batch = {wrk.format("POST", "/v1/rooms", json,
    '{"room_id":"r' .. r .. '","name":"room ' .. r .. '","members":[' .. table.concat(names, ",") .. ']}')}
  for m = 0, msgs - 1 do
    batch[#batch + 1] = wrk.format("POST", "/v1/rooms/r" .. r .. "/messages", json,
      '{"from":"a' .. ((first + m) % users) .. '","content":"room message ' .. m ..
        ', about as long as a chat line in a team room"}')
  end
  return table.concat(batch)
end
local function post()
  if n >= users * msgs then return wrk.format("GET", "/healthz") end
  local u, m = n % users, math.floor(n / users)
  n = n + 1
  return wrk.format("POST", "/v1/users/a" .. u .. "/messages", json,
    '{"conversation_id":"c' .. (m % 2) .. '","from":"a' .. u .. '","content":"message ' .. m ..
      ' of a user at size, about as long as a chat line"}')
end
request = function()
  if mode == "read" then
    return wrk.format("GET", "/v1/users/a" .. math.random(0, users - 1) .. "/messages?limit=50")
  end
  if mode == "rooms" then return room() end
  local batch = {}
  for i = 1, 16 do batch[i] = post() end
  return table.concat(batch)
end
