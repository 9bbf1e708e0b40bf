import express from 'express';

/**
 * Server (a) of the benchmark, the ceiling: bare Express answering 204 to every push, without
 * reading the body. Started as a child process exactly like the worker (same Node flags, same
 * loader), it logs one JSON line with its port, as the worker does, and nothing per request.
 * `GET /count` tells how many pushes it answered and how many connections it accepted.
 */

const app = express();
app.disable('x-powered-by');
let pushes = 0;
let connections = 0;
app.post('/push', (_req, res) => {
  pushes += 1;
  res.status(204).end();
});
app.get('/count', (_req, res) => {
  res.status(200).json({ pushes, connections });
});

// The benchmark starts this file as a program; PORT 0 asks for any free port.
const server = app.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  process.stdout.write(`${JSON.stringify({ severity: 'INFO', message: 'bare server listening', port })}\n`);
});
// Counted to tell whether a pusher reuses connections (the emulator's cost per push depends on it).
server.on('connection', () => {
  connections += 1;
});
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => server.close(() => process.exit(0)));
}
