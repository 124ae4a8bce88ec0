import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { EnvelopePeer } from '../ts/core/envelopepeer.js';
import { StreamAbortedError, StreamChannel } from '../ts/core/streams.js';
import { relayStreamAbortReasons, verifiedStreamBytes } from '../ts/client/relayclosures.js';
import { chunked, sha256Of } from './backup.fixture.js';
import { openSocketPair } from './helpers/sockets.js';

/**
 * The relay's own check of bytes it receives (a restored closure, a staged archive object):
 * whatever Cloudly sends, the relay proves length and sha256 before the bytes count, and tells
 * Cloudly why it refused them.
 */

const openPair = async (): Promise<{ cloudly: StreamChannel; relay: StreamChannel; close: () => Promise<void> }> => {
  const sockets = await openSocketPair();
  const cloudlyPeer = new EnvelopePeer(sockets.serverSocket);
  const relayPeer = new EnvelopePeer(sockets.clientSocket);
  return {
    cloudly: new StreamChannel(cloudlyPeer),
    relay: new StreamChannel(relayPeer),
    close: async () => {
      relayPeer.terminate();
      cloudlyPeer.terminate();
      await sockets.close();
    },
  };
};

const expected = randomBytes(2 * 1024 * 1024 + 3);

for (const [label, sent, reason] of [
  ['truncated bytes', expected.subarray(0, expected.byteLength - 1), relayStreamAbortReasons.tooShort],
  ['extra bytes', Buffer.concat([expected, Buffer.from([0])]), relayStreamAbortReasons.tooLong],
  ['bytes of the right length with another sha256', Buffer.from(expected).fill(7, 100, 101), relayStreamAbortReasons.sha256Mismatch],
] as const) {
  test(`${label} from Cloudly end the relay's iteration with ${reason}, and Cloudly learns it`, async () => {
    const pair = await openPair();
    try {
      const sender = pair.cloudly.openSender();
      const receiver = pair.relay.attachReceiver(sender.streamId);
      const sending = sender.pipeFrom(chunked(sent)).then(() => null, (error: unknown) => error);
      let yielded = 0;
      let failure: unknown = null;
      try {
        for await (const chunk of verifiedStreamBytes(receiver, { byteLength: expected.byteLength, sha256: sha256Of(expected) })) {
          yielded += chunk.byteLength;
        }
      } catch (error) {
        failure = error;
      }
      assert.ok(failure instanceof StreamAbortedError && failure.reason === reason, `relay fails with ${reason}`);
      const senderFailure = await sending;
      assert.ok(senderFailure instanceof StreamAbortedError && senderFailure.reason === reason && senderFailure.byPeer,
        'the sender is told the same reason');
      assert.ok(yielded <= expected.byteLength);
      assert.equal(pair.cloudly.openStreamCount, 0);
      assert.equal(pair.relay.openStreamCount, 0);
    } finally {
      await pair.close();
    }
  });
}

for (const transientChunks of [false, true]) {
  const freeing = transientChunks
    ? 'with transient chunks, each chunk is freed once the next is asked for'
    : 'without transient chunks, every chunk stays whole';
  test(`exact bytes pass the relay check and complete the stream with their length and sha256; ${freeing}`, async () => {
    const pair = await openPair();
    try {
      const sender = pair.cloudly.openSender();
      const receiver = pair.relay.attachReceiver(sender.streamId);
      const sending = sender.pipeFrom(chunked(expected));
      const copy = Buffer.alloc(expected.byteLength);
      const seen: Buffer[] = [];
      let copied = 0;
      for await (const chunk of verifiedStreamBytes(receiver, { byteLength: expected.byteLength, sha256: sha256Of(expected) }, { transientChunks })) {
        // The chunk in hand is whole; only the ones before it may have been freed.
        assert.ok(chunk.byteLength > 0);
        copied += chunk.copy(copy, copied);
        seen.push(chunk);
      }
      assert.equal(copied, expected.byteLength);
      assert.ok(copy.equals(expected));
      assert.deepEqual(await sending, { byteLength: expected.byteLength, sha256: sha256Of(expected) });
      const freed = seen.filter((chunkArg) => chunkArg.byteLength === 0).length;
      if (transientChunks) {
        assert.ok(freed >= seen.length / 2, `${freed} of ${seen.length} chunks were freed`);
      } else {
        assert.equal(freed, 0);
      }
    } finally {
      await pair.close();
    }
  });
}
