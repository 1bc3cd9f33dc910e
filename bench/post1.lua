-- SPDX-License-Identifier: MIT
-- Durable 1 KiB message posts, all to one conversation of one user (bench/cluster.sh,
-- bench/groupcost.sh MODE=post1). bench/chat.lua spreads posts over 1,000 conversations.
wrk.method = "POST"
wrk.path = "/v1/users/bench/messages"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"conversation_id":"c1","from":"bench","content":"' .. string.rep("x", 1024) .. '"}'
