import { randomUUID } from 'node:crypto';
import type { TypedRouter } from '@api.global/typedrequest';
import type { WebSocket, RawData } from 'ws';
import { boundaryReasons, parseBoundaryJson, type IBoundaryProblem } from './boundary.js';
import { CloudlyRefusal, refusalFor, type IRefusal } from './refusal.js';
import { methodNotServedReason, type IRefusalCause } from '../interfaces/data/refusal.js';
import { takeHeldMessages } from './heldmessages.js';

/**
 * One side of a typedrequest conversation over a WebSocket: one JSON envelope per text frame in
 * both directions, binary frames handed to whoever listens (the stream channel). Both the server
 * (per socket) and the clients use it, so the two sides cannot disagree about the framing.
 */

export interface IEnvelope {
  method: string;
  request?: unknown;
  response?: unknown;
  error?: { text: string; data: unknown } | null;
  correlation: { id: string; phase: 'request' | 'response' };
  localData?: unknown;
}

/** The other side's refusal of a call this side made, with its text and error data as they came. */
export class PeerCallError extends CloudlyRefusal {}

/** The reason a call through a peer ended without an answer. */
export type TPeerFailure = 'timeout' | 'disconnected' | 'not-open';

export class PeerUnavailableError extends Error {
  constructor(public readonly failure: TPeerFailure, method: string) {
    super(`call ${method} ended without an answer: ${failure}`);
    this.name = 'PeerUnavailableError';
  }
}

interface IPendingCall {
  method: string;
  resolve: (valueArg: unknown) => void;
  reject: (errorArg: unknown) => void;
  timer: NodeJS.Timeout;
  /** The length of the call's frame as sent. */
  bytes: number;
}

export interface IEnvelopePeerOptions {
  /** Routes requests that arrive from the other side; absent means "this side serves nothing". */
  router?: TypedRouter;
  /** Extra context handed to handlers as `tools.localData`. */
  localData?: Record<string, unknown>;
  /** Wraps routing, e.g. to count metrics; defaults to routing directly. */
  route?: (envelopeArg: IEnvelope) => Promise<IEnvelope | null>;
  /** Limits on what the other side may send; absent on clients, which only answer Cloudly. */
  limits?: ISocketRequestLimits;
  /** Logs a failure that escaped routing and returns the error id the answer carries. */
  onRouteFailure?: (errorArg: unknown) => string;
  /** Told before the peer closes a socket that broke its limits. */
  onPolicyViolation?: (reasonArg: string) => void;
  /**
   * Told of every unsolicited response (an answer to no call this side made) on a socket with
   * limits, with whether it closed the socket.
   */
  onUnsolicitedResponse?: (closedArg: boolean) => void;
}

/**
 * The close code of a socket that kept sending answers to calls never made (more than
 * `unsolicitedResponseLimit.responses` in `windowMs`); its close reason is `unsolicited-responses`.
 */
export const unsolicitedResponsesCloseCode = 4003;
export const unsolicitedResponsesCloseReason = 'unsolicited-responses';
/** The reason an unsolicited response is answered with (`invalid-request`). */
export const unsolicitedResponseReason = 'unsolicited-response';
/** Unsolicited responses one socket may send in a window before it is closed. */
export const unsolicitedResponseLimit = { responses: 100, windowMs: 60_000 } as const;
/**
 * Ids of calls that ended without their answer (timed out) that are remembered, so an answer that
 * comes late is dropped as late and not counted as unsolicited.
 */
const rememberedEndedCalls = 1024;

/** Per-socket limits on requests (see `EnvelopePeer.admitRequest`) and on frame sizes. */
export interface ISocketRequestLimits {
  /** Largest request frame; larger ones are answered `invalid-request`. */
  requestFrameBytes: number;
  /** Largest answer to a call this side made (relay inventories can be large). */
  answerFrameBytes: number;
  framesPerSecond: number;
  frameBurst: number;
  pendingRequests: number;
}

/** A call whose answer arrived but could not be read (too large, too deep, not an envelope). */
export class PeerAnswerMalformedError extends Error {
  constructor(public readonly method: string, public readonly reasons: string[]) {
    super(`the answer to ${method} could not be read: ${reasons.join('; ')}`);
    this.name = 'PeerAnswerMalformedError';
  }
}

/**
 * The correlation id, method and phase of a text too large to parse, read from its first and last
 * bytes: both ends are where encoders put these members.
 */
export const peekEnvelopeTop = (textArg: string): { correlationId: string | null; method: string | null; phase: 'request' | 'response' | null } => {
  const ends = `${textArg.slice(0, 512)}\u0000${textArg.slice(-512)}`;
  const correlation = /"correlation"\s*:\s*\{\s*"id"\s*:\s*"([^"\\]{1,128})"\s*,\s*"phase"\s*:\s*"(request|response)"/.exec(ends);
  const method = /"method"\s*:\s*"([^"\\]{1,128})"/.exec(ends);
  return {
    correlationId: correlation ? correlation[1] : null,
    method: method ? method[1] : null,
    phase: correlation ? correlation[2] as 'request' | 'response' : null,
  };
};

/** What one text frame (or HTTP body) turned out to be, read only through the boundary parser. */
export type TFrame =
  | { kind: 'request'; envelope: IEnvelope }
  | { kind: 'response'; correlationId: string; response: unknown; error: { text: string; data: unknown } | null }
  | { kind: 'refused'; correlationId: string | null; method: string | null; phase: 'request' | 'response' | null; reasons: string[]; causes: IRefusalCause[] };

const envelopeIdLength = 128;
/** A peer's error text is cut to this length: it reaches logs and administrators. */
const peerErrorTextLength = 1024;

const ownString = (recordArg: Record<string, unknown>, keyArg: string, maxArg: number): string | null => {
  const value = Object.hasOwn(recordArg, keyArg) ? recordArg[keyArg] : undefined;
  return typeof value === 'string' && value.length > 0 && value.length <= maxArg ? value : null;
};

const ownRecord = (recordArg: Record<string, unknown>, keyArg: string): Record<string, unknown> | null => {
  const value = Object.hasOwn(recordArg, keyArg) ? recordArg[keyArg] : undefined;
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? value as Record<string, unknown> : null;
};

/**
 * Reads one envelope from its JSON text. A request comes back as a fresh envelope holding only
 * `method`, `request` and `correlation`: whatever else the sender put beside them (its own
 * `error`, `response`, `localData`) never reaches a handler. A refusal carries the correlation id
 * and method whenever the top of the envelope could be read, so the sender learns which call failed.
 */
export const readFrame = (textArg: string, textNameArg = 'frame'): TFrame => {
  const parsed = parseBoundaryJson(textArg, '', textNameArg);
  const top = parsed.value !== null && typeof parsed.value === 'object' && !Array.isArray(parsed.value)
    ? parsed.value as Record<string, unknown>
    : null;
  const method = top ? ownString(top, 'method', envelopeIdLength) : null;
  const correlation = top ? ownRecord(top, 'correlation') : null;
  const correlationId = correlation ? ownString(correlation, 'id', envelopeIdLength) : null;
  const phaseValue = correlation && Object.hasOwn(correlation, 'phase') ? correlation.phase : undefined;
  const phase = phaseValue === 'request' || phaseValue === 'response' ? phaseValue : null;
  // The distinct tokens in reasons, every problem a cause.
  const refused = (problemsArg: IBoundaryProblem[]): TFrame =>
    ({ kind: 'refused', correlationId, method, phase, reasons: [...new Set(problemsArg.map((problem) => problem.reason))], causes: problemsArg });
  const envelopeProblem = (pathArg: string, messageArg: string): IBoundaryProblem => ({ path: pathArg, reason: boundaryReasons.envelopeInvalid, message: messageArg });
  if (!parsed.ok) {
    return refused(parsed.problems);
  }
  if (!top) {
    return refused([envelopeProblem('envelope', 'must be a JSON object')]);
  }
  if (phase === 'response' && correlationId !== null) {
    const errorValue = Object.hasOwn(top, 'error') ? top.error : null;
    if (errorValue === null || errorValue === undefined) {
      return { kind: 'response', correlationId, response: Object.hasOwn(top, 'response') ? top.response : undefined, error: null };
    }
    const error = ownRecord(top, 'error');
    const text = error && Object.hasOwn(error, 'text') ? error.text : undefined;
    if (!error || typeof text !== 'string') {
      return refused([envelopeProblem('error', 'must be { text, data }')]);
    }
    return {
      kind: 'response',
      correlationId,
      response: undefined,
      error: { text: text.slice(0, peerErrorTextLength), data: Object.hasOwn(error, 'data') ? error.data : null },
    };
  }
  const problems: IBoundaryProblem[] = [];
  if (method === null) {
    problems.push(envelopeProblem('method', `must be a string of 1 to ${envelopeIdLength} characters`));
  }
  if (correlationId === null || phase === null) {
    problems.push(envelopeProblem('correlation', 'must be { id, phase: request | response }'));
  }
  if (problems.length > 0) {
    return refused(problems);
  }
  return {
    kind: 'request',
    envelope: {
      method: method!,
      request: Object.hasOwn(top, 'request') ? top.request : undefined,
      response: null,
      correlation: { id: correlationId!, phase: 'request' },
    },
  };
};

/**
 * The `invalid-request` answer to an envelope that cannot be served (malformed, unknown method,
 * too large): the same shape from every transport and both sides of a socket. The request is not
 * echoed: it may hold a password or an identity.
 */
export const refusalEnvelope = (correlationIdArg: string, methodArg: string, reasonsArg: string[], causesArg: IRefusalCause[] = []): IEnvelope =>
  errorEnvelope(correlationIdArg, methodArg, refusalFor('invalid-request', reasonsArg, { causes: causesArg }));

/** The reason a frame larger than the socket accepts is refused with (`invalid-request`); the limit is in its cause. */
export const frameTooLargeReason = 'frame-too-large';

/** The refusal of a frame over `limitBytesArg`: the token, and the limit in its sentence. */
export const frameTooLarge = (limitBytesArg: number): CloudlyRefusal =>
  refusalFor('invalid-request', [frameTooLargeReason], { causes: [{ path: 'frame', message: `exceeds ${limitBytesArg} bytes` }] });

/** The answer envelope carrying one refusal. */
export const errorEnvelope = (correlationIdArg: string, methodArg: string, errorArg: IRefusal): IEnvelope => ({
  method: methodArg,
  response: null,
  error: { text: errorArg.errorText, data: errorArg.errorData },
  correlation: { id: correlationIdArg, phase: 'response' },
});

/** The refusal of a method this side does not serve: the token, and the method named for people. */
export const methodNotServedEnvelope = (envelopeArg: IEnvelope): IEnvelope =>
  errorEnvelope(envelopeArg.correlation.id, envelopeArg.method, refusalFor('invalid-request', [methodNotServedReason], {
    causes: [{ path: 'method', message: `method ${envelopeArg.method} is not served` }],
  }));

/**
 * Runs the router's handler for one request envelope and builds the answer, or null when the
 * method is not served. The handler is called directly rather than through typedrequest's
 * `routeAndAddResponse`, whose payload codec recurses over the whole request and the whole answer
 * and turns markers into live streams: the boundary parser has already read the request once.
 * `localData` reaches the handler as `tools.localData` as it is, live objects included.
 */
export const answerWithHandler = async (
  routerArg: TypedRouter,
  envelopeArg: IEnvelope,
  localDataArg: Record<string, unknown>,
): Promise<IEnvelope | null> => {
  const handler = routerArg.getTypedHandlerForMethod(envelopeArg.method);
  if (!handler) {
    return null;
  }
  const working = { ...envelopeArg, response: null, error: null, localData: localDataArg } as Record<string, unknown>;
  await handler.addResponse(working as never);
  const answer: IEnvelope = {
    method: envelopeArg.method,
    response: working.response ?? null,
    correlation: { id: envelopeArg.correlation.id, phase: 'response' },
  };
  if (working.error) {
    answer.error = working.error as IEnvelope['error'];
  }
  return answer;
};

export class EnvelopePeer {
  private readonly pending = new Map<string, IPendingCall>();
  private readonly binaryListeners = new Set<(dataArg: Buffer) => void>();
  private readonly closeListeners = new Set<() => void>();
  public closed = false;
  private requestsInFlight = 0;
  private tokens: number;
  private tokensAt = Date.now();
  private refusalsInRow = 0;
  /** Ids of calls that timed out, oldest first (at most `rememberedEndedCalls`). */
  private readonly endedCalls = new Set<string>();
  private unsolicitedWindow = { startedAt: 0, count: 0 };
  /** Bytes of the calls this side sent whose answer has not come (the frames as sent). */
  private unansweredBytes = 0;

  constructor(public readonly socket: WebSocket, private readonly options: IEnvelopePeerOptions = {}) {
    this.tokens = options.limits?.frameBurst ?? 0;
    const onMessage = (data: RawData, isBinary: boolean): void => {
      if (isBinary) {
        // ws hands every message a buffer of its own that it never reuses, so the bytes are
        // passed on as they are: a copy per frame would only make garbage on the stream path.
        const buffer = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
        for (const listener of this.binaryListeners) {
          listener(buffer);
        }
        return;
      }
      const text = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
      void this.handleText(text.toString(), text.length);
    };
    socket.on('message', onMessage);
    // Frames that arrived between the socket's open and this peer (a client's socket, held by
    // holdEarlyMessages): handled first, in order, and the holder let go.
    for (const [data, isBinary] of takeHeldMessages(socket)) {
      onMessage(data, isBinary);
    }
    socket.on('close', () => this.handleClose());
    socket.on('error', () => this.handleClose());
  }

  public get isOpen(): boolean {
    return !this.closed && this.socket.readyState === this.socket.OPEN;
  }

  public onBinary(listenerArg: (dataArg: Buffer) => void): () => void {
    this.binaryListeners.add(listenerArg);
    return () => this.binaryListeners.delete(listenerArg);
  }

  public onClose(listenerArg: () => void): () => void {
    if (this.closed) {
      queueMicrotask(listenerArg);
    } else {
      this.closeListeners.add(listenerArg);
    }
    return () => this.closeListeners.delete(listenerArg);
  }

  /** Sends a binary frame; resolves when ws has handed it to the kernel. */
  public sendBinary(dataArg: Uint8Array): Promise<void> {
    return new Promise((resolve, reject) => {
      if (!this.isOpen) {
        reject(new PeerUnavailableError('not-open', 'binary frame'));
        return;
      }
      this.socket.send(dataArg, { binary: true }, (error) => (error ? reject(error) : resolve()));
    });
  }

  /** Bytes queued in the socket but not yet written; the stream channel's backpressure signal. */
  public get bufferedAmount(): number {
    return this.socket.bufferedAmount;
  }

  /**
   * Bytes of this side's calls still waiting for their answer, as sent: what a peer that stops
   * reading holds of them in this process, the kernel and itself (the watch's bound per socket).
   */
  public get unansweredCallBytes(): number {
    return this.unansweredBytes;
  }

  /** Calls a method on the other side and waits for its answer at most `timeoutMs`. */
  public call<TResponse = unknown>(methodArg: string, requestArg: unknown, timeoutMsArg: number): Promise<TResponse> {
    if (!this.isOpen) {
      return Promise.reject(new PeerUnavailableError('not-open', methodArg));
    }
    const id = randomUUID();
    const envelope: IEnvelope = { method: methodArg, request: requestArg, response: null, correlation: { id, phase: 'request' } };
    const text = JSON.stringify(envelope);
    return new Promise<TResponse>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.forget(id);
        this.rememberEnded(id);
        reject(new PeerUnavailableError('timeout', methodArg));
      }, timeoutMsArg);
      this.pending.set(id, { method: methodArg, resolve: resolve as (valueArg: unknown) => void, reject, timer, bytes: text.length });
      this.unansweredBytes += text.length;
      this.socket.send(text, (error) => {
        if (error) {
          clearTimeout(timer);
          this.forget(id);
          reject(new PeerUnavailableError('disconnected', methodArg));
        }
      });
    });
  }

  /** Removes a pending call (answered, timed out or failed) and its bytes. */
  private forget(idArg: string): IPendingCall | undefined {
    const call = this.pending.get(idArg);
    if (call) {
      this.pending.delete(idArg);
      this.unansweredBytes -= call.bytes;
    }
    return call;
  }

  private rememberEnded(idArg: string): void {
    this.endedCalls.add(idArg);
    if (this.endedCalls.size > rememberedEndedCalls) {
      this.endedCalls.delete(this.endedCalls.values().next().value as string);
    }
  }

  public close(codeArg = 1000, reasonArg = 'closing'): void {
    if (this.socket.readyState === this.socket.OPEN || this.socket.readyState === this.socket.CONNECTING) {
      this.socket.close(codeArg, reasonArg);
    }
    this.handleClose();
  }

  /** Ends the socket at once, as a crash or a cut cable would. */
  public terminate(): void {
    this.socket.terminate();
    this.handleClose();
  }

  private handleClose(): void {
    if (this.closed) {
      return;
    }
    this.closed = true;
    for (const [id, call] of this.pending) {
      clearTimeout(call.timer);
      call.reject(new PeerUnavailableError('disconnected', call.method));
      this.pending.delete(id);
    }
    this.unansweredBytes = 0;
    this.endedCalls.clear();
    for (const listener of this.closeListeners) {
      try {
        listener();
      } catch {
        // A listener's failure must not keep the others from learning about the close.
      }
    }
    this.closeListeners.clear();
    this.binaryListeners.clear();
  }

  private async handleText(textArg: string, byteLengthArg: number): Promise<void> {
    const limits = this.options.limits;
    if (limits && byteLengthArg > Math.max(limits.requestFrameBytes, limits.answerFrameBytes)) {
      // Not parsed at all: too large for anything this socket accepts. The top of the envelope is
      // peeked so the sender's call fails at once instead of timing out, and the socket stays.
      const peeked = peekEnvelopeTop(textArg);
      this.refuseFrame(peeked.correlationId, peeked.method, peeked.phase, frameTooLarge(Math.max(limits.requestFrameBytes, limits.answerFrameBytes)));
      return;
    }
    const frame = readFrame(textArg);
    if (frame.kind === 'response') {
      if (!this.settleCall(frame.correlationId, frame.error, frame.response)) {
        this.unsolicitedResponse(frame.correlationId, null, frame.error);
      }
      return;
    }
    if (frame.kind === 'refused') {
      if (frame.phase === null && frame.correlationId === null) {
        this.settleUnreadableFrame(textArg, frame.reasons, frame.causes);
        return;
      }
      this.refuseFrame(frame.correlationId, frame.method, frame.phase, refusalFor('invalid-request', frame.reasons, { causes: frame.causes }));
      return;
    }
    const { envelope } = frame;
    if (limits) {
      if (byteLengthArg > limits.requestFrameBytes) {
        this.sendEnvelope(errorEnvelope(envelope.correlation.id, envelope.method, frameTooLarge(limits.requestFrameBytes)));
        return;
      }
      const refusal = this.admitRequest(limits);
      if (refusal) {
        this.sendEnvelope(errorEnvelope(envelope.correlation.id, envelope.method, refusal));
        return;
      }
    }
    this.requestsInFlight++;
    let answer: IEnvelope | null;
    try {
      answer = await this.routeRequest(envelope);
    } catch (error) {
      // A failure while routing one frame answers that frame; the socket and the process go on.
      const errorId = this.options.onRouteFailure?.(error) ?? randomUUID();
      answer = errorEnvelope(envelope.correlation.id, envelope.method, new CloudlyRefusal(
        'Cloudly failed to answer this request.', { code: 'internal', retryable: true, errorId },
      ));
    } finally {
      this.requestsInFlight--;
    }
    if (answer) {
      const { localData: _ignored, request: _notEchoed, ...wire } = answer;
      this.sendEnvelope(wire as IEnvelope);
    }
  }

  /** Settles a pending call with the other side's answer; false when no call of this id is pending. */
  private settleCall(correlationIdArg: string, errorArg: { text: string; data: unknown } | null, responseArg: unknown, malformedArg?: string[]): boolean {
    const call = this.forget(correlationIdArg);
    if (!call) {
      return false;
    }
    clearTimeout(call.timer);
    if (malformedArg) {
      call.reject(new PeerAnswerMalformedError(call.method, malformedArg));
    } else if (errorArg) {
      call.reject(new PeerCallError(errorArg.text, errorArg.data));
    } else {
      call.resolve(responseArg);
    }
    return true;
  }

  /**
   * An answer that settles no call: late (its call timed out), dropped; otherwise unsolicited. A
   * socket with limits (Cloudly's side) answers an unsolicited response, so that every frame it
   * gets is answered or its socket closed, and closes a socket that keeps sending them
   * (`unsolicitedResponseLimit`). The answer is itself a response: a peer answering it again would
   * bounce between the two sides, so an unsolicited response that is this refusal is not answered.
   * A client (no limits) drops them, as it always did.
   */
  private unsolicitedResponse(correlationIdArg: string | null, methodArg: string | null, errorArg: { text: string; data: unknown } | null): void {
    if (correlationIdArg !== null && this.endedCalls.delete(correlationIdArg)) {
      return;
    }
    if (!this.options.limits || !this.isOpen) {
      return;
    }
    const now = Date.now();
    if (now - this.unsolicitedWindow.startedAt >= unsolicitedResponseLimit.windowMs) {
      this.unsolicitedWindow = { startedAt: now, count: 0 };
    }
    this.unsolicitedWindow.count++;
    const closing = this.unsolicitedWindow.count > unsolicitedResponseLimit.responses;
    this.options.onUnsolicitedResponse?.(closing);
    if (closing) {
      this.options.onPolicyViolation?.('socket kept sending answers to calls never made');
      this.close(unsolicitedResponsesCloseCode, unsolicitedResponsesCloseReason);
      return;
    }
    const reasons = (errorArg?.data as { reasons?: unknown } | null | undefined)?.reasons;
    if (Array.isArray(reasons) && reasons.includes(unsolicitedResponseReason)) {
      return;
    }
    this.sendEnvelope(errorEnvelope(correlationIdArg ?? '', methodArg ?? '', refusalFor('invalid-request', [unsolicitedResponseReason], {
      causes: [{ path: 'correlation.id', message: 'names no call this side made' }],
    })));
  }

  /**
   * A frame whose envelope could not be read at all (not JSON, not an object): it may be the answer
   * a call is waiting for, so no call is left to wait for its timeout. The correlation id is looked
   * for in the text; when it names a pending call, that call fails at once. When nothing can be
   * attributed, every call pending on this socket fails at once: the other side broke the protocol
   * and none of its answers can be told apart. The sender is answered as for any unreadable frame.
   */
  private settleUnreadableFrame(textArg: string, reasonsArg: string[], causesArg: IRefusalCause[]): void {
    const peeked = peekEnvelopeTop(textArg);
    // A broken answer fails its call with the problems in words (the caller names them as causes).
    const sentences = causesArg.map((causeArg) => (causeArg.path ? `${causeArg.path} ${causeArg.message}` : causeArg.message));
    // A call ended here is remembered as ended: its real answer, if one still comes, is dropped as
    // late, not refused as an answer to no call.
    if (peeked.correlationId !== null && this.pending.has(peeked.correlationId)) {
      this.settleCall(peeked.correlationId, null, undefined, sentences);
      this.rememberEnded(peeked.correlationId);
      return;
    }
    if (peeked.correlationId === null && peeked.phase !== 'request') {
      for (const correlationId of [...this.pending.keys()]) {
        this.settleCall(correlationId, null, undefined, ['answer frame names no pending call', ...sentences]);
        this.rememberEnded(correlationId);
      }
    }
    if (peeked.phase === 'response') {
      this.unsolicitedResponse(peeked.correlationId, peeked.method, null);
      return;
    }
    this.sendEnvelope(errorEnvelope(peeked.correlationId ?? '', peeked.method ?? '', refusalFor('invalid-request', reasonsArg, { causes: causesArg })));
  }

  /** A frame that cannot be served: a broken answer fails its call, a broken request is answered. */
  private refuseFrame(correlationIdArg: string | null, methodArg: string | null, phaseArg: 'request' | 'response' | null, refusalArg: IRefusal): void {
    if (phaseArg === 'response' && correlationIdArg !== null && this.pending.has(correlationIdArg)) {
      this.settleCall(correlationIdArg, null, undefined, (refusalArg.errorData as { reasons?: string[] }).reasons ?? []);
      return;
    }
    if (phaseArg === 'response') {
      this.unsolicitedResponse(correlationIdArg, methodArg, null);
      return;
    }
    this.sendEnvelope(errorEnvelope(correlationIdArg ?? '', methodArg ?? '', refusalArg));
  }

  /**
   * Rate and concurrency limits for requests arriving on this socket: a token bucket of
   * `framesPerSecond` with `frameBurst` tokens, and at most `pendingRequests` being handled at
   * once. A refused request is answered `unavailable` with `retryAfterMs`; a socket that keeps
   * sending after a burst's worth of refusals is closed (1008, policy violation).
   */
  private admitRequest(limitsArg: ISocketRequestLimits): IRefusal | null {
    const now = Date.now();
    this.tokens = Math.min(limitsArg.frameBurst, this.tokens + ((now - this.tokensAt) * limitsArg.framesPerSecond) / 1000);
    this.tokensAt = now;
    let retryAfterMs = 0;
    let reason = '';
    if (this.tokens < 1) {
      retryAfterMs = Math.ceil(((1 - this.tokens) * 1000) / limitsArg.framesPerSecond);
      reason = 'socket-rate-exceeded';
    } else if (this.requestsInFlight >= limitsArg.pendingRequests) {
      retryAfterMs = 100;
      reason = 'socket-busy';
    } else {
      this.tokens -= 1;
      this.refusalsInRow = 0;
      return null;
    }
    this.refusalsInRow++;
    if (this.refusalsInRow > limitsArg.frameBurst) {
      this.options.onPolicyViolation?.('socket kept sending after being refused');
      this.close(1008, 'request flood');
    }
    return refusalFor('unavailable', [reason], { retryAfterMs });
  }

  private sendEnvelope(envelopeArg: IEnvelope): void {
    if (this.isOpen) {
      this.socket.send(JSON.stringify(envelopeArg));
    }
  }

  private async routeRequest(envelopeArg: IEnvelope): Promise<IEnvelope | null> {
    if (this.options.route) {
      return this.options.route(envelopeArg);
    }
    const answer = this.options.router
      ? await answerWithHandler(this.options.router, envelopeArg, this.options.localData ?? {})
      : null;
    return answer ?? methodNotServedEnvelope(envelopeArg);
  }

}
