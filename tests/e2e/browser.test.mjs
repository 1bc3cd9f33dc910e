// SPDX-License-Identifier: MIT
// A real browser (Debian's chromium, driven by puppeteer-core) on a page served from another
// loopback origin: it posts with a bearer token and an Idempotency-Key (a preflighted request),
// sees the replay header on a retry, reads, and holds a live stream with ?access_token=. A page
// from an origin --cors-origins does not list gets nothing: its fetches fail in the browser, its
// POST never reaches strata, and its stream is refused. An open strata (no auth) is not
// writable from any page either: the requests a page may send without a CORS preflight (a
// text/plain fetch, a form post) reach it and are refused 415. Skips when chromium is not installed
// (tools/install-deps.sh --test installs it).
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { existsSync } from 'node:fs';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import puppeteer from 'puppeteer-core';
import { skipIf, startStrata } from './lib.mjs';

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const SECRET = 'browser-test-secret';
const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
function jwt(payload) {
  const h = b64({ alg: 'HS256', typ: 'JWT' });
  const p = b64(payload);
  return `${h}.${p}.${createHmac('sha256', SECRET).update(`${h}.${p}`).digest('base64url')}`;
}

// A page server: one empty HTML page, so the browser has an http:// origin of its own.
function pageServer() {
  return new Promise((resolve) => {
    const srv = http.createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!doctype html><title>app</title><p>app</p>');
    });
    srv.listen(0, '127.0.0.1', () => resolve(srv));
  });
}

const skip = skipIf(!existsSync(CHROMIUM) && `${CHROMIUM} not installed (tools/install-deps.sh --test)`);

describe('a browser page on another origin', { skip }, () => {
  let s, good, evil, browser, goodOrigin, evilOrigin;
  before(async () => {
    good = await pageServer();
    evil = await pageServer();
    goodOrigin = `http://127.0.0.1:${good.address().port}`;
    // Another loopback origin: same host name, another port is another origin.
    evilOrigin = `http://localhost:${evil.address().port}`;
    s = await startStrata({ args: ['--cors-origins', goodOrigin, '--jwt-secret', SECRET] });
    browser = await puppeteer.launch({
      executablePath: CHROMIUM, headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
  });
  after(async () => {
    await browser?.close();
    good?.close();
    evil?.close();
    if (s) { await s.stop(); s.cleanup(); }
  });

  test('posts with a token and an Idempotency-Key, reads, and holds a live stream', async () => {
    const page = await browser.newPage();
    await page.goto(`${goodOrigin}/`);
    const token = jwt({ sub: 'alice', exp: Math.floor(Date.now() / 1000) + 600 });
    const out = await page.evaluate(async (base, token) => {
      const hdr = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
      const post = (body, key) => fetch(`${base}/v1/users/alice/messages`, {
        method: 'POST', headers: { ...hdr, 'idempotency-key': key }, body: JSON.stringify(body) });
      const first = await post({ conversation_id: 'web', from: 'alice', content: 'hello' }, 'key-1');
      const firstBody = await first.json();
      const retry = await post({ conversation_id: 'web', from: 'alice', content: 'hello' }, 'key-1');
      const retryBody = await retry.json();
      const list = await (await fetch(`${base}/v1/users/alice/messages?conversation_id=web`, { headers: hdr })).json();
      const denied = await fetch(`${base}/v1/users/bob/stats`, { headers: hdr });
      // The stream: replay of what is there, then a live message posted after replay_done.
      const ws = new WebSocket(`${base.replace('http', 'ws')}/v1/stream?access_token=${token}&route=user:alice`);
      const frames = await new Promise((resolve, reject) => {
        const got = [];
        const t = setTimeout(() => reject(new Error(`stream timed out: ${JSON.stringify(got)}`)), 10000);
        ws.onerror = () => reject(new Error('stream failed'));
        ws.onopen = () => ws.send(JSON.stringify({ type: 'subscribe', id: 's1', topic: 'messages', user: 'alice', after: '0' }));
        ws.onmessage = async (ev) => {
          const f = JSON.parse(ev.data);
          got.push(f);
          if (f.type === 'replay_done') await post({ conversation_id: 'web', from: 'alice', content: 'live' }, 'key-2');
          if (f.type === 'message' && f.message.content === 'live') { clearTimeout(t); ws.close(); resolve(got); }
        };
      });
      return {
        first: first.status, firstBody, retry: retry.status, replayed: retry.headers.get('idempotent-replayed'),
        retryBody, list, denied: denied.status, frames,
      };
    }, `http://127.0.0.1:${s.port}`, token);
    assert.equal(out.first, 201);
    assert.equal(out.retry, 201);
    assert.equal(out.replayed, 'true', 'Idempotent-Replayed is exposed to the page');
    assert.deepEqual(out.retryBody, out.firstBody);
    assert.deepEqual(out.list.messages.map((m) => m.content), ['hello']);
    assert.equal(out.denied, 403, 'an error answer is readable by the page too');
    assert.deepEqual(out.frames.map((f) => f.type), ['subscribed', 'message', 'replay_done', 'message']);
    assert.equal(out.frames[1].message.msg_id, out.firstBody.msg_id);
    await page.close();
  });

  test('a page from an origin not allowed gets nothing, and its POST never reaches strata', async () => {
    const page = await browser.newPage();
    await page.goto(`${evilOrigin}/`);
    const token = jwt({ sub: 'mallory', exp: Math.floor(Date.now() / 1000) + 600 });
    const out = await page.evaluate(async (base, token) => {
      const attempt = async (p) => { try { const r = await p; return `status ${r.status}`; } catch (e) { return e.name; } };
      const post = await attempt(fetch(`${base}/v1/counters/evil/incr`, {
        method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: '{"by":5}' }));
      const get = await attempt(fetch(`${base}/healthz`));
      const stream = await new Promise((resolve) => {
        const ws = new WebSocket(`${base.replace('http', 'ws')}/v1/stream?access_token=${token}`);
        ws.onopen = () => { ws.close(); resolve('open'); };
        ws.onclose = () => resolve('closed');
      });
      return { post, get, stream };
    }, `http://127.0.0.1:${s.port}`, token);
    assert.deepEqual(out, { post: 'TypeError', get: 'TypeError', stream: 'closed' });
    // The preflight failed, so the write was never sent: the counter does not exist.
    const admin = jwt({ sub: 'ops', role: 'admin', exp: Math.floor(Date.now() / 1000) + 600 });
    const r = await s.req('GET', '/v1/counters/evil', undefined, { authorization: `Bearer ${admin}` });
    assert.equal(r.status, 404);
    await page.close();
  });

  test('an open strata on localhost takes no write from a cross-site form or text/plain POST', async () => {
    const open = await startStrata();
    try {
      const page = await browser.newPage();
      await page.goto(`${evilOrigin}/`);
      const base = `http://127.0.0.1:${open.port}`;
      await page.evaluate(async (base) => {
        const url = `${base}/v1/counters/csrf/incr`;
        // simple requests: no preflight, so the browser sends them; the page cannot read the answer
        await fetch(url, { method: 'POST', mode: 'no-cors', body: '{"by":5}' }); // text/plain;charset=UTF-8
        await fetch(url, { method: 'POST', mode: 'no-cors', body: new URLSearchParams({ '{"by":5,"x":"': '"}' }) });
        const fd = new FormData();
        fd.append('by', '5');
        await fetch(url, { method: 'POST', mode: 'no-cors', body: fd }); // multipart/form-data
        // a Blob without a type (or bytes) goes with no Content-Type at all, still without preflight
        await fetch(url, { method: 'POST', mode: 'no-cors', body: new Blob(['{"by":5}']) });
        // and a real form, posted into an iframe, with enctype text/plain
        const frame = document.createElement('iframe');
        frame.name = 'sink';
        // its first load (about:blank) first, so that the one awaited below is the form's answer
        await new Promise((resolve) => { frame.onload = resolve; document.body.append(frame); setTimeout(resolve, 1000); });
        await new Promise((resolve) => {
          frame.onload = resolve;
          const form = document.createElement('form');
          form.method = 'POST';
          form.action = url;
          form.enctype = 'text/plain';
          form.target = 'sink';
          const input = document.createElement('input');
          input.name = '{"by":5,"x":"';
          input.value = '"}';
          form.append(input);
          document.body.append(form);
          form.submit();
          setTimeout(resolve, 5000); // the poll below waits for strata's count anyway
        });
      }, base);
      await page.close();
      const r = await open.req('GET', '/v1/counters/csrf');
      assert.equal(r.status, 404, `a cross-site request wrote: ${r.text}`);
      // every one of the five reached strata and was refused 415 (a slow build may still be
      // answering the last when the page closes: wait for it, a few seconds at most)
      let refused;
      for (let i = 0; i < 100; i++) {
        const m = await open.req('GET', '/metrics');
        refused = m.text.match(/strata_http_requests_total\{route="POST \/v1\/counters\/\{name\}\/incr",status="415"\} (\d+)/);
        if (refused && Number(refused[1]) >= 5) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.ok(refused, 'the requests did not reach strata');
      assert.equal(Number(refused[1]), 5);
      assert.equal((await open.req('GET', '/v1/counters/csrf')).status, 404, 'nothing was written');
    } finally {
      await open.stop();
      open.cleanup();
    }
  });
});
