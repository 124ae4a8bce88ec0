import { decodeJwt } from 'jose';
import { WebSocket, type RawData } from 'ws';
import { EnvelopePeer, PeerCallError, errorEnvelope, frameTooLarge, peekEnvelopeTop, readFrame, type IEnvelope } from './envelopepeer.js';
import { refuse } from './errors.js';
import { defaultSocketLivenessTiming, watchSocketLiveness, type ISocketLivenessTiming } from './socketliveness.js';
import type { TCloudlyLogger } from './logger.js';

/**
 * Instance links: the persistent WebSocket between two Cloudly instances over which one forwards
 * relay calls to the other (docs/multi-instance.md). An HTTP request per forwarded call cost a few
 * milliseconds of request handling and process wake-ups on both sides; a link carries any number
 * of calls at once, each an envelope of the relay sockets' framing (ts/core/envelopepeer.ts) with
 * its own correlation id.
 *
 * The forwarding instance opens the link lazily, one per holder, with the internal token of
 * `POST /internal/relaycall` in the upgrade's Authorization header; the holder checks it exactly as
 * the HTTP endpoint does and serves every call on the link through that same endpoint's code, so
 * an answer or refusal is the one HTTP would carry. A link ends its calls in flight the moment it
 * drops; the caller answers them as HTTP answers a holder that does not answer.
 */

export const internalLinkPath = '/internal/link';

/** What travels in the body of a forwarded call, on a link or over `POST /internal/relaycall`. */
export interface IForwardedRelayCall {
  clusterId: string;
  method: string;
  request: unknown;
  /** What is left of the caller's timeout; the holder never waits longer. */
  timeoutMs: number;
}

/** The holder's answer: the relay's response, or the refusal exactly as the holder would answer it. */
export type TForwardedRelayAnswer = { response: unknown } | { error: { text: string; data: unknown } };

/** The envelope methods spoken on a link (forwarding instance to holder; the holder calls nothing). */
export const instanceLinkMethods = {
  /** One forwarded relay call: the request is the HTTP endpoint's body, `IForwardedRelayCall`. */
  call: 'forwardRelayCall',
  /** `{ token }`: a fresh internal token replaces the link's before the old one expires. */
  reauthenticate: 'reauthenticateLink',
} as const;

export const instanceLinkLimits = Object.freeze({
  /**
   * Calls one link carries at once. A forwarding instance sends further calls over HTTP; a holder
   * refuses them `unavailable` (it can only get more when calls the forwarder gave up on are still
   * being served).
   */
  callsInFlight: 256,
  /** A request frame may exceed the HTTP endpoint's body limit by this much (the envelope around the call). */
  requestFrameOverheadBytes: 16 * 1024,
  /**
   * The largest answer frame a forwarding instance reads: the ceiling of
   * CLOUDLY_RELAY_ANSWER_LIMIT_BYTES (no relay answer a holder accepts is larger) and the envelope.
   */
  answerFrameBytes: 256 * 1024 * 1024 + 64 * 1024,
  /** Opening a link may take this long (within the call's own time) before the call goes over HTTP. */
  openTimeoutMs: 5_000,
  /** After a link could not be opened, calls to that instance go over HTTP for this long. */
  reopenAfterMs: 5_000,
  /** How long the holder may take to accept a link's new token. */
  reauthenticateTimeoutMs: 5_000,
});

/** A compact JWT as the transport reads bearers. */
const bearerPattern = /^[A-Za-z0-9._~+/=-]{1,8192}$/;

/** The expiry of a token this side made or a holder verified, epoch ms; 0 when it carries none. */
const expiryOf = (tokenArg: string): number => {
  try {
    const { exp } = decodeJwt(tokenArg);
    return typeof exp === 'number' ? exp * 1000 : 0;
  } catch {
    return 0;
  }
};

const subjectOf = (tokenArg: string): string | null => {
  try {
    const { sub } = decodeJwt(tokenArg);
    return typeof sub === 'string' ? sub : null;
  } catch {
    return null;
  }
};

/** setTimeout fires at once beyond this delay; tokens live a minute, this only guards the arithmetic. */
const longestTimerMs = 2_147_483_647;

const bufferOf = (dataArg: RawData): Buffer =>
  (Buffer.isBuffer(dataArg) ? dataArg : Array.isArray(dataArg) ? Buffer.concat(dataArg) : Buffer.from(dataArg));

export interface IInstanceLinkTarget {
  instanceId: string;
  internalUrl: string;
}

/** A link's call ended without the holder's answer: the link dropped, or the answer could not be read. */
export class InstanceLinkFailure extends Error {
  constructor(messageArg: string, causeArg?: unknown) {
    super(messageArg, { cause: causeArg });
    this.name = 'InstanceLinkFailure';
  }
}

class InstanceLink {
  public inFlight = 0;
  /** Whether a call was made since the last authentication. */
  public usedSinceAuthentication = true;
  public reauthenticationTimer: NodeJS.Timeout | null = null;

  constructor(
    public readonly target: IInstanceLinkTarget,
    public readonly peer: EnvelopePeer,
    /** Epoch ms at which the holder stops accepting the link's current token. */
    public tokenExpiresAt: number,
  ) {}

  public async call(callArg: IForwardedRelayCall, timeoutMsArg: number): Promise<TForwardedRelayAnswer> {
    this.inFlight++;
    this.usedSinceAuthentication = true;
    try {
      return { response: await this.peer.call(instanceLinkMethods.call, callArg, timeoutMsArg) };
    } catch (error) {
      if (error instanceof PeerCallError) {
        // The holder's refusal, exactly as the HTTP endpoint would have answered it.
        return { error: { text: error.errorText, data: error.errorData } };
      }
      throw new InstanceLinkFailure(`the link to ${this.target.instanceId} gave no answer: ${(error as Error).message}`, error);
    } finally {
      this.inFlight--;
    }
  }
}

/**
 * The forwarding side: one link per holder, opened by the first call that needs it and shared by
 * every call after. `call` answers null when no link can carry a call (it cannot be opened, e.g. an
 * instance without links, or it is full): the caller then uses `POST /internal/relaycall`.
 */
export class InstanceLinks {
  private readonly links = new Map<string, InstanceLink>();
  private readonly opening = new Map<string, Promise<InstanceLink | null>>();
  /** Instances whose link could not be opened, until when calls to them go over HTTP. */
  private readonly noLinkUntil = new Map<string, number>();
  private stopped = false;

  constructor(
    private readonly options: {
      /** An internal token made for the target; with `expiringAfterArg`, one that expires later than that (epoch ms). */
      token(targetInstanceIdArg: string, expiringAfterArg?: number): Promise<string>;
      logger: TCloudlyLogger;
      liveness?: ISocketLivenessTiming;
    },
  ) {}

  /** Links open right now (for diagnosis and tests). */
  public get openLinks(): number {
    return [...this.links.values()].filter((link) => link.peer.isOpen).length;
  }

  /**
   * Sends one forwarded call over the link to its holder, opening the link first when there is
   * none, and resolves with the holder's answer or refusal as it sent it. Rejects with
   * `InstanceLinkFailure` when the link ends before the answer, or the answer does not come by
   * `deadlineArg` (epoch ms). Null: no link carries this call, send it over HTTP.
   */
  public async call(targetArg: IInstanceLinkTarget, callArg: IForwardedRelayCall, deadlineArg: number): Promise<TForwardedRelayAnswer | null> {
    const link = await this.linkTo(targetArg, deadlineArg);
    if (!link || link.inFlight >= instanceLinkLimits.callsInFlight) {
      return null;
    }
    return link.call(callArg, Math.max(1, deadlineArg - Date.now()));
  }

  /** Closes every link (this instance stops); later calls go over HTTP. */
  public close(): void {
    this.stopped = true;
    for (const link of this.links.values()) {
      link.peer.close(1001, 'cloudly is stopping');
    }
    this.links.clear();
  }

  private async linkTo(targetArg: IInstanceLinkTarget, deadlineArg: number): Promise<InstanceLink | null> {
    const current = this.links.get(targetArg.instanceId);
    if (current && current.peer.isOpen && current.target.internalUrl === targetArg.internalUrl) {
      return current;
    }
    if (this.stopped || (this.noLinkUntil.get(targetArg.instanceId) ?? 0) > Date.now()) {
      return null;
    }
    let opening = this.opening.get(targetArg.instanceId);
    if (!opening) {
      opening = this.open(targetArg, deadlineArg).finally(() => this.opening.delete(targetArg.instanceId));
      this.opening.set(targetArg.instanceId, opening);
    }
    return opening;
  }

  private async open(targetArg: IInstanceLinkTarget, deadlineArg: number): Promise<InstanceLink | null> {
    let token: string;
    try {
      token = await this.options.token(targetArg.instanceId);
    } catch (error) {
      this.options.logger.warn({ err: error, holder: targetArg.instanceId }, 'no internal token for an instance link; forwarding over HTTP');
      return null;
    }
    const url = `${targetArg.internalUrl.replace(/^http/, 'ws')}${internalLinkPath}`;
    const socket = new WebSocket(url, {
      headers: { authorization: `Bearer ${token}` },
      maxPayload: instanceLinkLimits.answerFrameBytes,
      perMessageDeflate: false,
      handshakeTimeout: Math.max(1, Math.min(instanceLinkLimits.openTimeoutMs, deadlineArg - Date.now())),
    });
    // ws reports a refused or failed upgrade as an error event; without a listener it would throw.
    socket.on('error', () => undefined);
    const refusal = await new Promise<string | null>((resolve) => {
      socket.once('open', () => resolve(null));
      socket.once('unexpected-response', (_request, response) => {
        response.resume();
        socket.terminate();
        resolve(`the upgrade was answered HTTP ${response.statusCode}`);
      });
      socket.once('close', () => resolve('the connection closed during the upgrade'));
      socket.once('error', (error: Error) => resolve(error.message));
    });
    if (refusal !== null || this.stopped) {
      socket.terminate();
      this.noLinkUntil.set(targetArg.instanceId, Date.now() + instanceLinkLimits.reopenAfterMs);
      if (this.noLinkUntil.size > 1024) {
        this.noLinkUntil.delete(this.noLinkUntil.keys().next().value!);
      }
      if (refusal !== null) {
        this.options.logger.warn({ holder: targetArg.instanceId, url, reason: refusal, retryAfterMs: instanceLinkLimits.reopenAfterMs },
          'instance link could not be opened; forwarding over HTTP');
      }
      return null;
    }
    this.noLinkUntil.delete(targetArg.instanceId);
    const peer = new EnvelopePeer(socket);
    const link = new InstanceLink(targetArg, peer, expiryOf(token));
    const stopLiveness = watchSocketLiveness(socket, this.options.liveness ?? defaultSocketLivenessTiming,
      () => this.options.logger.warn({ holder: targetArg.instanceId }, 'instance link missed its pongs: terminated'));
    socket.once('close', (codeArg: number, reasonArg: Buffer) => {
      stopLiveness();
      if (link.reauthenticationTimer) {
        clearTimeout(link.reauthenticationTimer);
      }
      if (this.links.get(targetArg.instanceId) === link) {
        this.links.delete(targetArg.instanceId);
      }
      this.options.logger.info({ holder: targetArg.instanceId, code: codeArg, reason: reasonArg.toString().slice(0, 128) }, 'instance link closed');
    });
    this.links.set(targetArg.instanceId, link);
    link.usedSinceAuthentication = true;
    this.scheduleReauthentication(link);
    this.options.logger.info({ holder: targetArg.instanceId, url }, 'instance link opened');
    return link;
  }

  /**
   * Re-authentication when half of the token's remaining life is over: an internal token is
   * reused for at most half its life, so at least a quarter of it (15 s) is left for the exchange
   * and for clocks that differ.
   */
  private scheduleReauthentication(linkArg: InstanceLink): void {
    const delay = (linkArg.tokenExpiresAt - Date.now()) / 2;
    linkArg.reauthenticationTimer = setTimeout(() => void this.reauthenticate(linkArg), Math.min(longestTimerMs, Math.max(0, delay)));
    linkArg.reauthenticationTimer.unref();
  }

  /**
   * Hands the holder a fresh token before the link's expires (the holder closes a link whose token
   * ran out, calls in flight and all). An idle link is closed instead; a failed attempt closes it:
   * the next call opens a new one.
   */
  private async reauthenticate(linkArg: InstanceLink): Promise<void> {
    linkArg.reauthenticationTimer = null;
    if (!linkArg.peer.isOpen) {
      return;
    }
    if (!linkArg.usedSinceAuthentication && linkArg.inFlight === 0) {
      linkArg.peer.close(1000, 'idle');
      return;
    }
    try {
      const token = await this.options.token(linkArg.target.instanceId, linkArg.tokenExpiresAt);
      const expiresAt = expiryOf(token);
      if (expiresAt <= linkArg.tokenExpiresAt) {
        throw new Error('the fresh internal token expires no later than the link\'s');
      }
      // A call made while the holder checks the token counts for the next round.
      linkArg.usedSinceAuthentication = false;
      await linkArg.peer.call(instanceLinkMethods.reauthenticate, { token }, instanceLinkLimits.reauthenticateTimeoutMs);
      linkArg.tokenExpiresAt = expiresAt;
      if (linkArg.peer.isOpen) {
        this.scheduleReauthentication(linkArg);
      }
    } catch (error) {
      this.options.logger.warn({ err: error, holder: linkArg.target.instanceId }, 'instance link could not be authenticated again: closed');
      linkArg.peer.close(1008, 'reauthentication failed');
    }
  }
}

/** What the holder side of a link needs from the transport. */
export interface IInstanceLinkServeOptions {
  /** The bearer the upgrade was authenticated with. */
  bearer: string;
  /** Whether this instance accepts an internal token, by the checks of `POST /internal/relaycall`. */
  authenticate(bearerArg: string): Promise<boolean>;
  /** Serves one forwarded call as `POST /internal/relaycall` does, with that bearer and that body. */
  serve(bearerArg: string, callArg: unknown): Promise<{ status: number; answer: unknown }>;
  /** The largest request frame: the HTTP endpoint's body limit plus the envelope. */
  requestFrameBytes: number;
  liveness: ISocketLivenessTiming;
  logger: TCloudlyLogger;
  /** Logs a failure that escaped serving a call and returns the error id its answer carries. */
  onInternalFailure(errorArg: unknown): string;
  /** Where the upgrade came from, for the log. */
  remoteAddress: string;
}

/**
 * The holder side of one link, for the socket's whole life. Each request frame is one forwarded
 * call (served concurrently, answered in the order they finish) or a re-authentication. Anything
 * else — a binary frame, a frame that is not a request envelope, an unknown method, a call the
 * endpoint refuses as malformed or unauthenticated, a token that expired without being replaced —
 * closes the link: the forwarding instance never sends such a frame, so whoever did is not one.
 */
export const serveInstanceLink = (socketArg: WebSocket, optionsArg: IInstanceLinkServeOptions): void => {
  let bearer = optionsArg.bearer;
  const subject = subjectOf(bearer);
  let inFlight = 0;
  let expiryTimer: NodeJS.Timeout | null = null;
  const logFields = { from: subject, remoteAddress: optionsArg.remoteAddress };

  /** Closes the link; the close frame carries only this side's own short text, the log the details. */
  const end = (codeArg: number, reasonArg: string, detailArg?: string): void => {
    if (socketArg.readyState === socketArg.OPEN || socketArg.readyState === socketArg.CONNECTING) {
      optionsArg.logger.warn({ ...logFields, code: codeArg, reason: reasonArg, detail: detailArg?.slice(0, 512) }, 'instance link closed by this instance');
      socketArg.close(codeArg, reasonArg);
    }
  };
  const send = (envelopeArg: IEnvelope): void => {
    if (socketArg.readyState === socketArg.OPEN) {
      socketArg.send(JSON.stringify(envelopeArg));
    }
  };
  const expireAt = (expiresAtArg: number): void => {
    if (expiryTimer) {
      clearTimeout(expiryTimer);
    }
    expiryTimer = setTimeout(() => end(1008, 'the internal token expired'), Math.min(longestTimerMs, Math.max(0, expiresAtArg - Date.now())));
    expiryTimer.unref();
  };

  const serveCall = async (envelopeArg: IEnvelope): Promise<void> => {
    const { id } = envelopeArg.correlation;
    if (inFlight >= instanceLinkLimits.callsInFlight) {
      send(errorEnvelope(id, envelopeArg.method, refuse('unavailable', ['instance-link-busy'], { retryAfterMs: 100 })));
      return;
    }
    inFlight++;
    try {
      const { status, answer } = await optionsArg.serve(bearer, envelopeArg.request);
      if (status !== 200) {
        // Malformed, or the token no longer passes: what HTTP answers with a status, the link does not carry.
        end(1008, `the forwarded call was refused with HTTP ${status}`, JSON.stringify((answer as { error?: unknown } | null)?.error ?? null));
        return;
      }
      const forwarded = answer as TForwardedRelayAnswer;
      send('error' in forwarded
        ? { method: envelopeArg.method, response: null, error: forwarded.error, correlation: { id, phase: 'response' } }
        : { method: envelopeArg.method, response: forwarded.response, correlation: { id, phase: 'response' } });
    } catch (error) {
      const errorId = optionsArg.onInternalFailure(error);
      send({
        method: envelopeArg.method,
        response: null,
        error: { text: 'Cloudly failed to answer this request.', data: { code: 'internal', retryable: true, errorId } },
        correlation: { id, phase: 'response' },
      });
    } finally {
      inFlight--;
    }
  };

  const reauthenticate = async (envelopeArg: IEnvelope): Promise<void> => {
    const request = envelopeArg.request as { token?: unknown } | null;
    const token = request !== null && typeof request === 'object' && typeof request.token === 'string' ? request.token : null;
    if (token === null || !bearerPattern.test(token)) {
      end(1008, 'a re-authentication must carry { token }');
      return;
    }
    if (!(await optionsArg.authenticate(token)) || subjectOf(token) !== subject) {
      end(1008, 'the new internal token was refused');
      return;
    }
    bearer = token;
    const expiresAt = expiryOf(token);
    expireAt(expiresAt);
    send({ method: envelopeArg.method, response: { expiresAt }, correlation: { id: envelopeArg.correlation.id, phase: 'response' } });
  };

  const handleFrame = async (dataArg: RawData, isBinaryArg: boolean): Promise<void> => {
    if (isBinaryArg) {
      end(1003, 'an instance link carries text frames only');
      return;
    }
    const bytes = bufferOf(dataArg);
    const text = bytes.toString();
    if (bytes.length > optionsArg.requestFrameBytes) {
      // A call too large for the HTTP endpoint as well: refused alone when it can be named.
      const peeked = peekEnvelopeTop(text);
      if (peeked.phase === 'request' && peeked.correlationId !== null && peeked.method === instanceLinkMethods.call) {
        send(errorEnvelope(peeked.correlationId, peeked.method, frameTooLarge(optionsArg.requestFrameBytes)));
      } else {
        end(1009, `frame exceeds ${optionsArg.requestFrameBytes} bytes`);
      }
      return;
    }
    const frame = readFrame(text);
    if (frame.kind !== 'request') {
      end(1007, frame.kind === 'refused' ? 'unreadable frame' : 'an instance link carries no answers to the holder',
        frame.kind === 'refused' ? frame.reasons.join('; ') : undefined);
      return;
    }
    if (frame.envelope.method === instanceLinkMethods.call) {
      await serveCall(frame.envelope);
    } else if (frame.envelope.method === instanceLinkMethods.reauthenticate) {
      await reauthenticate(frame.envelope);
    } else {
      end(1008, 'unknown method on an instance link');
    }
  };

  socketArg.on('message', (dataArg: RawData, isBinaryArg: boolean) => {
    handleFrame(dataArg, isBinaryArg).catch((error: unknown) => {
      // Whatever a frame does, the process goes on; the link does not.
      optionsArg.onInternalFailure(error);
      end(1011, 'the frame could not be handled');
    });
  });
  // ws reports a protocol violation (invalid UTF-8, a frame over its limit) as an error, then closes.
  socketArg.on('error', (error: Error) => optionsArg.logger.warn({ ...logFields, err: error }, 'instance link failed'));
  const stopLiveness = watchSocketLiveness(socketArg, optionsArg.liveness,
    () => optionsArg.logger.warn(logFields, 'instance link missed its pongs: terminated'));
  socketArg.once('close', () => {
    stopLiveness();
    if (expiryTimer) {
      clearTimeout(expiryTimer);
    }
    optionsArg.logger.info(logFields, 'instance link ended');
  });
  expireAt(expiryOf(bearer));
  optionsArg.logger.info(logFields, 'instance link accepted');
};
