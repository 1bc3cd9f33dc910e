-- SPDX-License-Identifier: MIT
-- Sellout: each connection books 1-4 seats (half best-available, half random explicit seats in
-- one row) and confirms every booking it wins. The event id is the first script argument
-- (default "sellout"). Counts outcomes so the driver can check oversell.
local event = "sellout"
local sections = {"S1", "S2", "S3", "S4"}
local rows, cols = 100, 250
local confirms = {}
booked, seats_booked, confirmed, conflicts, errors = 0, 0, 0, 0, 0
local threads = {}

setup = function(thread)
  table.insert(threads, thread)
end

init = function(args)
  if args[1] then event = args[1] end
  math.randomseed(os.time() + math.random(1000))
end

request = function()
  local id = table.remove(confirms)
  if id then
    return wrk.format("POST", "/v1/bookings/" .. id .. "/confirm")
  end
  local sec = sections[math.random(#sections)]
  local q = math.random(4)
  local body
  if math.random(2) == 1 then
    body = '{"section":"' .. sec .. '","quantity":' .. q .. '}'
  else
    local r, c = math.random(rows), math.random(cols - q + 1)
    local s = {}
    for k = 0, q - 1 do s[#s + 1] = '"' .. r .. '-' .. (c + k) .. '"' end
    body = '{"section":"' .. sec .. '","seats":[' .. table.concat(s, ",") .. ']}'
  end
  return wrk.format("POST", "/v1/events/" .. event .. "/bookings",
                    {["Content-Type"] = "application/json"}, body)
end

response = function(status, headers, body)
  if status == 201 then
    booked = booked + 1
    local list = body:match('"seats":%[([^%]]*)%]') or ""
    local _, quotes = list:gsub('"', '')
    seats_booked = seats_booked + quotes / 2
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
  local t = {booked = 0, seats_booked = 0, confirmed = 0, conflicts = 0, errors = 0}
  for _, th in ipairs(threads) do
    for k, _ in pairs(t) do t[k] = t[k] + th:get(k) end
  end
  io.write(string.format("RESULT booked=%d seats_booked=%d confirmed=%d conflicts=%d errors=%d p99_us=%d\n",
    t.booked, t.seats_booked, t.confirmed, t.conflicts, t.errors, latency:percentile(99)))
end
