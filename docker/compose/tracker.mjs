// The compose sample's destination: a fake issue tracker that counts what reaches it, so
// `docker compose logs tracker` shows one issue per title however often the agent retries.
import { createServer } from 'node:http';

let next = 1;
createServer((req, res) => {
  let body = '';
  req.on('data', (chunk) => {
    body += chunk;
  });
  req.on('end', () => {
    if (req.method === 'GET' && req.url === '/healthz') return res.end('ok\n');
    const id = next++;
    console.log(`${req.method} ${req.url} idempotency-key=${req.headers['idempotency-key'] ?? '-'} body=${body}`);
    res.writeHead(201, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ id, html_url: `http://tracker:9090/issues/${id}` }));
  });
}).listen(9090, '0.0.0.0', () => console.log('tracker listening on :9090'));
