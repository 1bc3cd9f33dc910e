-- SPDX-License-Identifier: MIT
\set u random(1, 100)
\set c random(1, 10)
SELECT * FROM messages WHERE user_id = 'u' || :u AND conversation_id = 'c' || :c
  ORDER BY msg_id DESC LIMIT 50;
