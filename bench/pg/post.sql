-- SPDX-License-Identifier: MIT
-- One durable post in one statement (one round trip, one commit with synchronous_commit=on):
-- take the next message id, update the conversation's hybrid fields, insert the message.
\set u random(1, 100)
\set c random(1, 10)
WITH n AS (SELECT nextval('msg_ids') AS id),
c AS (
  UPDATE conversations SET total_messages = total_messages + 1, last_msg_id = n.id,
    first_msg_id = coalesce(first_msg_id, n.id),
    updated = (extract(epoch FROM clock_timestamp()) * 1000000)::bigint
  FROM n WHERE user_id = 'u' || :u AND conversation_id = 'c' || :c
  RETURNING total_messages AS seq, last_msg_id AS id, updated AS ts)
INSERT INTO messages SELECT 'u' || :u, c.id, 'c' || :c, 'bench', c.ts, c.seq, repeat('x', 1024), NULL FROM c;
