// The relay benchmark's client: the same program runs on the host against the fake upstream
// directly and inside a box against the relay. Usage: node bench.js MODE BASE KEY [ARG]
// where BASE is the Messages API base URL (…/v1/messages is appended). It prints one JSON line.
const [mode, base, key, arg, warmArg] = process.argv.slice(2);
const now = () => performance.timeOrigin + performance.now(); // epoch ms, sub-ms precision
const headers = {'content-type': 'application/json', 'anthropic-version': '2023-06-01', 'x-api-key': key};
const post = (model, stream) => fetch(base + '/v1/messages', {
  method: 'POST', headers,
  body: JSON.stringify({model, max_tokens: 16, stream, messages: [{role: 'user', content: 'hi'}]}),
});
const out = (v) => console.log(JSON.stringify(v));

async function main() {
  switch (mode) {
  case 'small': { // N sequential small requests on one keep-alive client, after WARM (20) warm-up ones
    const n = +arg, warm = warmArg === undefined ? 20 : +warmArg, ms = [];
    for (let i = 0; i < n + warm; i++) {
      const t = now();
      const r = await post('small', false);
      await r.arrayBuffer();
      if (r.status !== 200) throw new Error('status ' + r.status);
      if (i >= warm) ms.push(now() - t);
    }
    return out({ms});
  }
  case 'events': { // the receipt time of every event of a stream
    const r = await post('events', true);
    const times = [], dec = new TextDecoder();
    let buf = '';
    for await (const c of r.body) {
      const t = now();
      buf += dec.decode(c, {stream: true});
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) { buf = buf.slice(i + 2); times.push(t); }
    }
    return out({times});
  }
  case 'bulk': { // one large streamed body
    const t = now();
    const r = await post('bulk', true);
    let n = 0;
    for await (const c of r.body) n += c.length;
    return out({bytes: n, ms: now() - t});
  }
  case 'revoke': { // a stream in progress; when it ends, the next request
    const r = await post('revoke', true);
    const dec = new TextDecoder();
    let chunks = 0, last = '';
    for await (const c of r.body) {
      if (++chunks === 3) require('fs').writeFileSync(arg, '');
      last = dec.decode(c);
    }
    const tEnd = now();
    const r2 = await post('small', false);
    await r2.arrayBuffer();
    return out({tEnd, tNext: now(), status: r2.status, errorEvent: last.includes('event: error')});
  }
  }
  throw new Error('unknown mode ' + mode);
}
main().catch((e) => { console.error(String(e)); process.exit(1); });
