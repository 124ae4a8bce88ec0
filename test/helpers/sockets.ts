import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';

export interface ISocketPair {
  serverSocket: WebSocket;
  clientSocket: WebSocket;
  /** Terminates both sockets and closes the server. */
  close: () => Promise<void>;
}

/** A real WebSocket server on loopback and one client connected to it. */
export const openSocketPair = async (): Promise<ISocketPair> => {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((resolve) => wss.once('listening', resolve));
  const serverSocketPromise = new Promise<WebSocket>((resolve) => wss.once('connection', resolve));
  const clientSocket = new WebSocket(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}`);
  await new Promise<void>((resolve, reject) => {
    clientSocket.once('open', resolve);
    clientSocket.once('error', reject);
  });
  const serverSocket = await serverSocketPromise;
  return {
    serverSocket,
    clientSocket,
    close: async () => {
      clientSocket.terminate();
      serverSocket.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
};
