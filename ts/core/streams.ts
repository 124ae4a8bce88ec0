import { randomBytes } from 'node:crypto';
import type { TVirtualStream } from '../interfaces/requests/backup.js';
import { releaseOwnMemory } from './memoryrelease.js';

/**
 * The project's own byte-stream channel.
 *
 * A JSON request or response carries a stream reference (`TVirtualStream`); the bytes
 * follow as binary frames on the same duplex, which can be any connection that carries
 * binary messages in order (the relay socket, or a bare `ws` pair in tests). Flow control
 * is credit based: a sender may only have as many bytes in flight as its receiver granted,
 * and a receiver grants again only after its consumer took bytes out, so neither side ever
 * holds more than one small window per stream. A sender sends nothing before the receiver
 * attaches, which lets a handler validate a request before any byte moves.
 *
 * Frame layout: byte 0 the frame version, byte 1 the kind, bytes 2..17 the stream id,
 * then the payload:
 * - data: the bytes (sender → receiver)
 * - end: empty; the sender sent everything (sender → receiver)
 * - abort: UTF-8 reason; either side gives up (both ways)
 * - credit: uint32 big-endian byte count the sender may additionally send (receiver → sender)
 * - complete: UTF-8 JSON receipt; the receiver consumed and settled the stream (receiver → sender)
 */

/** A connection that carries ordered binary messages. The foundation's socket peer is one. */
export interface IBinaryFramePeer {
  /** May return a promise (the foundation's peer does); its rejection is the drop, seen via onClose. */
  sendBinary(dataArg: Uint8Array): void | Promise<void>;
  onBinary(listenerArg: (dataArg: Uint8Array) => void): void;
  onClose(listenerArg: () => void): void;
}

export const streamFrameVersion = 1;
export const streamFrameKinds = { data: 1, end: 2, abort: 3, credit: 4, complete: 5 } as const;
export type TStreamFrameKind = keyof typeof streamFrameKinds;
const kindByCode = new Map<number, TStreamFrameKind>(
  Object.entries(streamFrameKinds).map(([name, code]) => [code, name as TStreamFrameKind]),
);

export const streamIdByteLength = 16;
export const streamFrameHeaderLength = 2 + streamIdByteLength;
/** Bytes a receiver lets one stream have in flight. */
export const defaultStreamWindowBytes = 8 * 1024 * 1024;
/**
 * Largest data payload per frame: 127 KiB, so that a whole frame (payload plus header) stays
 * under 128 KiB. With the production allocator settings (`MALLOC_MMAP_THRESHOLD_=131072`)
 * every larger block is a fresh mmap, and each received frame is one block, so larger payloads
 * paid a map, page faults and an unmap per frame (figures: bench/results/closure.md). Frame
 * plus header must also stay under the socket's maxPayload.
 */
export const defaultStreamChunkBytes = 127 * 1024;
/** A stream that makes no progress for this long is aborted. */
export const defaultStreamIdleTimeoutMs = 60_000;
/** Streams one channel may hold open at once; bounds memory per socket. */
export const maximumOpenStreamsPerChannel = 64;
const maximumAbortReasonBytes = 1024;
const maximumReceiptBytes = 64 * 1024;

/** Reasons the channel itself gives when it aborts a stream. */
export const streamAbortReasons = {
  disconnected: 'stream-peer-disconnected',
  idleTimeout: 'stream-idle-timeout',
  creditExceeded: 'stream-credit-exceeded',
  unknownStream: 'stream-unknown',
  tooManyStreams: 'stream-limit-reached',
  cancelled: 'stream-cancelled',
} as const;

/** A transfer that names a stream id another transfer on the socket holds (`invalid-request`). */
export const streamIdInUseReason = 'stream-id-in-use';

/** The stream was aborted by either side, by a timeout or by the connection dropping. */
export class StreamAbortedError extends Error {
  constructor(public readonly reason: string, public readonly byPeer: boolean) {
    super(`stream aborted: ${reason}`);
    this.name = 'StreamAbortedError';
  }
}

export const streamIdPattern = /^[0-9a-f]{32}$/;

export const isStreamId = (valueArg: unknown): valueArg is string =>
  typeof valueArg === 'string' && streamIdPattern.test(valueArg);

/** Every reason a stream reference is refused. */
export const validateStreamReference = (
  valueArg: unknown,
  directionArg: 'send' | 'receive',
  pathArg: string,
): string[] => {
  try {
    if (valueArg === null || typeof valueArg !== 'object' || Array.isArray(valueArg)
      || Object.getPrototypeOf(valueArg) !== Object.prototype) {
      return [`${pathArg} must be a stream reference object`];
    }
    const record = valueArg as Record<string, unknown>;
    const reasons: string[] = [];
    const keys = Object.keys(record);
    if (keys.length !== 3 || !['kind', 'streamId', 'direction'].every((key) => Object.hasOwn(record, key))) {
      reasons.push(`${pathArg} must have exactly the keys kind, streamId, direction`);
    }
    if (record.kind !== 'cloudly-byte-stream') {
      reasons.push(`${pathArg}.kind must be cloudly-byte-stream`);
    }
    if (!isStreamId(record.streamId)) {
      reasons.push(`${pathArg}.streamId must be 32 lowercase hex digits`);
    }
    if (record.direction !== directionArg) {
      reasons.push(`${pathArg}.direction must be ${directionArg}`);
    }
    return reasons;
  } catch {
    return [`${pathArg} could not be read as plain data`];
  }
};

/** Writes header and payload into `targetArg` (at least header + payload long); returns the frame. */
const writeStreamFrame = (
  targetArg: Buffer,
  kindArg: TStreamFrameKind,
  streamIdArg: string,
  payloadArg?: Uint8Array,
): Buffer => {
  const payloadLength = payloadArg ? payloadArg.byteLength : 0;
  targetArg[0] = streamFrameVersion;
  targetArg[1] = streamFrameKinds[kindArg];
  targetArg.write(streamIdArg, 2, streamIdByteLength, 'hex');
  if (payloadArg && payloadLength > 0) {
    targetArg.set(payloadArg, streamFrameHeaderLength);
  }
  return targetArg.byteLength === streamFrameHeaderLength + payloadLength
    ? targetArg
    : targetArg.subarray(0, streamFrameHeaderLength + payloadLength);
};

export const encodeStreamFrame = (
  kindArg: TStreamFrameKind,
  streamIdArg: string,
  payloadArg?: Uint8Array,
): Buffer => writeStreamFrame(
  Buffer.allocUnsafe(streamFrameHeaderLength + (payloadArg ? payloadArg.byteLength : 0)),
  kindArg,
  streamIdArg,
  payloadArg,
);

export interface IDecodedStreamFrame {
  kind: TStreamFrameKind;
  streamId: string;
  payload: Buffer;
}

/** The frame, or null for anything that is not a well-formed frame of this version. */
export const decodeStreamFrame = (dataArg: Uint8Array): IDecodedStreamFrame | null => {
  if (dataArg.byteLength < streamFrameHeaderLength || dataArg[0] !== streamFrameVersion) {
    return null;
  }
  const kind = kindByCode.get(dataArg[1]);
  if (!kind) {
    return null;
  }
  const buffer = Buffer.isBuffer(dataArg) ? dataArg : Buffer.from(dataArg.buffer, dataArg.byteOffset, dataArg.byteLength);
  return {
    kind,
    streamId: buffer.toString('hex', 2, streamFrameHeaderLength),
    payload: buffer.subarray(streamFrameHeaderLength),
  };
};

const truncateUtf8 = (textArg: string, maxBytesArg: number): Buffer => {
  const bytes = Buffer.from(textArg, 'utf8');
  return bytes.byteLength <= maxBytesArg ? bytes : bytes.subarray(0, maxBytesArg);
};

export interface IStreamChannelOptions {
  windowBytes?: number;
  chunkBytes?: number;
  idleTimeoutMs?: number;
}

/** A waiter that a frame or a timeout settles. */
interface IWakeup {
  promise: Promise<void>;
  wake: () => void;
}
const createWakeup = (): IWakeup => {
  let wake = (): void => undefined;
  const promise = new Promise<void>((resolve) => {
    wake = resolve;
  });
  return { promise, wake };
};

/**
 * One channel per connection. Create it once the connection is authenticated; it owns the
 * connection's binary frames and fails every open stream when the connection closes.
 */
export class StreamChannel {
  public readonly windowBytes: number;
  public readonly chunkBytes: number;
  public readonly idleTimeoutMs: number;
  private readonly senders = new Map<string, StreamSender>();
  private readonly receivers = new Map<string, StreamReceiver>();
  private closedReason: string | null = null;
  /**
   * Data frame buffers the socket already wrote out, kept for the next data frames so a
   * stream does not allocate (and leave for the collector) one fresh buffer per frame.
   * Only filled while this channel sends, and only when the peer reports when a frame was
   * written (its `sendBinary` returns a promise); emptied when the last sender settles.
   */
  private readonly spareFrames: Buffer[] = [];
  private readonly maximumSpareFrames: number;

  constructor(private readonly peer: IBinaryFramePeer, optionsArg: IStreamChannelOptions = {}) {
    this.windowBytes = optionsArg.windowBytes ?? defaultStreamWindowBytes;
    this.chunkBytes = Math.min(optionsArg.chunkBytes ?? defaultStreamChunkBytes, this.windowBytes);
    this.idleTimeoutMs = optionsArg.idleTimeoutMs ?? defaultStreamIdleTimeoutMs;
    this.maximumSpareFrames = Math.ceil(this.windowBytes / this.chunkBytes) + 1;
    peer.onBinary((dataArg) => this.handleFrame(dataArg));
    peer.onClose(() => this.close(streamAbortReasons.disconnected));
  }

  /** Streams currently open on this channel, both directions. */
  get openStreamCount(): number {
    return this.senders.size + this.receivers.size;
  }

  get isClosed(): boolean {
    return this.closedReason !== null;
  }

  /**
   * A new outgoing stream. Its reference goes into the JSON message; nothing is sent until
   * the other side attaches a receiver and grants credit.
   */
  openSender(): StreamSender {
    this.assertCapacity();
    const streamId = randomBytes(streamIdByteLength).toString('hex');
    const sender = new StreamSender(this, streamId);
    this.senders.set(streamId, sender);
    return sender;
  }

  /**
   * Attaches to a stream the other side announced, granting it the first window. With
   * `firstCreditAfterAnswer`, the first credit frame waits for the next turn of the event loop:
   * a handler that attaches and then answers `{ accepted: true }` has its answer frame written
   * first, so a relay that sets up its stream when it reads `accepted` sees the credit after it.
   */
  attachReceiver(streamIdArg: string, optionsArg: { firstCreditAfterAnswer?: boolean } = {}): StreamReceiver {
    if (!isStreamId(streamIdArg)) {
      throw new Error('stream id must be 32 lowercase hex digits');
    }
    if (this.receivers.has(streamIdArg) || this.senders.has(streamIdArg)) {
      throw new Error('stream id is already in use on this channel');
    }
    this.assertCapacity();
    const receiver = new StreamReceiver(this, streamIdArg);
    this.receivers.set(streamIdArg, receiver);
    if (optionsArg.firstCreditAfterAnswer) {
      setImmediate(() => receiver.start());
    } else {
      receiver.start();
    }
    return receiver;
  }

  /** Fails every open stream, e.g. because the connection dropped. */
  close(reasonArg: string = streamAbortReasons.disconnected): void {
    if (this.closedReason !== null) {
      return;
    }
    this.closedReason = reasonArg;
    for (const sender of [...this.senders.values()]) {
      sender.fail(new StreamAbortedError(reasonArg, false));
    }
    for (const receiver of [...this.receivers.values()]) {
      receiver.fail(new StreamAbortedError(reasonArg, false));
    }
  }

  /** @internal */
  send(kindArg: TStreamFrameKind, streamIdArg: string, payloadArg?: Uint8Array): void {
    if (this.closedReason !== null) {
      throw new StreamAbortedError(this.closedReason, false);
    }
    const sent = this.peer.sendBinary(encodeStreamFrame(kindArg, streamIdArg, payloadArg));
    if (sent && typeof sent.catch === 'function') {
      // A failed send means the connection is going away; onClose fails the streams.
      sent.catch(() => undefined);
    }
  }

  /**
   * @internal Sends one data frame (payload at most `chunkBytes`) from a reused buffer. The
   * buffer returns to the spares only after the socket reports the frame written, so no
   * frame is overwritten while it still waits in the socket.
   */
  sendData(streamIdArg: string, payloadArg: Uint8Array): void {
    if (this.closedReason !== null) {
      throw new StreamAbortedError(this.closedReason, false);
    }
    const buffer = this.spareFrames.pop() ?? Buffer.allocUnsafeSlow(streamFrameHeaderLength + this.chunkBytes);
    const sent = this.peer.sendBinary(writeStreamFrame(buffer, 'data', streamIdArg, payloadArg));
    if (sent && typeof sent.then === 'function') {
      sent.then(() => {
        if (this.senders.size > 0 && this.spareFrames.length < this.maximumSpareFrames) {
          this.spareFrames.push(buffer);
        }
      }, () => undefined);
    }
  }

  /** @internal */
  sendAbort(streamIdArg: string, reasonArg: string): void {
    if (this.closedReason === null) {
      try {
        this.send('abort', streamIdArg, truncateUtf8(reasonArg, maximumAbortReasonBytes));
      } catch {
        // The connection is already gone; the other side learns it from the drop.
      }
    }
  }

  /** @internal */
  forget(streamIdArg: string): void {
    this.senders.delete(streamIdArg);
    this.receivers.delete(streamIdArg);
    if (this.senders.size === 0) {
      this.spareFrames.length = 0;
    }
  }

  private assertCapacity(): void {
    if (this.closedReason !== null) {
      throw new StreamAbortedError(this.closedReason, false);
    }
    if (this.openStreamCount >= maximumOpenStreamsPerChannel) {
      throw new StreamAbortedError(streamAbortReasons.tooManyStreams, false);
    }
  }

  private handleFrame(dataArg: Uint8Array): void {
    const frame = decodeStreamFrame(dataArg);
    if (!frame) {
      return;
    }
    switch (frame.kind) {
      case 'data':
      case 'end': {
        const receiver = this.receivers.get(frame.streamId);
        if (receiver) {
          receiver.handleFrame(frame.kind, frame.payload);
        } else if (frame.kind === 'data') {
          // Nobody asked for these bytes: tell the sender to stop.
          this.sendAbort(frame.streamId, streamAbortReasons.unknownStream);
        }
        return;
      }
      case 'credit':
      case 'complete': {
        this.senders.get(frame.streamId)?.handleFrame(frame.kind, frame.payload);
        return;
      }
      case 'abort': {
        // The other side's reason reaches logs and callers: cut to the length this side sends.
        const reason = frame.payload.subarray(0, maximumAbortReasonBytes).toString('utf8');
        const error = new StreamAbortedError(reason || 'stream-aborted', true);
        this.senders.get(frame.streamId)?.fail(error);
        this.receivers.get(frame.streamId)?.fail(error);
        return;
      }
    }
  }
}

const channelsByPeer = new WeakMap<IBinaryFramePeer, StreamChannel>();

/**
 * The one channel of a connection, created on first use. Server handlers and the relay
 * client both reach the channel of their socket through this, so a connection never has
 * two channels competing for its frames.
 */
export const streamChannelOf = (peerArg: IBinaryFramePeer, optionsArg?: IStreamChannelOptions): StreamChannel => {
  let channel = channelsByPeer.get(peerArg);
  if (!channel) {
    channel = new StreamChannel(peerArg, optionsArg);
    channelsByPeer.set(peerArg, channel);
  }
  return channel;
};

/**
 * What both ends of a stream share: the stream settles once, either end can abort it with a
 * reason the other end is told, and each waits for its next event at most the channel's idle
 * time before it aborts the stream.
 */
abstract class StreamEnd {
  protected settled = false;
  protected error: StreamAbortedError | null = null;
  private wakeup: IWakeup | null = null;

  constructor(protected readonly channel: StreamChannel, public readonly streamId: string) {}

  get isSettled(): boolean {
    return this.settled;
  }

  /** Gives up on the stream and tells the other end why. */
  abort(reasonArg: string): void {
    if (this.settled) {
      return;
    }
    this.channel.sendAbort(this.streamId, reasonArg);
    this.fail(new StreamAbortedError(reasonArg, false));
  }

  /** @internal Settles the stream as failed with `errorArg`, telling whoever waits. */
  abstract fail(errorArg: StreamAbortedError): void;

  protected wake(): void {
    const wakeup = this.wakeup;
    this.wakeup = null;
    wakeup?.wake();
  }

  /** Waits for the next `wake()`; without one within the idle time the stream is aborted. */
  protected async nextWakeup(): Promise<void> {
    this.wakeup = createWakeup();
    const timer = setTimeout(() => this.abort(streamAbortReasons.idleTimeout), this.channel.idleTimeoutMs);
    try {
      await this.wakeup.promise;
    } finally {
      clearTimeout(timer);
    }
  }
}

/** The sending end: waits for credit, never has more than the granted window in flight. */
export class StreamSender extends StreamEnd {
  private credit = 0;
  private ended = false;
  private resolveCompletion!: (receiptArg: unknown) => void;
  private rejectCompletion!: (errorArg: StreamAbortedError) => void;
  /** Settles with the receiver's receipt once it consumed and settled the stream. */
  public readonly completion: Promise<unknown>;
  public bytesSent = 0;

  constructor(channelArg: StreamChannel, streamIdArg: string) {
    super(channelArg, streamIdArg);
    this.completion = new Promise<unknown>((resolve, reject) => {
      this.resolveCompletion = resolve;
      this.rejectCompletion = reject;
    });
    // A caller that never awaits completion must not crash the process on abort.
    this.completion.catch(() => undefined);
  }

  /** The reference to put into the JSON message. */
  reference<TDirection extends 'send' | 'receive'>(directionArg: TDirection): TVirtualStream<TDirection> {
    return { kind: 'cloudly-byte-stream', streamId: this.streamId, direction: directionArg };
  }

  /** Sends the bytes, waiting for credit as needed. Rejects if the stream was aborted. */
  async write(chunkArg: Uint8Array): Promise<void> {
    if (this.ended) {
      throw new Error('stream already ended');
    }
    let offset = 0;
    while (offset < chunkArg.byteLength) {
      await this.waitForCredit();
      const length = Math.min(chunkArg.byteLength - offset, this.credit, this.channel.chunkBytes);
      this.channel.sendData(this.streamId, chunkArg.subarray(offset, offset + length));
      this.credit -= length;
      this.bytesSent += length;
      offset += length;
    }
  }

  /**
   * Sends the end signal and waits for the receiver's receipt. Without `awaitReceipt` the stream
   * is done once the end signal is sent (completion resolves with null): the receiver's
   * `complete` or `abort` after that is neither needed nor read.
   */
  async end(optionsArg: { awaitReceipt?: boolean } = {}): Promise<unknown> {
    if (this.error) {
      throw this.error;
    }
    if (!this.ended) {
      this.ended = true;
      this.channel.send('end', this.streamId);
      if (optionsArg.awaitReceipt === false) {
        this.settle();
        this.resolveCompletion(null);
      } else {
        this.armCompletionTimeout();
      }
    }
    return this.completion;
  }

  /**
   * Writes everything the source yields, then ends; returns the receiver's receipt. When the
   * source fails, the receiver is told `reasonOfSourceErrorArg(error)` (default: cancelled).
   */
  async pipeFrom(
    sourceArg: AsyncIterable<Uint8Array>,
    reasonOfSourceErrorArg: (errorArg: unknown) => string = () => streamAbortReasons.cancelled,
    endOptionsArg: { awaitReceipt?: boolean } = {},
  ): Promise<unknown> {
    try {
      for await (const chunk of sourceArg) {
        await this.write(chunk);
      }
    } catch (error) {
      if (!(error instanceof StreamAbortedError)) {
        this.abort(reasonOfSourceErrorArg(error));
      }
      throw error;
    }
    return this.end(endOptionsArg);
  }

  /** @internal */
  handleFrame(kindArg: 'credit' | 'complete', payloadArg: Buffer): void {
    if (kindArg === 'credit') {
      if (payloadArg.byteLength !== 4) {
        return;
      }
      this.credit += payloadArg.readUInt32BE(0);
      this.wake();
      return;
    }
    if (!this.ended) {
      // A receipt before the end signal cannot describe what was sent.
      this.abort(streamAbortReasons.creditExceeded);
      return;
    }
    let receipt: unknown = null;
    try {
      receipt = payloadArg.byteLength > 0 ? JSON.parse(payloadArg.toString('utf8')) : null;
    } catch {
      receipt = null;
    }
    this.settle();
    this.resolveCompletion(receipt);
  }

  /** @internal */
  fail(errorArg: StreamAbortedError): void {
    if (this.settled) {
      return;
    }
    this.error = errorArg;
    this.settle();
    this.rejectCompletion(errorArg);
    this.wake();
  }

  private settle(): void {
    this.settled = true;
    if (this.completionTimer) {
      clearTimeout(this.completionTimer);
    }
    this.channel.forget(this.streamId);
  }

  private completionTimer: NodeJS.Timeout | null = null;

  private armCompletionTimeout(): void {
    this.completionTimer = setTimeout(() => this.abort(streamAbortReasons.idleTimeout), this.channel.idleTimeoutMs);
    this.completionTimer.unref();
  }

  private async waitForCredit(): Promise<void> {
    while (this.credit <= 0) {
      if (this.error) {
        throw this.error;
      }
      await this.nextWakeup();
    }
    if (this.error) {
      throw this.error;
    }
  }
}

/**
 * The receiving end: an async iterable of chunks that grants credit as its consumer takes
 * bytes out. Iteration ends at the sender's end signal and throws `StreamAbortedError` on
 * abort, timeout or disconnect. After consuming, call `complete(receipt)` or `abort(reason)`.
 */
export class StreamReceiver extends StreamEnd implements AsyncIterable<Buffer> {
  private readonly queue: Buffer[] = [];
  private outstandingCredit = 0;
  private consumedSinceGrant = 0;
  private ended = false;
  public bytesReceived = 0;

  /** @internal */
  start(): void {
    this.grant(this.channel.windowBytes);
  }

  /** Tells the sender the bytes are settled, with a JSON receipt it receives as completion. */
  complete(receiptArg: unknown = null): void {
    if (this.settled) {
      throw this.error ?? new Error('stream already settled');
    }
    if (!this.ended) {
      throw new Error('stream cannot complete before its end signal');
    }
    const payload = Buffer.from(JSON.stringify(receiptArg ?? null), 'utf8');
    if (payload.byteLength > maximumReceiptBytes) {
      throw new Error('stream receipt is too large');
    }
    this.settled = true;
    this.channel.forget(this.streamId);
    this.channel.send('complete', this.streamId, payload);
  }

  /**
   * The consumer is done with a chunk this receiver yielded (it copied or wrote the bytes out).
   * When the chunk's memory holds its own frame and nothing else (ws assembled the frame in a
   * buffer of its own, as it does for frames that span socket reads), that memory is freed now
   * rather than at the collector's next full collection (see memoryrelease.ts), and the chunk
   * reads as empty afterwards. Memory shared with other bytes is left to the collector.
   */
  release(chunkArg: Uint8Array): void {
    releaseOwnMemory(chunkArg, streamFrameHeaderLength);
  }

  /** @internal */
  handleFrame(kindArg: 'data' | 'end', payloadArg: Buffer): void {
    if (this.settled || this.ended) {
      return;
    }
    if (kindArg === 'end') {
      this.ended = true;
      this.wake();
      return;
    }
    if (payloadArg.byteLength > this.outstandingCredit) {
      this.abort(streamAbortReasons.creditExceeded);
      return;
    }
    this.outstandingCredit -= payloadArg.byteLength;
    this.bytesReceived += payloadArg.byteLength;
    this.queue.push(payloadArg);
    this.wake();
  }

  /** @internal */
  fail(errorArg: StreamAbortedError): void {
    if (this.settled) {
      return;
    }
    this.settled = true;
    this.error = errorArg;
    this.queue.length = 0;
    this.channel.forget(this.streamId);
    this.wake();
  }

  [Symbol.asyncIterator](): AsyncIterator<Buffer> {
    return {
      next: async (): Promise<IteratorResult<Buffer>> => {
        for (;;) {
          const chunk = this.queue.shift();
          if (chunk) {
            this.consumedSinceGrant += chunk.byteLength;
            if (this.consumedSinceGrant >= this.channel.windowBytes / 8 && !this.ended) {
              this.grant(this.consumedSinceGrant);
              this.consumedSinceGrant = 0;
            }
            return { value: chunk, done: false };
          }
          if (this.error) {
            throw this.error;
          }
          if (this.ended) {
            return { value: undefined, done: true };
          }
          await this.nextWakeup();
        }
      },
      return: async (): Promise<IteratorResult<Buffer>> => {
        // The consumer stopped early (break or throw): the sender must not wait for credit.
        if (!this.ended) {
          this.abort(streamAbortReasons.cancelled);
        }
        return { value: undefined, done: true };
      },
    };
  }

  private grant(bytesArg: number): void {
    if (this.settled || bytesArg <= 0) {
      return;
    }
    const payload = Buffer.allocUnsafe(4);
    payload.writeUInt32BE(bytesArg, 0);
    this.outstandingCredit += bytesArg;
    try {
      this.channel.send('credit', this.streamId, payload);
    } catch (error) {
      this.fail(error instanceof StreamAbortedError ? error : new StreamAbortedError(streamAbortReasons.disconnected, false));
    }
  }
}
