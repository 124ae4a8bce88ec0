/**
 * A bare WebSocket server, the baseline of bench/report.bench.ts: for every text frame it parses
 * the JSON, and answers one JSON frame naming the request's correlation id. Nothing else: no
 * authentication, no routing, no validation, no database. What one message costs this process is
 * what the machine charges any Node WebSocket server for a request at that pace.
 *
 * Run as a child process (`fork`, with `--import tsx`); it sends its port to the parent once it
 * listens.
 */
import { WebSocketServer } from 'ws';

const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
server.on('listening', () => {
  const address = server.address();
  process.send?.({ port: typeof address === 'object' && address ? address.port : 0 });
});
server.on('connection', (socketArg) => {
  socketArg.on('message', (dataArg) => {
    const request = JSON.parse(String(dataArg)) as { correlation?: { id?: string }; method?: string };
    socketArg.send(JSON.stringify({
      method: request.method,
      correlation: { id: request.correlation?.id, phase: 'response' },
      response: { accepted: 0, removed: [] },
    }));
  });
});
process.on('disconnect', () => process.exit(0));
