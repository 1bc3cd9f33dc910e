-- SPDX-License-Identifier: MIT
-- Durable counter increments: POST /v1/counters/bench/incr {"by":1}
wrk.method = "POST"
wrk.path = "/v1/counters/bench/incr"
wrk.body = '{"by":1}'
wrk.headers["Content-Type"] = "application/json"
