-- SPDX-License-Identifier: MIT
-- The PostgreSQL peer for the chat benchmark: the same data strata keeps for SPEC §2.
CREATE SEQUENCE msg_ids;
CREATE TABLE conversations (
  user_id text NOT NULL, conversation_id text NOT NULL,
  first_msg_id bigint, last_msg_id bigint, created bigint, updated bigint,
  total_messages bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (user_id, conversation_id));
CREATE INDEX conversations_by_updated ON conversations (user_id, updated DESC);
CREATE TABLE messages (
  user_id text NOT NULL, msg_id bigint NOT NULL, conversation_id text NOT NULL,
  from_id text NOT NULL, ts bigint NOT NULL, seq bigint NOT NULL, content text NOT NULL,
  metadata jsonb, PRIMARY KEY (user_id, msg_id));
CREATE INDEX messages_by_conversation ON messages (user_id, conversation_id, msg_id);
-- 100 users x 10 conversations = 1,000 conversations, as in the strata run
INSERT INTO conversations (user_id, conversation_id, created, updated)
  SELECT 'u' || u, 'c' || c, 0, 0 FROM generate_series(1, 100) u, generate_series(1, 10) c;
