-- SPDX-License-Identifier: MIT
-- Sells one place at a time from a general admission section: each connection books quantity 1
-- and confirms every booking it wins. Event id: the first script argument (default "flat").
local event = "flat"
local confirms = {}
booked, confirmed, conflicts, errors = 0, 0, 0, 0
local threads = {}

setup = function(thread)
  table.insert(threads, thread)
end

init = function(args)
  if args[1] then event = args[1] end
end

request = function()
  local id = table.remove(confirms)
  if id then
    return wrk.format("POST", "/v1/bookings/" .. id .. "/confirm")
  end
  return wrk.format("POST", "/v1/events/" .. event .. "/bookings",
                    {["Content-Type"] = "application/json"}, '{"section":"floor","quantity":1}')
end

response = function(status, headers, body)
  if status == 201 then
    booked = booked + 1
    confirms[#confirms + 1] = body:match('"booking_id":"(%d+)"')
  elseif status == 200 then
    confirmed = confirmed + 1
  elseif status == 409 then
    conflicts = conflicts + 1
  else
    errors = errors + 1
  end
end

done = function(summary, latency, requests)
  local t = {booked = 0, confirmed = 0, conflicts = 0, errors = 0}
  for _, th in ipairs(threads) do
    for k, _ in pairs(t) do t[k] = t[k] + th:get(k) end
  end
  io.write(string.format("RESULT booked=%d confirmed=%d conflicts=%d errors=%d\n",
    t.booked, t.confirmed, t.conflicts, t.errors))
end
