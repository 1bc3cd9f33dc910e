-- SPDX-License-Identifier: MIT
-- Counter reads with a bearer token: GET <path> with Authorization from the TOKEN environment.
local path = "/v1/counters/bench"
local token = os.getenv("TOKEN")
init = function(args)
  if args[1] then path = args[1] end
end
request = function()
  return wrk.format("GET", path, { ["Authorization"] = "Bearer " .. token })
end
