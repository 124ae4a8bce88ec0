import { TypedHandler, TypedResponseError, TypedRouter } from '@api.global/typedrequest';
import type { ITypedRequest } from '@api.global/typedrequest-interfaces';
import type { ITypedContract } from '../interfaces/requests/admin.js';
import type { IReq_Relay_Cloudly_RegisterClusterRelay } from '../interfaces/requests/cluster.js';
import type { ICloudlyMethods, ICloudlyOutboundMethods, TCloudlyMethod, TCloudlyOutboundMethod } from '../interfaces/requests/methodmap.js';
import { EnvelopePeer } from '../core/envelopepeer.js';
import { CloudlyRefusal } from '../core/refusal.js';
import { CloudlyTransportError, openSocket } from './transport.js';
import { defaultSocketLivenessTiming, watchSocketLiveness, type ISocketLivenessTiming } from '../core/socketliveness.js';

type TAnyContract = ITypedContract<string, unknown, unknown>;

/**
 * How a relay reconnects (docs/relay-protocol.md, "Reconnecting"): attempt n (0, 1, 2 …) after
 * a lost socket waits a random time from 0 to min(capMs, baseMs · 2ⁿ) ("full jitter"), so a
 * thousand relays that lost one Cloudly at once spread their returns over the whole window
 * instead of arriving in waves. The attempt count starts again at 0 once a socket is open and
 * its registration (if any) was accepted. When Cloudly advises a wait (`retryAfterMs` of a
 * `relay-not-elected` refusal, `Retry-After` of a 429), the advice replaces the growing window:
 * see `reconnectDelayMs`.
 */
export interface IRelayReconnectPolicy {
  /** The first window, in ms (default 500); also the jitter added on top of Cloudly's advice. */
  baseMs?: number;
  /** The largest window, in ms (default 30 000). */
  capMs?: number;
  /**
   * The largest window while connections are refused (ECONNREFUSED: nothing listens at the
   * address), in ms (default 4 000). A refused connection costs Cloudly nothing (the kernel
   * answers it), and an instance that restarts listens again within seconds; with the 30 s cap a
   * fleet whose instances restarted came back over up to 30 s after they listened again
   * (bench/results/fleet.md).
   */
  refusedCapMs?: number;
}

export const defaultRelayReconnectPolicy: Required<IRelayReconnectPolicy> = Object.freeze({ baseMs: 500, capMs: 30_000, refusedCapMs: 4_000 });

/** The policy for the next wait: after a refused connection, the window stops growing at `refusedCapMs`. */
export const policyAfterFailure = (policyArg: Required<IRelayReconnectPolicy>, errorArg: unknown): Required<IRelayReconnectPolicy> =>
  (errorArg as { code?: unknown } | null)?.code === 'ECONNREFUSED'
    ? { ...policyArg, capMs: Math.min(policyArg.capMs, policyArg.refusedCapMs) }
    : policyArg;

/**
 * The wait before retry `attemptArg` (0-based).
 *
 * - Without advice: uniform in [0, min(cap, base · 2^attempt)) (full jitter).
 * - With Cloudly's advice `retryAfterMsArg` (a finite number ≥ 0): the advice plus a uniform
 *   jitter in [0, min(base, cap)). Cloudly knows when asking again makes sense (the instance looks
 *   at the election lease again within about a second, a 429 names its window), so the wait is
 *   never shorter than the advice (asking earlier is refused again) and does not grow with the
 *   attempt count (growing it made relays wait up to the 30 s cap for a lease that was free after
 *   one second); the jitter keeps relays that got the same advice at once from returning as one.
 */
export const reconnectDelayMs = (
  attemptArg: number,
  policyArg: IRelayReconnectPolicy = {},
  randomArg: () => number = Math.random,
  retryAfterMsArg: number | null = null,
): number => {
  const { baseMs, capMs } = { ...defaultRelayReconnectPolicy, ...policyArg };
  if (retryAfterMsArg !== null && Number.isFinite(retryAfterMsArg) && retryAfterMsArg >= 0) {
    return Math.ceil(retryAfterMsArg) + Math.floor(randomArg() * Math.min(baseMs, capMs));
  }
  const window = Math.min(capMs, baseMs * 2 ** Math.min(attemptArg, 52));
  return Math.floor(randomArg() * window);
};

/**
 * The wait before attempt `attemptArg` after a failed one: `reconnectDelayMs` under the policy that
 * failure leaves (`policyAfterFailure`: a refused connection stops the window at `refusedCapMs`),
 * with Cloudly's advice followed when it gave one. What the client's reconnect loop and the
 * simulator's first connect wait.
 */
export const delayAfterFailureMs = (
  attemptArg: number,
  policyArg: Required<IRelayReconnectPolicy>,
  errorArg: unknown,
  advisedMsArg: number | null,
  randomArg: () => number = Math.random,
): number => reconnectDelayMs(attemptArg, policyAfterFailure(policyArg, errorArg), randomArg, advisedMsArg);

/** Cloudly's advice on a refusal (`errorData.retryAfterMs`), or null. */
export const retryAfterMsOf = (errorArg: unknown): number | null => {
  const data = (errorArg as { errorData?: { retryAfterMs?: unknown } } | null)?.errorData;
  const advice = data?.retryAfterMs;
  return typeof advice === 'number' && Number.isFinite(advice) && advice >= 0 ? advice : null;
};

export type TRelayRegistration = IReq_Relay_Cloudly_RegisterClusterRelay['request']['registration'];

export interface IRelayClientOptions {
  /** Timeout of the client's own calls to Cloudly (default 30 s). */
  timeoutMs?: number;
  liveness?: ISocketLivenessTiming | false;
  /**
   * Reconnect by itself when the socket is lost (not after `close()` or `terminate()`), with
   * exponential backoff and full jitter, honouring Cloudly's retry advice. On by default (with
   * `defaultRelayReconnectPolicy`); `false` turns it off, so a lost socket stays lost.
   */
  reconnect?: IRelayReconnectPolicy | boolean;
  /**
   * Sent as `registerClusterRelay` after every connect (the first one included), retried with the
   * same backoff while Cloudly answers `relay-not-elected` or is unavailable.
   */
  registration?: TRelayRegistration;
  /** Told about each registration retry (also those inside `connect`, before a listener could be added). */
  onRegistrationRetry?: (retryArg: IRelayRegistrationRetry) => void;
  /** Runs after every connect and registration, e.g. to report nodes again; a failure closes the socket and reconnects. */
  onConnected?: (clientArg: CloudlyRelayClient) => Promise<void>;
  /**
   * Runs once before the first socket opens: add handlers here. Cloudly may call a socket the
   * moment it opens (the route-table hint, pending claims), before `connect` has returned.
   */
  handlers?: (clientArg: CloudlyRelayClient) => void;
}

/** One registration retry: Cloudly refused it as retryable (`relay-not-elected`, …) and the client waits. */
export interface IRelayRegistrationRetry {
  /** 0-based count of refusals in a row on this socket. */
  attempt: number;
  /** The wait chosen before asking again. */
  delayMs: number;
  /** Cloudly's advice on the refusal, or null when it gave none. */
  retryAfterMs: number | null;
  /** The refusal's first reason, e.g. `relay-not-elected`. */
  reason: string | null;
}

/** Why the client stopped reconnecting: the token was refused (HTTP 401), which is final. */
export interface IRelayGiveUp {
  reason: 'token-refused';
  status: number;
}

const sleep = (msArg: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, msArg));

/**
 * A cluster relay's connection to Cloudly: one socket authenticated with the relay token. It
 * calls Cloudly with `fire` and answers Cloudly's calls with the handlers added by `addHandler`.
 * Real relays can use it as it is; the tests use it as their relay.
 *
 * By default (`reconnect` not `false`), a lost socket is replaced by a new one: the handlers stay
 * (they belong to the client, not the socket), the registration is sent again, and Cloudly's
 * calls are answered again on the new socket. `peer` is always the current socket's peer.
 */
export class CloudlyRelayClient {
  public readonly router = new TypedRouter();
  public peer!: EnvelopePeer;

  /** Set by `close()`/`terminate()`: no more reconnects. */
  private stopped = false;
  private givenUp: IRelayGiveUp | null = null;
  private readonly closeListeners: Array<() => void> = [];
  private readonly connectedListeners: Array<(countArg: number) => void> = [];
  private readonly reconnectingListeners: Array<(attemptArg: number, delayMsArg: number) => void> = [];
  private readonly giveUpListeners: Array<(giveUpArg: IRelayGiveUp) => void> = [];
  private readonly registrationRetryListeners: Array<(retryArg: IRelayRegistrationRetry) => void> = [];
  private readonly reconnectPolicy: Required<IRelayReconnectPolicy> | null;
  /** Sockets opened so far (1 after `connect`). */
  private connections = 0;
  private reconnecting: Promise<void> | null = null;

  private constructor(
    public readonly baseUrl: string,
    private readonly relayToken: string,
    private readonly options: IRelayClientOptions & { timeoutMs: number },
  ) {
    const reconnect = options.reconnect ?? true;
    this.reconnectPolicy = reconnect
      ? { ...defaultRelayReconnectPolicy, ...(reconnect === true ? {} : reconnect) }
      : null;
  }

  /**
   * Opens the socket (and registers, when `registration` is given). The client answers Cloudly's
   * pings (ws does that by itself) and pings Cloudly too (`liveness`, default every 5 s,
   * terminated after 2 unanswered): a Cloudly that stopped reading closes the socket, so the
   * relay learns it through `onClose` and, with `reconnect`, opens a new one.
   */
  public static async connect(
    baseUrlArg: string,
    relayTokenArg: string,
    optionsArg: IRelayClientOptions = {},
  ): Promise<CloudlyRelayClient> {
    const client = new CloudlyRelayClient(baseUrlArg, relayTokenArg, { ...optionsArg, timeoutMs: optionsArg.timeoutMs ?? 30_000 });
    optionsArg.handlers?.(client);
    await client.openOnce();
    if (client.options.registration || client.options.onConnected) {
      try {
        await client.afterConnect();
      } catch (error) {
        client.close();
        throw error;
      }
    }
    return client;
  }

  /**
   * Answers calls from Cloudly. A handler's unexpected failure is answered as `internal`, so
   * Cloudly never waits for an answer that typedrequest would otherwise drop.
   */
  public addHandler<M extends TCloudlyOutboundMethod>(
    methodArg: M,
    fnArg: (requestArg: ICloudlyOutboundMethods[M]['request']) => Promise<ICloudlyOutboundMethods[M]['response']>,
  ): void;
  /** A contract named explicitly (`addHandler<IReq_…>(…)`), or a method or request the contracts do not type. */
  public addHandler<T extends TAnyContract = TAnyContract>(
    methodArg: T['method'],
    fnArg: (requestArg: T['request']) => Promise<T['response']>,
  ): void;
  public addHandler<T extends TAnyContract>(
    methodArg: T['method'],
    fnArg: (requestArg: T['request']) => Promise<T['response']>,
  ): void {
    this.router.addTypedHandler(new TypedHandler<ITypedRequest>(methodArg, async (requestArg) => {
      try {
        return (await fnArg(requestArg as T['request'])) as ITypedRequest['response'];
      } catch (error) {
        if (error instanceof TypedResponseError) {
          throw error;
        }
        if (error instanceof CloudlyRefusal) {
          // A refusal this relay was given (by Cloudly, on its own call) and passes on as it is.
          throw new TypedResponseError(error.errorText, error.errorData);
        }
        throw new TypedResponseError('relay handler failed', { code: 'internal', retryable: true });
      }
    }));
  }

  /**
   * Calls Cloudly on this socket. The request and answer types follow from the method name
   * (`fire('reportClusterNode', {…})`) through the contracts' method map; a contract may still be
   * named explicitly (`fire<IReq_…>(…)`).
   */
  public async fire<M extends TCloudlyMethod>(
    methodArg: M,
    requestArg: ICloudlyMethods[M]['request'],
    timeoutMsArg?: number,
  ): Promise<ICloudlyMethods[M]['response']>;
  /**
   * A contract named explicitly (`fire<IReq_…>(…)`), or `fire<TUntypedContract>(…)` for a method or
   * request the contracts do not type (hostile-input tests). No default: without a type argument a
   * request that does not fit the named method's contract must fail to compile, not fall through
   * to this form (TypeScript's first, subtype pass over the overloads would otherwise pick it).
   */
  public async fire<T extends TAnyContract = never>(
    methodArg: T['method'],
    requestArg: T['request'],
    timeoutMsArg?: number,
  ): Promise<T['response']>;
  public async fire<T extends TAnyContract>(
    methodArg: T['method'],
    requestArg: T['request'],
    timeoutMsArg = this.options.timeoutMs,
  ): Promise<T['response']> {
    return this.peer.call<T['response']>(methodArg, requestArg, timeoutMsArg);
  }

  public get isOpen(): boolean {
    return this.peer.isOpen;
  }

  /** How many sockets this client has opened (1 after `connect`, +1 per reconnect). */
  public get connectionCount(): number {
    return this.connections;
  }

  /** Why reconnecting stopped for good, or null. */
  public get gaveUp(): IRelayGiveUp | null {
    return this.givenUp;
  }

  /** Called each time a socket closes (with `reconnect`, a new one may follow). */
  public onClose(listenerArg: () => void): void {
    this.closeListeners.push(listenerArg);
    this.peer.onClose(listenerArg);
  }

  /** Called after each reconnect, once the socket is open and registered (with the connection count). */
  public onReconnected(listenerArg: (connectionCountArg: number) => void): void {
    this.connectedListeners.push(listenerArg);
  }

  /** Called before each reconnect attempt with its number (0-based) and the wait chosen. */
  public onReconnecting(listenerArg: (attemptArg: number, delayMsArg: number) => void): void {
    this.reconnectingListeners.push(listenerArg);
  }

  /** Called before each new registration attempt after a retryable refusal, with the wait chosen and Cloudly's advice. */
  public onRegistrationRetry(listenerArg: (retryArg: IRelayRegistrationRetry) => void): void {
    this.registrationRetryListeners.push(listenerArg);
  }

  /** Whether the client reconnects by itself (the `reconnect` option; on unless `false`). */
  public get reconnects(): boolean {
    return this.reconnectPolicy !== null;
  }

  /** Called once when reconnecting stops for good (the token was refused). */
  public onGiveUp(listenerArg: (giveUpArg: IRelayGiveUp) => void): void {
    this.giveUpListeners.push(listenerArg);
  }

  /** Closes the socket cleanly and stops reconnecting. */
  public close(): void {
    this.stopped = true;
    this.peer.close();
  }

  /** Drops the socket without a close handshake, as a crashed relay would; no reconnect follows. */
  public terminate(): void {
    this.stopped = true;
    this.peer.terminate();
  }

  /** Opens one socket and makes it the current peer. */
  private async openOnce(): Promise<void> {
    const socket = await openSocket(this.baseUrl, this.relayToken);
    const peer = new EnvelopePeer(socket, { router: this.router });
    if (this.options.liveness !== false) {
      watchSocketLiveness(socket, this.options.liveness ?? defaultSocketLivenessTiming);
    }
    this.peer = peer;
    this.connections += 1;
    for (const listener of this.closeListeners) {
      peer.onClose(listener);
    }
    peer.onClose(() => this.handleLost(peer));
    if (this.stopped) {
      peer.close();
    }
  }

  /** Registers (retrying while not elected) and runs `onConnected`. */
  private async afterConnect(): Promise<void> {
    const registration = this.options.registration;
    if (registration) {
      for (let attempt = 0; ; attempt++) {
        try {
          await this.fire<IReq_Relay_Cloudly_RegisterClusterRelay>('registerClusterRelay', { registration });
          break;
        } catch (error) {
          const data = (error as { errorData?: { code?: string; retryable?: boolean } }).errorData;
          // Not elected (another socket of this cluster holds it) or unavailable: wait and ask again.
          if (!this.peer.isOpen || this.stopped || !(data?.code === 'unavailable' && data.retryable)) {
            throw error;
          }
          // Cloudly says when asking again makes sense (relay-not-elected while another
          // instance holds the lease): follow it instead of the growing window.
          const retryAfterMs = retryAfterMsOf(error);
          const delayMs = reconnectDelayMs(attempt, this.reconnectPolicy ?? defaultRelayReconnectPolicy, Math.random, retryAfterMs) + 1;
          const reason = (data as { reasons?: unknown }).reasons;
          for (const listener of [...(this.options.onRegistrationRetry ? [this.options.onRegistrationRetry] : []), ...this.registrationRetryListeners]) {
            listener({ attempt, delayMs, retryAfterMs, reason: Array.isArray(reason) && typeof reason[0] === 'string' ? reason[0] : null });
          }
          await sleep(delayMs);
        }
      }
    }
    await this.options.onConnected?.(this);
  }

  private handleLost(peerArg: EnvelopePeer): void {
    if (this.stopped || !this.reconnectPolicy || peerArg !== this.peer || this.reconnecting) {
      return;
    }
    this.reconnecting = this.reconnectLoop().finally(() => {
      this.reconnecting = null;
      // A socket lost while the loop was finishing: start again.
      if (!this.stopped && !this.peer.isOpen) {
        this.handleLost(this.peer);
      }
    });
  }

  /** Opens new sockets with backoff and full jitter until one is open and registered, or the token is refused. */
  private async reconnectLoop(): Promise<void> {
    const policy = this.reconnectPolicy!;
    /** Cloudly's `Retry-After` on a 429 or 503: the next wait follows it. */
    let advisedMs: number | null = null;
    let lastError: unknown = null;
    for (let attempt = 0; !this.stopped; attempt++) {
      const delay = delayAfterFailureMs(attempt, policy, lastError, advisedMs);
      advisedMs = null;
      lastError = null;
      for (const listener of this.reconnectingListeners) {
        listener(attempt, delay);
      }
      await sleep(delay);
      if (this.stopped) {
        return;
      }
      try {
        await this.openOnce();
      } catch (error) {
        lastError = error;
        if (error instanceof CloudlyTransportError && error.status === 401) {
          // The token is wrong or was rotated: final (docs/relay-protocol.md, section 1).
          this.givenUp = { reason: 'token-refused', status: 401 };
          this.stopped = true;
          for (const listener of this.giveUpListeners) {
            listener(this.givenUp);
          }
          return;
        }
        if (error instanceof CloudlyTransportError && error.retryAfterMs !== null) {
          advisedMs = error.retryAfterMs;
        }
        continue;
      }
      try {
        await this.afterConnect();
      } catch {
        // Registration refused for good or the socket went again: start over on a new socket.
        if (this.peer.isOpen) {
          this.peer.close(1011, 'registration failed');
        }
        continue;
      }
      if (!this.peer.isOpen) {
        continue;
      }
      for (const listener of this.connectedListeners) {
        listener(this.connections);
      }
      return;
    }
  }
}
