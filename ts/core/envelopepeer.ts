import { randomUUID } from 'node:crypto';
import { TypedResponseError, type TypedRouter } from '@api.global/typedrequest';
import type { WebSocket, RawData } from 'ws';

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

export class PeerCallError extends TypedResponseError {}

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
}

export interface IEnvelopePeerOptions {
  /** Routes requests that arrive from the other side; absent means "this side serves nothing". */
  router?: TypedRouter;
  /** Extra context handed to handlers as `tools.localData`. */
  localData?: Record<string, unknown>;
  /** Called for every text frame that is not a valid envelope. */
  onMalformedFrame?: (reasonArg: string) => void;
  /** Wraps routing, e.g. to count metrics; defaults to routing directly. */
  route?: (envelopeArg: IEnvelope) => Promise<IEnvelope | null>;
}

export const readEnvelope = (valueArg: unknown): IEnvelope | string => {
  if (!valueArg || typeof valueArg !== 'object' || Array.isArray(valueArg)) {
    return 'envelope must be a JSON object';
  }
  const envelope = valueArg as Record<string, unknown>;
  if (typeof envelope.method !== 'string' || envelope.method.length === 0 || envelope.method.length > 128) {
    return 'envelope method must be a string of 1 to 128 characters';
  }
  const correlation = envelope.correlation as Record<string, unknown> | undefined;
  if (!correlation || typeof correlation !== 'object' || typeof correlation.id !== 'string'
    || correlation.id.length === 0 || correlation.id.length > 128
    || (correlation.phase !== 'request' && correlation.phase !== 'response')) {
    return 'envelope correlation must be { id, phase: request | response }';
  }
  return valueArg as IEnvelope;
};

/**
 * The `invalid-request` answer to an envelope that cannot be served (malformed, unknown method,
 * too large): the same shape from every transport and both sides of a socket.
 */
export const refusalEnvelope = (
  correlationIdArg: string,
  methodArg: string,
  requestArg: unknown,
  reasonsArg: string[],
): IEnvelope => ({
  method: methodArg,
  request: requestArg,
  response: null,
  error: { text: 'The request was refused.', data: { code: 'invalid-request', retryable: false, reasons: reasonsArg } },
  correlation: { id: correlationIdArg, phase: 'response' },
});

/** The refusal of a method this side does not serve. */
export const methodNotServedEnvelope = (envelopeArg: IEnvelope): IEnvelope =>
  refusalEnvelope(envelopeArg.correlation.id, envelopeArg.method, envelopeArg.request, [`method ${envelopeArg.method} is not served`]);

export class EnvelopePeer {
  private readonly pending = new Map<string, IPendingCall>();
  private readonly binaryListeners = new Set<(dataArg: Buffer) => void>();
  private readonly closeListeners = new Set<() => void>();
  public closed = false;

  constructor(public readonly socket: WebSocket, private readonly options: IEnvelopePeerOptions = {}) {
    socket.on('message', (data: RawData, isBinary: boolean) => {
      if (isBinary) {
        // ws hands every message a buffer of its own that it never reuses, so the bytes are
        // passed on as they are: a copy per frame would only make garbage on the stream path.
        const buffer = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
        for (const listener of this.binaryListeners) {
          listener(buffer);
        }
        return;
      }
      void this.handleText(data.toString());
    });
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

  /** Calls a method on the other side and waits for its answer at most `timeoutMs`. */
  public call<TResponse = unknown>(methodArg: string, requestArg: unknown, timeoutMsArg: number): Promise<TResponse> {
    if (!this.isOpen) {
      return Promise.reject(new PeerUnavailableError('not-open', methodArg));
    }
    const id = randomUUID();
    const envelope: IEnvelope = { method: methodArg, request: requestArg, response: null, correlation: { id, phase: 'request' } };
    return new Promise<TResponse>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new PeerUnavailableError('timeout', methodArg));
      }, timeoutMsArg);
      this.pending.set(id, { method: methodArg, resolve: resolve as (valueArg: unknown) => void, reject, timer });
      this.socket.send(JSON.stringify(envelope), (error) => {
        if (error) {
          clearTimeout(timer);
          this.pending.delete(id);
          reject(new PeerUnavailableError('disconnected', methodArg));
        }
      });
    });
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

  private async handleText(textArg: string): Promise<void> {
    let parsed: unknown;
    try {
      parsed = JSON.parse(textArg);
    } catch {
      this.options.onMalformedFrame?.('frame is not valid JSON');
      return;
    }
    const envelope = readEnvelope(parsed);
    if (typeof envelope === 'string') {
      this.options.onMalformedFrame?.(envelope);
      return;
    }
    if (envelope.correlation.phase === 'response') {
      const call = this.pending.get(envelope.correlation.id);
      if (!call) {
        return;
      }
      this.pending.delete(envelope.correlation.id);
      clearTimeout(call.timer);
      if (envelope.error) {
        call.reject(new PeerCallError(envelope.error.text, envelope.error.data));
      } else {
        call.resolve(envelope.response);
      }
      return;
    }
    const answer = await this.routeRequest(envelope);
    if (answer && this.isOpen) {
      const { localData: _ignored, ...wire } = answer;
      this.socket.send(JSON.stringify(wire));
    }
  }

  private async routeRequest(envelopeArg: IEnvelope): Promise<IEnvelope | null> {
    if (this.options.route) {
      // Only the transport's own context travels; the server keeps live objects out of the
      // envelope, since typedrequest walks and copies whatever it carries.
      envelopeArg.localData = { ...(this.options.localData ?? {}) };
      return this.options.route(envelopeArg);
    }
    if (!this.options.router?.getTypedHandlerForMethod(envelopeArg.method)) {
      return methodNotServedEnvelope(envelopeArg);
    }
    return (await this.options.router.routeAndAddResponse(envelopeArg as never)) as unknown as IEnvelope;
  }
}
