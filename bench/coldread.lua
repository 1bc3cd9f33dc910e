-- SPDX-License-Identifier: MIT
-- bench/coldread.sh's reads: the newest 50 of users in a fixed permutation (i * 7919 mod USERS,
-- from a random start), so no user is read twice until all have been: each read is of a user
-- whose data nothing has read since the page cache was dropped. Argument: users.
local users, i, P = 20000, 0, 7919
init = function(args)
  users = tonumber(args[1] or users)
  math.randomseed(os.time())
  i = math.random(0, users - 1)
end
request = function()
  i = i + 1
  return wrk.format("GET", "/v1/users/a" .. ((i * P) % users) .. "/messages?limit=50")
end
