// SPDX-License-Identifier: MIT
// A verifying proxy in front of s3rver (which accepts any signature): every request's AWS SigV4
// is recomputed with AWS's own signer (@smithy/signature-v4, as the AWS SDK uses it for S3:
// uriEscapePath false, the request's own signed headers, x-amz-date and x-amz-content-sha256)
// over the request as S3 reads it (path and query decoded, then canonical-encoded). A request
// whose signature differs is answered 403 SignatureDoesNotMatch and never reaches s3rver; a body
// whose SHA-256 is not its x-amz-content-sha256 gets 400. It also does what real stores do and
// s3rver does not: a multipart upload whose parts but the last are under 5 MiB is refused
// (EntityTooSmall), a list holds at most 1,000 keys and goes on with a continuation token, a
// create (PUT, or completing a multipart upload) carrying If-None-Match: * over an existing key
// is refused 412 PreconditionFailed as AWS does (every create is logged in .creates with whether
// it was conditional), race() makes another writer put its bytes at a chosen key just before a
// conditional create of it, lose() has s3rver do a request whose answer is then lost (500) and
// may make its object unreadable until it is deleted (every GET of it answered 5xx or its
// connection reset: a read-back that cannot tell whose the object is), and inject() answers
// chosen requests 503 SlowDown or 500 first.
// Virtual-hosted-style requests (Host: BUCKET.localhost) are forwarded to s3rver in path style.
//
// S3rver is a drop-in for s3rver's class: new S3rver(opts).run() starts s3rver on a free port
// and the proxy on opts.port, and answers { port } of the proxy; .proxy has its counters;
// close() fails if any request was refused (unless opts.allowRefused).
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';
import S3rverImpl from 's3rver';

const MIN_PART = 5 * 1024 * 1024;

// Every byte outside A-Z a-z 0-9 - _ . ~ as %XX (SigV4's URI encoding).
const strict = (s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
const decode = (s) => decodeURIComponent(s.replace(/\+/g, ' '));

function xmlError(res, status, code, message, extra = '') {
  const body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message>${extra}</Error>`;
  res.writeHead(status, { 'Content-Type': 'application/xml', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

// The query as S3 decodes it: name -> value (or values).
function parseQuery(raw) {
  const q = {};
  for (const part of raw ? raw.split('&') : []) {
    if (!part) continue;
    const eq = part.indexOf('=');
    const k = decode(eq < 0 ? part : part.slice(0, eq));
    const v = eq < 0 ? '' : decode(part.slice(eq + 1));
    if (k in q) q[k] = [].concat(q[k], v);
    else q[k] = v;
  }
  return q;
}

// x-amz-date 20240102T030405Z as a Date.
function amzDate(s) {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(s || '');
  return m ? new Date(Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6])) : null;
}

// One request to s3rver (which checks no signature): its status.
function raw(port, method, path, headers, body) {
  return new Promise((resolve, reject) => {
    const r = http.request({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    r.on('error', reject);
    r.end(body);
  });
}

function get(port, path, headers) {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path, headers }, (r) => {
      let text = '';
      r.setEncoding('utf8');
      r.on('data', (d) => { text += d; });
      r.on('end', () => (r.statusCode === 200 ? resolve(text) : reject(new Error(`s3rver answered ${r.statusCode}: ${text}`))));
    }).on('error', reject);
  });
}

// ListObjectsV2 as S3 pages it: at most 1,000 keys (or max-keys) a page, and an opaque
// continuation token after a truncated one ('/', '+' and '=' in it on purpose). s3rver's own
// tokens need DES, which Node's OpenSSL 3 lacks, so its V1 listing (marker) is read whole and
// paged here. Null for a token this proxy never issued.
async function listV2(port, headers, bucket, q, tokens) {
  const prefix = typeof q.prefix === 'string' ? q.prefix : '';
  const all = [];
  for (let marker = null; ;) {
    const xml = await get(port, `/${bucket}?prefix=${strict(prefix)}&max-keys=1000${marker === null ? '' : `&marker=${strict(marker)}`}`, headers);
    const blocks = [...xml.matchAll(/<Contents>[\s\S]*?<\/Contents>/g)].map((m) => m[0].replace(/<Owner>[\s\S]*?<\/Owner>/, ''));
    all.push(...blocks);
    if (!/<IsTruncated>true<\/IsTruncated>/.test(xml) || !blocks.length) break;
    marker = unxml(/<Key>([\s\S]*?)<\/Key>/.exec(blocks.at(-1))[1]);
  }
  const keyOf = (b) => /<Key>([\s\S]*?)<\/Key>/.exec(b)[1];
  let from = 0;
  const token = q['continuation-token'];
  if (token !== undefined) {
    if (!tokens.has(token)) return null;
    const last = tokens.get(token);
    from = all.findIndex((b) => unxml(keyOf(b)) > unxml(last));
    if (from < 0) from = all.length;
  }
  const max = Math.min(1000, q['max-keys'] === undefined ? 1000 : Number(q['max-keys']));
  const page = all.slice(from, from + max);
  const truncated = from + max < all.length;
  let next = '';
  if (truncated) {
    next = `1/+=${randomBytes(24).toString('base64')}`;
    tokens.set(next, keyOf(page.at(-1)));
  }
  return '<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
    + `<Name>${bucket}</Name><Prefix>${xml(prefix)}</Prefix>${token !== undefined ? `<ContinuationToken>${xml(token)}</ContinuationToken>` : ''}`
    + `<KeyCount>${page.length}</KeyCount><MaxKeys>${max}</MaxKeys><IsTruncated>${truncated}</IsTruncated>`
    + `${truncated ? `<NextContinuationToken>${xml(next)}</NextContinuationToken>` : ''}${page.join('')}</ListBucketResult>`;
}

const xml = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&apos;');
const unxml = (s) => s.replace(/&(amp|lt|gt|quot|apos|#x?[0-9a-fA-F]+);/g, (_, e) => ({ amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" })[e]
  ?? String.fromCodePoint(e[1] === 'x' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10)));

// Why the request's signature is not AWS's, or null when it is. credentials: access key -> secret.
export async function checkSignature(req, body, credentials) {
  const auth = req.headers.authorization || '';
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$/.exec(auth);
  if (!m) return { status: 403, code: 'AccessDenied', why: `no SigV4 Authorization header: '${auth}'` };
  const [, keyId, day, region, service, signedList, signature] = m;
  const secret = credentials[keyId];
  if (secret === undefined) return { status: 403, code: 'InvalidAccessKeyId', why: `unknown access key ${keyId}` };
  if (service !== 's3') return { status: 403, code: 'SignatureDoesNotMatch', why: `service ${service}` };
  const date = amzDate(req.headers['x-amz-date']);
  if (!date) return { status: 403, code: 'AccessDenied', why: 'no x-amz-date' };
  if (req.headers['x-amz-date'].slice(0, 8) !== day) return { status: 403, code: 'SignatureDoesNotMatch', why: 'credential date is not x-amz-date\'s' };
  if (Math.abs(Date.now() - date.getTime()) > 15 * 60 * 1000) return { status: 403, code: 'RequestTimeTooSkewed', why: 'x-amz-date is off by more than 15 minutes' };
  const sha = req.headers['x-amz-content-sha256'];
  if (!sha) return { status: 400, code: 'InvalidRequest', why: 'no x-amz-content-sha256' };
  if (sha !== 'UNSIGNED-PAYLOAD' && sha !== createHash('sha256').update(body).digest('hex')) {
    return { status: 400, code: 'XAmzContentSHA256Mismatch', why: 'the body is not what x-amz-content-sha256 says' };
  }
  const signed = signedList.split(';');
  if (!signed.includes('host') || !signed.includes('x-amz-date') || !signed.includes('x-amz-content-sha256')) {
    return { status: 403, code: 'SignatureDoesNotMatch', why: `host, x-amz-date and x-amz-content-sha256 must be signed, not only ${signedList}` };
  }
  const headers = {};
  for (const h of signed) {
    if (req.headers[h] === undefined) return { status: 403, code: 'SignatureDoesNotMatch', why: `signed header ${h} is missing` };
    headers[h] = String(req.headers[h]);
  }
  const raw = req.url;
  const qi = raw.indexOf('?');
  const rawPath = qi < 0 ? raw : raw.slice(0, qi);
  let path, query;
  try {
    path = rawPath.split('/').map((seg) => strict(decode(seg.replace(/\+/g, '%2B')))).join('/');
    query = parseQuery(qi < 0 ? '' : raw.slice(qi + 1));
  } catch (e) {
    return { status: 400, code: 'InvalidURI', why: `${raw}: ${e.message}` };
  }
  const [hostname, port] = headers.host.split(':');
  const signer = new SignatureV4({
    service: 's3', region, credentials: { accessKeyId: keyId, secretAccessKey: secret },
    sha256: Hash.bind(null, 'sha256'), uriEscapePath: false, applyChecksum: false,
  });
  const out = await signer.sign({
    method: req.method, protocol: 'http:', hostname, port: port ? Number(port) : undefined, path, query, headers, body,
  }, { signingDate: date, signableHeaders: new Set(signed), signingRegion: region, signingService: 's3' });
  const want = /SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(out.headers.authorization);
  if (want[1] !== signedList || want[2] !== signature) {
    return { status: 403, code: 'SignatureDoesNotMatch', why: `${req.method} ${raw}: AWS computes ${want[2]} over SignedHeaders=${want[1]}, the request has ${signature} over ${signedList}` };
  }
  return null;
}

// A proxy to 127.0.0.1:target. credentials: access key -> secret key. tls: { key, cert } for HTTPS.
export function sigv4Proxy(target, { port = 0, credentials = { S3RVER: 'S3RVER' }, tls = null } = {}) {
  const state = {
    verified: 0, // requests whose signature matched
    refused: [], // { method, url, code, why } of each refused one
    log: [], // "METHOD url status" of every request
    injected: 0, // requests answered by inject() instead of s3rver
    hosts: new Set(), // Host headers seen
    creates: [], // { key, conditional } of every object create (a PUT or a completed upload)
    raced: [], // keys race() wrote before a conditional create of them
    lost: [], // paths ("/bucket/key") of the requests lose() lost the answer of
    unread: [], // { path, how } of each GET lose({ unreadable }) failed
  };
  let faults = []; // { re, status, code, left }
  let races = []; // { re, bytes, left }
  let losses = []; // { re, left, unreadable }
  const unreadable = new Map(); // "/bucket/key" -> { how: [500, 'reset', …], n: GETs failed }
  const parts = new Map(); // uploadId -> Map(partNumber -> bytes)
  const tokens = new Map(); // continuation token -> the last key (escaped) of the page before
  const agent = new http.Agent({ keepAlive: true }); // to s3rver (Node 18's default closes)
  const handler = (req, res) => {
    const chunks = [];
    req.on('data', (d) => chunks.push(d));
    req.on('end', async () => {
      const body = Buffer.concat(chunks);
      const line = `${req.method} ${req.url}`;
      state.hosts.add(req.headers.host);
      const answer = (status, code, why) => {
        state.log.push(`${line} ${status}`);
        xmlError(res, status, code, why);
      };
      const bad = await checkSignature(req, body, credentials).catch((e) => ({ status: 500, code: 'InternalError', why: e.stack }));
      if (bad) {
        state.refused.push({ method: req.method, url: req.url, code: bad.code, why: bad.why });
        return answer(bad.status, bad.code, bad.why);
      }
      state.verified++;
      const fault = faults.find((f) => f.left > 0 && f.re.test(line));
      if (fault) {
        fault.left--;
        state.injected++;
        return answer(fault.status, fault.code, 'injected by the test');
      }
      const qi = req.url.indexOf('?');
      const q = parseQuery(qi < 0 ? '' : req.url.slice(qi + 1));
      if (req.method === 'PUT' && q.uploadId && q.partNumber) {
        if (!parts.has(q.uploadId)) parts.set(q.uploadId, new Map());
        parts.get(q.uploadId).set(Number(q.partNumber), body.length);
      }
      if (req.method === 'POST' && q.uploadId) {
        const nums = [...body.toString().matchAll(/<PartNumber>(\d+)<\/PartNumber>/g)].map((x) => Number(x[1]));
        const sizes = parts.get(q.uploadId) || new Map();
        const small = nums.slice(0, -1).find((n) => (sizes.get(n) ?? 0) < MIN_PART);
        if (small !== undefined) return answer(400, 'EntityTooSmall', `part ${small} is ${sizes.get(small)} bytes, under 5 MiB and not the last`);
      }
      // virtual-hosted style: BUCKET.localhost[:port] -> /BUCKET/...
      const host = req.headers.host || '';
      const hn = host.replace(/:\d+$/, '');
      let path = req.url;
      const headers = { ...req.headers };
      if (!isIP(hn) && hn.endsWith('.localhost')) {
        path = `/${hn.slice(0, -'.localhost'.length)}${req.url}`;
        headers.host = `127.0.0.1:${target}`;
      }
      const bucket = /^\/([^/?]+)\/?(?:\?|$)/.exec(path)?.[1];
      const objPath = path.split('?')[0];
      if (req.method === 'DELETE') unreadable.delete(objPath);
      const fails = req.method === 'GET' && !bucket ? unreadable.get(objPath) : undefined;
      if (fails && (!fails.range || fails.range.test(req.headers.range || ''))) { // a read of a lost request's object fails: 5xx, or the connection goes
        const how = fails.how[fails.n++ % fails.how.length];
        state.injected++;
        state.unread.push({ path: objPath, how });
        if (how !== 'reset') return answer(how, 'InternalError', 'read-back failure injected by the test');
        state.log.push(`${line} reset`);
        return req.socket.destroy();
      }
      if (!bucket && ((req.method === 'PUT' && !q.partNumber) || (req.method === 'POST' && q.uploadId))) {
        const key = decode(objPath.replace(/^\/[^/]+\//, ''));
        const conditional = req.headers['if-none-match'] === '*';
        state.creates.push({ key, conditional });
        if (conditional) { // AWS: the object is created only if none is there, atomically
          const h = { ...headers };
          for (const x of ['content-length', 'content-type', 'content-md5', 'expect', 'if-none-match', 'transfer-encoding']) delete h[x];
          try {
            const race = races.find((r) => r.left > 0 && r.re.test(key));
            if (race) {
              race.left--;
              const st = await raw(target, 'PUT', objPath, { ...h, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', 'content-length': race.bytes.length }, race.bytes);
              if (st !== 200) throw new Error(`race(): s3rver answered ${st}`);
              state.raced.push(key);
            }
            const there = await raw(target, 'HEAD', objPath, h);
            if (there !== 404 && there !== 200) throw new Error(`HEAD ${objPath}: s3rver answered ${there}`);
            if (there === 200) return answer(412, 'PreconditionFailed', 'At least one of the pre-conditions you specified did not hold');
          } catch (e) {
            return answer(500, 'InternalError', e.message);
          }
        }
      }
      if (req.method === 'GET' && bucket && q['list-type'] === '2') {
        try {
          const xml = await listV2(target, headers, bucket, q, tokens);
          state.log.push(`${line} ${xml ? 200 : 400}`);
          if (!xml) return xmlError(res, 400, 'InvalidArgument', 'The continuation token provided is incorrect');
          res.writeHead(200, { 'Content-Type': 'application/xml', 'Content-Length': Buffer.byteLength(xml) });
          return res.end(xml);
        } catch (e) {
          return answer(500, 'InternalError', e.message);
        }
      }
      delete headers.connection; // hop by hop: each side keeps its own connection alive
      delete headers['keep-alive'];
      const lost = losses.find((l) => l.left > 0 && l.re.test(line));
      if (lost) {
        lost.left--;
        state.lost.push(objPath);
        if (lost.unreadable.length) unreadable.set(objPath, { how: lost.unreadable, n: 0, range: lost.range });
      }
      const up = http.request({ host: '127.0.0.1', port: target, method: req.method, path, headers, agent }, (r) => {
        if (lost) { // done by s3rver, but the answer never reaches the client
          r.resume();
          state.injected++;
          return answer(500, 'InternalError', `done, answer lost (s3rver said ${r.statusCode})`);
        }
        state.log.push(`${line} ${r.statusCode}`);
        const back = { ...r.headers };
        delete back.connection;
        delete back['keep-alive'];
        res.writeHead(r.statusCode, back);
        r.pipe(res);
      });
      up.on('error', (e) => answer(502, 'BadGateway', e.message));
      up.end(body);
    });
  };
  const server = tls ? https.createServer(tls, handler) : http.createServer(handler);
  server.keepAliveTimeout = 30000;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(Object.assign(state, {
      port: server.address().port,
      // the next count requests whose "METHOD url" matches re are answered status/code
      inject(re, count, status = 503, code = 'SlowDown') { faults.push({ re, status, code, left: count }); },
      // the next count conditional creates of a key matching re find bytes put there just before
      race(re, bytes, count = 1) { races.push({ re, bytes: Buffer.from(bytes), left: count }); },
      // the next count requests matching re are done by s3rver but answered 500 (answer lost);
      // unreadable: how the GETs of such a request's object then fail, in turn, until a DELETE
      // of it: a status (500, 503, …) or 'reset' (the connection is destroyed unanswered; libcurl
      // sends a request again by itself when a reused connection dies before any answer, so a
      // reset alone is not always a failure its caller sees); range: only the GETs whose Range
      // header matches it fail (the others read the object)
      lose(re, count = 1, { unreadable: how = [], range } = {}) { losses.push({ re, left: count, unreadable: how, range }); },
      clearFaults() { faults = []; },
      close: () => new Promise((r) => { server.closeAllConnections?.(); agent.destroy(); server.close(() => r()); }),
    })));
  });
}

// s3rver behind the verifying proxy, with s3rver's own interface: run() -> { port } (the
// proxy's, opts.port when given, so a restarted server keeps its address), close().
export class S3rver {
  constructor(opts) {
    this.opts = opts;
    this.proxy = null;
  }

  async run() {
    const { port = 0, credentials, tls, allowRefused, ...rest } = this.opts;
    this.inner = new S3rverImpl({ ...rest, port: 0 });
    const { port: innerPort } = await this.inner.run();
    this.proxy = await sigv4Proxy(innerPort, { port, credentials, tls });
    return { address: '127.0.0.1', port: this.proxy.port };
  }

  // Fails (after closing) when the proxy refused any request, unless opts.allowRefused: a test
  // whose S3 requests are signed wrong cannot pass by retrying around them.
  async close() {
    await this.proxy?.close();
    await this.inner?.close();
    if (this.proxy?.refused.length && !this.opts.allowRefused) {
      throw new Error(`the SigV4 proxy refused ${this.proxy.refused.length} request(s):\n${this.proxy.refused.map((r) => `${r.code}: ${r.why}`).join('\n')}`);
    }
  }
}

// A request to 127.0.0.1:port signed by AWS's own signer: key "/bucket/key" and query values
// decoded. signature: sent instead of the right one when set.
export async function awsRequest(port, method, key, { query = {}, body = '', secret = 'S3RVER', signature } = {}) {
  const host = `127.0.0.1:${port}`;
  const path = key.split('/').map(strict).join('/');
  const buf = Buffer.from(body);
  const signer = new SignatureV4({
    service: 's3', region: 'us-east-1', credentials: { accessKeyId: 'S3RVER', secretAccessKey: secret },
    sha256: Hash.bind(null, 'sha256'), uriEscapePath: false, applyChecksum: false,
  });
  const headers = { host, 'x-amz-content-sha256': createHash('sha256').update(buf).digest('hex') };
  const signed = await signer.sign({ method, protocol: 'http:', hostname: '127.0.0.1', port, path, query, headers, body: buf });
  if (signature) signed.headers.authorization = signed.headers.authorization.replace(/Signature=[0-9a-f]{64}/, `Signature=${signature}`);
  const qs = Object.entries(query).map(([k, v]) => `${strict(k)}=${strict(v)}`).join('&');
  return new Promise((resolve, reject) => {
    const r = http.request({ host: '127.0.0.1', port, method, path: qs ? `${path}?${qs}` : path, headers: { ...signed.headers, 'content-length': buf.length } }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, text }));
    });
    r.on('error', reject);
    r.end(buf);
  });
}
