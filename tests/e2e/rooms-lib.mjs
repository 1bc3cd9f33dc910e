// SPDX-License-Identifier: MIT
// What the rooms tests share: tokens signed with the test's secret, a request that must succeed,
// a post as its author, and every message of a room read through its pages.
import assert from 'node:assert/strict';
import { hs256 } from './lib.mjs';

export function roomsApi(secret) {
  const bearer = (sub, extra = {}) => ({ Authorization: `Bearer ${hs256(secret, { sub, ...extra })}` });
  const admin = bearer('root', { role: 'admin' });
  async function ok(s, method, p, body, headers = admin) {
    const r = await s.req(method, p, body, headers);
    assert.ok(r.status < 300, `${method} ${p}: ${r.status} ${r.text}`);
    return r.json;
  }
  const post = (s, room, from, content) => ok(s, 'POST', `/v1/rooms/${room}/messages`, { from, content }, bearer(from));
  // every message of the room, oldest first (tombstones too)
  async function messages(s, room) {
    const out = [];
    for (let cursor = null; ;) {
      const q = new URLSearchParams({ limit: '1000', ...(cursor ? { cursor } : {}) });
      const r = await ok(s, 'GET', `/v1/rooms/${room}/messages?${q}`);
      out.push(...r.messages);
      if (!r.next) return out;
      cursor = r.next;
    }
  }
  return { bearer, admin, ok, post, messages };
}
