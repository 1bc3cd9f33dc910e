-- SPDX-License-Identifier: MIT
\set u random(1, 100)
SELECT * FROM conversations WHERE user_id = 'u' || :u ORDER BY updated DESC LIMIT 20;
