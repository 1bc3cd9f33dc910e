-- SPDX-License-Identifier: MIT
-- One durable post: insert the message and update the conversation's hybrid fields.
\set u random(1, 100)
\set c random(1, 10)
BEGIN;
WITH n AS (SELECT nextval('msg_ids') AS id)
UPDATE conversations SET total_messages = total_messages + 1, last_msg_id = n.id,
  first_msg_id = coalesce(first_msg_id, n.id),
  updated = (extract(epoch FROM clock_timestamp()) * 1000000)::bigint
  FROM n WHERE user_id = 'u' || :u AND conversation_id = 'c' || :c
  RETURNING total_messages AS seq, last_msg_id AS id, updated AS ts \gset
INSERT INTO messages VALUES ('u' || :u, :id, 'c' || :c, 'bench', :ts, :seq, repeat('x', 1024), NULL);
COMMIT;
