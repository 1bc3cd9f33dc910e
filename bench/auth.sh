#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What checking identity-provider tokens costs (issue 37): GET /v1/counters/x on a strata with no
# auth and on a strata that verifies ES256 tokens against a JWKS file, in turns (no auth, ES256,
# no auth, … the first side changing every round) for ROUNDS rounds of DURATION seconds with CONNS
# keep-alive connections; every request on the second carries the same one token (strata caches a
# verified token by its hash until its exp, so the signature is verified once per run, not per
# request: the row says so; it measures the cached path a keep-alive client with one token takes). Only 2xx count (bench/lib.sh); records
# bench/out/auth/DATE.json with server CPU per answer for both.
#   bench/auth.sh      (DURATION=10 seconds per run, CONNS=64, ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
CONNS=${CONNS:-64}
ROUNDS=${ROUNDS:-3}
. bench/lib.sh
record_init auth

# an ES256 key, its JWKS and a token valid for an hour, made with node:crypto
TOKEN=$(node --input-type=module - "$work/jwks.json" <<'JS'
import { generateKeyPairSync, sign } from 'node:crypto';
import { writeFileSync } from 'node:fs';
const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
writeFileSync(process.argv[2], JSON.stringify({ keys: [{ ...publicKey.export({ format: 'jwk' }), kid: 'bench', alg: 'ES256', use: 'sig' }] }));
const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
const now = Math.floor(Date.now() / 1000);
const input = `${b64({ alg: 'ES256', kid: 'bench', typ: 'JWT' })}.${b64({ sub: 'bench', role: 'admin', iat: now, exp: now + 3600 })}`;
const sig = sign('sha256', Buffer.from(input), { key: privateKey, dsaEncoding: 'ieee-p1363' });
console.log(`${input}.${sig.toString('base64url')}`);
JS
)
export TOKEN

start() { # start PORT DIR ARGS…
  local p=$1 d=$2; shift 2
  build/strata --listen 127.0.0.1:"$p" --data-dir "$d" "$@" 2>>"$work/strata-$p.log" &
  pids+=($!)
}
op=$(free_port); ap=$(free_port)
start "$op" "$work/open"; opid=${pids[-1]}
start "$ap" "$work/auth" --jwt-jwks-file "$work/jwks.json"; apid=${pids[-1]}
wait_port "$op"; wait_port "$ap"
curl -fsS -XPOST "http://127.0.0.1:$op/v1/counters/bench/incr" >/dev/null
curl -fsS -XPOST -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$ap/v1/counters/bench/incr" >/dev/null
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$ap/v1/counters/bench")" = 401 ] ||
  die "the ES256 strata answered a request without a token"

W="-t1 -c$CONNS -d${DURATION}s --latency"
echo "# no auth vs ES256 tokens, $(date -u +%F), $(nproc) cores, ${DURATION}s per side, $CONNS connections, $ROUNDS rounds"
o_get=; o_cpu=; o_p99=; a_get=; a_cpu=; a_p99=
side_open() {
  cpu_run "$opid" wrk_strata "$op" "" -- $W -s bench/get.lua "http://127.0.0.1:$op"
  raw_keep "$1" open-get "$W_OUT"
  o_get+=" $W_RPS"; o_p99+=" $W_P99"; o_cpu+=" $(per_op "$CPU_TICKS" "$W_OK")"
}
side_es256() {
  cpu_run "$apid" wrk_strata "$ap" "" -- $W -s bench/auth.lua "http://127.0.0.1:$ap"
  raw_keep "$1" es256-get "$W_OUT"
  a_get+=" $W_RPS"; a_p99+=" $W_P99"; a_cpu+=" $(per_op "$CPU_TICKS" "$W_OK")"
}
for round in $(seq "$ROUNDS"); do
  turns "$round" side_open side_es256 # the first side changes every round (bench/lib.sh)
  echo "round $round: GET no auth $(awk '{print $NF}' <<<"$o_get")/s, ES256 $(awk '{print $NF}' <<<"$a_get")/s"
done
row '`GET /v1/counters/x` with one ES256 token (JWKS) sent on every request, verified once and then cached' "$a_get" "req/s" \
  "p99 $(med $a_p99) ms; a verified token is cached until its exp" \
  'the same strata without auth' "$o_get" "p99 $(med $o_p99) ms; wrk, same ${DURATION}s, interleaved" "" \
  "$a_cpu" "$o_cpu" "2xx answer"
out_write auth "DURATION=$DURATION ROUNDS=$ROUNDS CONNS=$CONNS bench/auth.sh"
