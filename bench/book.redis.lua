-- SPDX-License-Identifier: MIT
-- The peer's version of a booking: check that n consecutive 2-bit seats are free, mark them
-- reserved, update the stats hash and store a booking record, atomically inside Redis.
-- KEYS[1] seat bitmap, KEYS[2] stats hash; ARGV[1] first seat index, ARGV[2] count
local first = tonumber(ARGV[1]) % 999999
local n = tonumber(ARGV[2])
for i = 0, n - 1 do
  if redis.call('BITFIELD', KEYS[1], 'GET', 'u2', '#' .. (first + i))[1] ~= 0 then
    return 0
  end
end
for i = 0, n - 1 do
  redis.call('BITFIELD', KEYS[1], 'SET', 'u2', '#' .. (first + i), 1)
end
redis.call('HINCRBY', KEYS[2], 'available', -n)
redis.call('HINCRBY', KEYS[2], 'reserved', n)
local id = redis.call('INCR', 'booking:seq')
redis.call('HSET', 'booking:' .. id, 'first', first, 'n', n, 'status', 'reserved')
return id
