-- SPDX-License-Identifier: MIT
-- Posts that cover many keys in order (bench/loopstall.sh), 16 to a pipeline: message i goes to
-- user u(i mod USERS), conversation c(i div USERS mod CONVS) (args: USERS, CONVS).
local users, convs, i = 10000, 10, 0
init = function(args)
  users = tonumber(args[1] or "10000")
  convs = tonumber(args[2] or "10")
end
request = function()
  local batch = {}
  for k = 1, 16 do
    batch[k] = wrk.format("POST", "/v1/users/u" .. (i % users) .. "/messages",
      {["Content-Type"] = "application/json"},
      '{"conversation_id":"c' .. (math.floor(i / users) % convs) .. '","from":"bench","content":"hello"}')
    i = i + 1
  end
  return table.concat(batch)
end
