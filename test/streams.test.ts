import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import type { WebSocket } from 'ws';
import {
  StreamAbortedError,
  StreamChannel,
  decodeStreamFrame,
  encodeStreamFrame,
  streamAbortReasons,
  validateStreamReference,
  type IBinaryFramePeer,
  type IStreamChannelOptions,
} from '../ts/core/streams.js';
import { waitFor } from './helpers/cloudly.js';
import { openSocketPair } from './helpers/sockets.js';

/** A `ws` socket as a binary frame peer: the same three hooks the relay socket offers. */
const peerOf = (socketArg: WebSocket): IBinaryFramePeer => ({
  sendBinary: (dataArg) => socketArg.send(dataArg, { binary: true }),
  onBinary: (listenerArg) => socketArg.on('message', (dataArg, isBinaryArg) => {
    if (isBinaryArg) {
      listenerArg(dataArg as Buffer);
    }
  }),
  onClose: (listenerArg) => socketArg.on('close', listenerArg),
});

interface IPair {
  server: StreamChannel;
  client: StreamChannel;
  serverSocket: WebSocket;
  clientSocket: WebSocket;
  close: () => Promise<void>;
}

/** A real WebSocket server and client on loopback, each side wrapped in a channel. */
const openPair = async (optionsArg: IStreamChannelOptions = {}): Promise<IPair> => {
  const sockets = await openSocketPair();
  return {
    ...sockets,
    server: new StreamChannel(peerOf(sockets.serverSocket), optionsArg),
    client: new StreamChannel(peerOf(sockets.clientSocket), optionsArg),
  };
};

const drain = async (sourceArg: AsyncIterable<Buffer>): Promise<{ length: number; sha256: string }> => {
  const hash = createHash('sha256');
  let length = 0;
  for await (const chunk of sourceArg) {
    hash.update(chunk);
    length += chunk.byteLength;
  }
  return { length, sha256: hash.digest('hex') };
};

test('a stream carries exact bytes and returns the receiver receipt to the sender', async () => {
  const pair = await openPair();
  try {
    const bytes = randomBytes(5 * 1024 * 1024 + 17);
    const sender = pair.client.openSender();
    const reference = sender.reference('send');
    assert.deepEqual(validateStreamReference(reference, 'send', 'closure'), []);
    const receiver = pair.server.attachReceiver(reference.streamId);
    const received = drain(receiver);
    await sender.write(bytes);
    const completion = sender.end();
    const result = await received;
    receiver.complete({ stored: true, length: result.length });
    assert.deepEqual(await completion, { stored: true, length: bytes.byteLength });
    assert.equal(result.sha256, createHash('sha256').update(bytes).digest('hex'));
    assert.equal(pair.client.openStreamCount, 0);
    assert.equal(pair.server.openStreamCount, 0);
  } finally {
    await pair.close();
  }
});

test('a sender sends nothing before a receiver attaches, and never more than the window', async () => {
  const windowBytes = 64 * 1024;
  const pair = await openPair({ windowBytes, chunkBytes: 16 * 1024 });
  try {
    const sender = pair.client.openSender();
    const writing = sender.write(randomBytes(10 * windowBytes));
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(sender.bytesSent, 0, 'no credit, no bytes');
    const receiver = pair.server.attachReceiver(sender.streamId);
    await waitFor(() => receiver.bytesReceived === windowBytes, 'the receiver holds one full window');
    for (let i = 0; i < 20; i += 1) {
      await new Promise((resolve) => setImmediate(resolve));
    }
    assert.equal(sender.bytesSent, windowBytes, 'the sender stops at the granted window');
    assert.equal(receiver.bytesReceived, windowBytes);
    const received = drain(receiver);
    await writing;
    const completion = sender.end();
    assert.equal((await received).length, 10 * windowBytes);
    receiver.complete();
    assert.equal(await completion, null);
  } finally {
    await pair.close();
  }
});

test('a receiver abort reaches the sender with its reason', async () => {
  const pair = await openPair({ windowBytes: 64 * 1024 });
  try {
    const sender = pair.client.openSender();
    const receiver = pair.server.attachReceiver(sender.streamId);
    receiver.abort('closure-refused');
    await assert.rejects(sender.write(randomBytes(1024 * 1024)), (error: unknown) =>
      error instanceof StreamAbortedError && error.reason === 'closure-refused' && error.byPeer);
    await assert.rejects(sender.completion, StreamAbortedError);
  } finally {
    await pair.close();
  }
});

test('a sender abort ends the receiver iteration with its reason', async () => {
  const pair = await openPair();
  try {
    const sender = pair.client.openSender();
    const receiver = pair.server.attachReceiver(sender.streamId);
    await sender.write(randomBytes(1000));
    sender.abort('export-failed');
    await assert.rejects(drain(receiver), (error: unknown) =>
      error instanceof StreamAbortedError && error.reason === 'export-failed');
    assert.equal(pair.server.openStreamCount, 0);
  } finally {
    await pair.close();
  }
});

test('a dropped connection fails every open stream on both sides', async () => {
  const pair = await openPair({ windowBytes: 64 * 1024 });
  try {
    const outgoing = pair.client.openSender();
    const incomingSender = pair.server.openSender();
    const receiverOnServer = pair.server.attachReceiver(outgoing.streamId);
    const receiverOnClient = pair.client.attachReceiver(incomingSender.streamId);
    const settle = (promiseArg: Promise<unknown>): Promise<unknown> => promiseArg.then(() => 'resolved', (error: unknown) => error);
    const writing = settle(outgoing.write(randomBytes(1024 * 1024)));
    // The server takes one chunk and then stops consuming, so no more credit is granted and the
    // 1 MiB write is certainly still waiting inside the 64 KiB window when the socket drops.
    const serverChunks = receiverOnServer[Symbol.asyncIterator]();
    assert.equal((await serverChunks.next()).done, false);
    const clientDrain = settle(drain(receiverOnClient));
    pair.clientSocket.terminate();
    const serverDrain = settle(drain({ [Symbol.asyncIterator]: () => serverChunks }));
    const isDisconnect = (error: unknown): boolean =>
      error instanceof StreamAbortedError && error.reason === streamAbortReasons.disconnected;
    assert.ok(isDisconnect(await writing));
    assert.ok(isDisconnect(await serverDrain));
    assert.ok(isDisconnect(await clientDrain));
    assert.ok(isDisconnect(await settle(incomingSender.write(Buffer.from('x')))));
    assert.equal(pair.client.openStreamCount, 0);
    assert.equal(pair.server.openStreamCount, 0);
    assert.throws(() => pair.server.openSender(), StreamAbortedError);
  } finally {
    await pair.close();
  }
});

test('bytes beyond the granted credit abort the stream', async () => {
  const windowBytes = 64 * 1024;
  const pair = await openPair({ windowBytes });
  try {
    const streamId = randomBytes(16).toString('hex');
    const aborts: string[] = [];
    pair.clientSocket.on('message', (dataArg, isBinaryArg) => {
      const frame = isBinaryArg ? decodeStreamFrame(dataArg as Buffer) : null;
      if (frame?.kind === 'abort') {
        aborts.push(frame.payload.toString('utf8'));
      }
    });
    const receiver = pair.server.attachReceiver(streamId);
    const received = drain(receiver);
    pair.clientSocket.send(encodeStreamFrame('data', streamId, randomBytes(windowBytes + 1)), { binary: true });
    await assert.rejects(received, (error: unknown) =>
      error instanceof StreamAbortedError && error.reason === streamAbortReasons.creditExceeded);
    await waitFor(() => aborts.length > 0, 'the abort arrives');
    assert.deepEqual(aborts, [streamAbortReasons.creditExceeded]);
  } finally {
    await pair.close();
  }
});

test('data for a stream nobody attached is refused with stream-unknown', async () => {
  const pair = await openPair();
  try {
    const streamId = randomBytes(16).toString('hex');
    const aborts: string[] = [];
    pair.clientSocket.on('message', (dataArg, isBinaryArg) => {
      const frame = isBinaryArg ? decodeStreamFrame(dataArg as Buffer) : null;
      if (frame?.kind === 'abort' && frame.streamId === streamId) {
        aborts.push(frame.payload.toString('utf8'));
      }
    });
    pair.clientSocket.send(encodeStreamFrame('data', streamId, Buffer.from('stray')), { binary: true });
    await waitFor(() => aborts.length > 0, 'the abort arrives');
    assert.deepEqual(aborts, [streamAbortReasons.unknownStream]);
  } finally {
    await pair.close();
  }
});

test('a stream that makes no progress is aborted by the idle timeout', async () => {
  const pair = await openPair({ idleTimeoutMs: 50 });
  try {
    const sender = pair.client.openSender();
    const receiver = pair.server.attachReceiver(sender.streamId);
    await assert.rejects(drain(receiver), (error: unknown) =>
      error instanceof StreamAbortedError && error.reason === streamAbortReasons.idleTimeout);
    await assert.rejects(sender.completion, (error: unknown) =>
      error instanceof StreamAbortedError && error.reason === streamAbortReasons.idleTimeout);
  } finally {
    await pair.close();
  }
});

test('streams run in both directions at once without mixing bytes', async () => {
  const pair = await openPair({ windowBytes: 128 * 1024 });
  try {
    const up = randomBytes(2 * 1024 * 1024);
    const down = randomBytes(3 * 1024 * 1024 + 5);
    const upSender = pair.client.openSender();
    const downSender = pair.server.openSender();
    const upReceiver = pair.server.attachReceiver(upSender.streamId);
    const downReceiver = pair.client.attachReceiver(downSender.streamId);
    const upDrain = drain(upReceiver).then((result) => {
      upReceiver.complete('up');
      return result;
    });
    const downDrain = drain(downReceiver).then((result) => {
      downReceiver.complete('down');
      return result;
    });
    const [upResult, downResult, upReceipt, downReceipt] = await Promise.all([
      upDrain,
      downDrain,
      upSender.write(up).then(() => upSender.end()),
      downSender.write(down).then(() => downSender.end()),
    ]);
    assert.equal(upReceipt, 'up');
    assert.equal(downReceipt, 'down');
    assert.equal(upResult.sha256, createHash('sha256').update(up).digest('hex'));
    assert.equal(downResult.sha256, createHash('sha256').update(down).digest('hex'));
  } finally {
    await pair.close();
  }
});

test('over the socket peer, reused data frame buffers never change bytes of concurrent streams', async () => {
  // EnvelopePeer reports when ws wrote a frame, so the channel reuses its data frame buffers.
  const { EnvelopePeer } = await import('../ts/core/envelopepeer.js');
  const sockets = await openSocketPair();
  const serverPeer = new EnvelopePeer(sockets.serverSocket);
  const clientPeer = new EnvelopePeer(sockets.clientSocket);
  try {
    // A window larger than the kernel's socket buffers, and receivers that start late, so
    // frames wait inside the socket while the senders keep going.
    const options = { windowBytes: 16 * 1024 * 1024, chunkBytes: 64 * 1024 };
    const server = new StreamChannel(serverPeer, options);
    const client = new StreamChannel(clientPeer, options);
    const payloads = [randomBytes(12 * 1024 * 1024 + 11), randomBytes(10 * 1024 * 1024 + 7), randomBytes(4 * 1024 * 1024)];
    const results = await Promise.all(payloads.map(async (payloadArg, indexArg) => {
      // Two streams go server → client, one client → server, all at once.
      const [from, to] = indexArg < 2 ? [server, client] : [client, server];
      const sender = from.openSender();
      const receiver = to.attachReceiver(sender.streamId);
      const drained = new Promise((resolve) => setTimeout(resolve, 100)).then(() => drain(receiver)).then((resultArg) => {
        receiver.complete(resultArg.length);
        return resultArg;
      });
      // The source reuses one buffer for every piece, as the blob store's transient reads do.
      const scratch = Buffer.allocUnsafe(100_000);
      const source = async function* (): AsyncIterable<Buffer> {
        for (let offset = 0; offset < payloadArg.byteLength; offset += scratch.byteLength) {
          const length = payloadArg.copy(scratch, 0, offset, Math.min(offset + scratch.byteLength, payloadArg.byteLength));
          yield scratch.subarray(0, length);
        }
      };
      const receipt = await sender.pipeFrom(source());
      return { receipt, result: await drained };
    }));
    results.forEach(({ receipt, result }, indexArg) => {
      assert.equal(receipt, payloads[indexArg].byteLength);
      assert.equal(result.sha256, createHash('sha256').update(payloads[indexArg]).digest('hex'));
    });
    assert.equal(server.openStreamCount, 0);
    assert.equal(client.openStreamCount, 0);
  } finally {
    clientPeer.terminate();
    serverPeer.terminate();
    await sockets.close();
  }
});

test('a stream reference is refused with every reason', () => {
  assert.deepEqual(validateStreamReference(null, 'send', 'closure'), ['closure must be a stream reference object']);
  assert.deepEqual(
    validateStreamReference({ kind: 'other', streamId: 'XYZ', direction: 'receive', extra: 1 }, 'send', 'closure'),
    [
      'closure must have exactly the keys kind, streamId, direction',
      'closure.kind must be cloudly-byte-stream',
      'closure.streamId must be 32 lowercase hex digits',
      'closure.direction must be send',
    ],
  );
  assert.equal(decodeStreamFrame(Buffer.from([9, 1])), null);
  const frame = decodeStreamFrame(encodeStreamFrame('credit', 'ab'.repeat(16), Buffer.from([0, 0, 1, 0])));
  assert.equal(frame?.kind, 'credit');
  assert.equal(frame?.streamId, 'ab'.repeat(16));
  assert.equal(frame?.payload.readUInt32BE(0), 256);
});

test('released chunks free their own frame memory at once; bytes copied out first stay exact, shared memory is left alone', async () => {
  const { canReleaseMemory } = await import('../ts/core/memoryrelease.js');
  assert.equal(canReleaseMemory(), true, 'this runtime can detach ArrayBuffers (native or through the flagged builtin)');
  const pair = await openPair();
  try {
    const bytes = randomBytes(4 * 1024 * 1024 + 5);
    const sender = pair.client.openSender();
    const receiver = pair.server.attachReceiver(sender.streamId);
    const sent = sender.pipeFrom((async function* () {
      yield bytes;
      // A small piece: ws hands it over as a view into a socket read, shared with other bytes.
      yield Buffer.from('tail');
    })());
    const copy = Buffer.alloc(bytes.byteLength + 4);
    let copied = 0;
    let freed = 0;
    let kept = 0;
    for await (const chunk of receiver) {
      const length = chunk.byteLength;
      chunk.copy(copy, copied);
      copied += length;
      receiver.release(chunk);
      if (chunk.byteLength === 0) {
        freed += 1;
      } else {
        assert.equal(chunk.byteLength, length, 'a chunk is either freed whole or left as it was');
        kept += 1;
      }
    }
    receiver.complete(copied);
    assert.equal(await sent, bytes.byteLength + 4);
    assert.ok(copy.equals(Buffer.concat([bytes, Buffer.from('tail')])), 'every byte arrived as sent');
    // 4 MiB in frames of the default chunk size: each came in a buffer of its own.
    assert.ok(freed >= Math.floor(bytes.byteLength / (127 * 1024)), `freed ${freed} frames`);
    assert.ok(kept >= 1, 'the small piece shared its memory and was not freed');
  } finally {
    await pair.close();
  }
});
