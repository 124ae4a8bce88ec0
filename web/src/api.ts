import type { IIdentity } from '../../ts/interfaces/data/user.js';
import type { IChangeEvent } from '../../ts/interfaces/requests/watch.js';
import type { ICloudlyMethods, TAdminCallRequest, TCloudlyMethod } from '../../ts/interfaces/requests/methodmap.js';
import { identityReasons, methodNotServedReason, type IRefusalCause } from '../../ts/interfaces/data/refusal.js';

/**
 * The dashboard's connection to Cloudly: requests over `POST /typedrequest` (same origin), and one
 * admin WebSocket for `watchChanges`. The identity lives in sessionStorage (per tab, never a
 * cookie) and goes into every request body, as every admin client sends it.
 *
 * Events: `status` (socket state changed), `change` (one IChangeEvent), `resync` (re-list: the
 * socket came back or the watch could not resume), `expired` (the identity was refused: log in),
 * `stale` (`stale` changed: what the pages show may no longer be so).
 */

export type TSocketStatus = 'offline' | 'connecting' | 'live' | 'reconnecting';

/** A refusal as Cloudly answered it, or a transport failure (`code` `transport`). */
export class ApiError extends Error {
  constructor(
    public readonly method: string,
    public readonly code: string,
    public readonly text: string,
    public readonly reasons: string[],
    public readonly data: unknown,
  ) {
    super(`${method}: ${code}${reasons.length ? ` (${reasons.join('; ')})` : ''}`);
    this.name = 'ApiError';
  }

  /** The server does not serve this method (yet): used to fall back while a method lands. Decided by the token. */
  public get notServed(): boolean {
    return this.code === 'invalid-request' && this.reasons.includes(methodNotServedReason);
  }

  /** The sentences for people the refusal carries apart from its tokens (shown, never branched on). */
  public get causes(): IRefusalCause[] {
    const causes = (this.data as { causes?: unknown } | null)?.causes;
    return Array.isArray(causes)
      ? causes.filter((causeArg): causeArg is IRefusalCause => !!causeArg && typeof (causeArg as IRefusalCause).message === 'string')
      : [];
  }

  /** What to tell a person: the causes' sentences (each after its path) when there are any, else the reasons, else the text. */
  public get explanation(): string {
    const causes = this.causes.map((causeArg) => (causeArg.path ? `${causeArg.path}: ${causeArg.message}` : causeArg.message));
    return (causes.length ? causes : this.reasons).join('; ') || this.text;
  }
}

const identityKey = 'cloudly.dashboard.identity';

const randomId = (): string => crypto.randomUUID();

const toApiError = (methodArg: string, errorArg: { text?: unknown; data?: unknown }): ApiError => {
  const data = (errorArg.data && typeof errorArg.data === 'object' ? errorArg.data : {}) as Record<string, unknown>;
  const code = typeof data.code === 'string' ? data.code : 'error';
  const reasons = Array.isArray(data.reasons) ? data.reasons.filter((reason): reason is string => typeof reason === 'string') : [];
  return new ApiError(methodArg, code, typeof errorArg.text === 'string' ? errorArg.text : 'refused', reasons, data);
};

interface IPending {
  method: string;
  resolve: (valueArg: unknown) => void;
  reject: (errorArg: unknown) => void;
  timer: number;
}

export class CloudlyApi extends EventTarget {
  public identity: IIdentity | null = null;
  public status: TSocketStatus = 'offline';
  /** The last watch revision handled; a reconnect resumes after it. */
  public lastRevision: number | null = null;
  /** Times the socket came back after dropping (shown on the page). */
  public reconnects = 0;
  private socket: WebSocket | null = null;
  private watchId: string | null = null;
  private readonly pending = new Map<string, IPending>();
  private attempt = 0;
  private retryTimer: number | null = null;
  private expiryTimer: number | null = null;
  private wanted = false;
  /** Whether Cloudly accepted the identity at least once (a kept identity is unproven until then). */
  public verified = false;
  /**
   * Whether the pages' data may be out of date: the socket that tells them of every change was
   * lost, or Cloudly could not be reached. Set until a page has read its data again afterwards
   * (`markRead`); a page never shows stale data as current.
   */
  public stale = false;
  /** When the connection was lost (ms since the epoch), while `stale`. */
  public staleSince: number | null = null;
  /** Counts losses, so a read that began before the latest loss cannot clear it. */
  public losses = 0;
  /** A re-read was asked of the pages since the latest loss (one is enough). */
  private rereadAsked = false;

  constructor(private readonly baseUrl = '') {
    super();
    try {
      const stored = sessionStorage.getItem(identityKey);
      const identity = stored ? JSON.parse(stored) as IIdentity : null;
      if (identity && typeof identity.jwt === 'string' && identity.expiresAt > Date.now()) {
        this.setIdentity(identity);
      } else {
        sessionStorage.removeItem(identityKey);
      }
    } catch {
      this.identity = null;
    }
  }

  private setIdentity(identityArg: IIdentity | null): void {
    this.identity = identityArg;
    this.verified = false;
    this.setStale(false);
    if (this.expiryTimer !== null) {
      clearTimeout(this.expiryTimer);
      this.expiryTimer = null;
    }
    if (identityArg) {
      sessionStorage.setItem(identityKey, JSON.stringify(identityArg));
      // Timers cap at 2^31-1 ms; an identity valid longer is checked again on every refusal anyway.
      const left = Math.min(identityArg.expiresAt - Date.now(), 2_147_000_000);
      this.expiryTimer = window.setTimeout(() => this.expire('the identity expired'), Math.max(0, left));
    } else {
      sessionStorage.removeItem(identityKey);
    }
  }

  public async login(usernameArg: string, passwordArg: string): Promise<IIdentity> {
    const answer = await this.post('adminLoginWithUsernameAndPassword', { username: usernameArg, password: passwordArg });
    this.setIdentity(answer.identity);
    this.verified = true;
    return answer.identity;
  }

  /** Ends the session here; tells Cloudly too when it serves a logout. */
  public async logout(): Promise<void> {
    const identity = this.identity;
    this.stopSocket();
    this.setIdentity(null);
    if (identity) {
      await this.post('logout', { identity }).catch(() => undefined);
    }
  }

  private expire(whyArg: string): void {
    if (!this.identity) {
      return;
    }
    this.stopSocket();
    this.setIdentity(null);
    this.dispatchEvent(new CustomEvent('expired', { detail: whyArg }));
  }

  /**
   * Calls an admin method with the identity added; an `unauthenticated` refusal ends the session.
   * The method name alone types the request and the answer through the contracts' method map
   * (`api.call('getClusters', { limit: 50 })`); there is no untyped form: a page turns its form
   * drafts into a contract request before it calls (see docs/dashboard.md).
   */
  public async call<M extends TCloudlyMethod>(methodArg: M, requestArg: TAdminCallRequest<M>): Promise<ICloudlyMethods[M]['response']> {
    if (!this.identity) {
      throw new ApiError(methodArg, 'unauthenticated', 'Log in first.', [identityReasons.missing], { causes: [{ path: 'identity', message: 'not logged in' }] });
    }
    try {
      const answer = await this.post(methodArg, { ...requestArg, identity: this.identity });
      if (!this.verified) {
        this.verified = true;
        this.dispatchEvent(new CustomEvent('verified'));
      }
      if (this.stale && this.status === 'live' && !this.rereadAsked) {
        // Cloudly answers again while the socket stayed up (only the requests failed): the pages
        // read everything again, as after a reconnect, before their data counts as current.
        this.readAgain();
      }
      return answer;
    } catch (error) {
      if (error instanceof ApiError && error.code === 'unauthenticated') {
        this.expire(error.explanation);
      }
      if (error instanceof ApiError && error.code === 'transport') {
        this.lose();
      }
      throw error;
    }
  }

  // ---- stale data ----

  private setStale(staleArg: boolean): void {
    if (this.stale !== staleArg) {
      this.stale = staleArg;
      this.staleSince = staleArg ? Date.now() : null;
      this.dispatchEvent(new CustomEvent('stale', { detail: staleArg }));
    }
  }

  /** The connection to Cloudly was lost: what the pages show is stale until read again. */
  private lose(): void {
    this.losses += 1;
    this.rereadAsked = false;
    this.setStale(true);
  }

  /** Asks every page to read its data again (after a loss, or the banner's "Read again"). */
  public readAgain(): void {
    this.rereadAsked = true;
    this.dispatchEvent(new CustomEvent('resync', { detail: 'read again' }));
  }

  /**
   * A page read its data again, the read having begun when `lossesArg` losses were counted:
   * the data is current again when no loss came since and the socket follows changes again.
   */
  public markRead(lossesArg: number): void {
    if (lossesArg === this.losses && this.status === 'live') {
      this.setStale(false);
    }
  }

  /** One request over HTTP; the answer is typed by the method name (the wire is trusted to keep the contract). */
  private async post<M extends TCloudlyMethod>(methodArg: M, requestArg: object): Promise<ICloudlyMethods[M]['response']> {
    let response: Response;
    try {
      response = await fetch(`${this.baseUrl}/typedrequest`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ method: methodArg, request: requestArg, response: null, correlation: { id: randomId(), phase: 'request' } }),
        credentials: 'omit',
        cache: 'no-store',
      });
    } catch (error) {
      throw new ApiError(methodArg, 'transport', 'Cloudly could not be reached.', [String((error as Error).message ?? error)], null);
    }
    let answer: { response?: unknown; error?: { text?: unknown; data?: unknown } | null };
    try {
      answer = await response.json();
    } catch {
      throw new ApiError(methodArg, 'transport', `Cloudly answered HTTP ${response.status} without an envelope.`, [], null);
    }
    if (answer.error) {
      throw toApiError(methodArg, answer.error);
    }
    if (answer.response === undefined || answer.response === null) {
      throw new ApiError(methodArg, 'transport', `Cloudly answered HTTP ${response.status} without an answer.`, [], null);
    }
    return answer.response as ICloudlyMethods[M]['response'];
  }

  // ---- the admin socket and the watch ----

  private setStatus(statusArg: TSocketStatus): void {
    if (statusArg === 'reconnecting' && this.status !== 'reconnecting') {
      // No watch follows the changes any more: everything shown may be out of date.
      this.lose();
    }
    if (this.status !== statusArg) {
      this.status = statusArg;
      this.dispatchEvent(new CustomEvent('status', { detail: statusArg }));
    }
  }

  /** Opens the socket and watches every change; reconnects with backoff until `stopSocket`. */
  public startSocket(): void {
    this.wanted = true;
    if (!this.socket && this.retryTimer === null) {
      this.openSocket();
    }
  }

  public stopSocket(): void {
    this.wanted = false;
    if (this.retryTimer !== null) {
      clearTimeout(this.retryTimer);
      this.retryTimer = null;
    }
    const socket = this.socket;
    this.socket = null;
    this.watchId = null;
    this.lastRevision = null;
    socket?.close(1000, 'logged out');
    this.failPending('the socket closed');
    this.setStatus('offline');
  }

  /** Closes the socket as a network failure would (tests and the "reconnect now" button). */
  public dropSocket(): void {
    this.socket?.close(4000, 'dropped by the dashboard');
  }

  private openSocket(): void {
    if (!this.identity) {
      return;
    }
    this.setStatus(this.attempt === 0 && this.reconnects === 0 && this.lastRevision === null ? 'connecting' : 'reconnecting');
    const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/typedsocket`;
    let socket: WebSocket;
    try {
      socket = new WebSocket(url, ['cloudly.dashboard', `cloudly.bearer.${this.identity.jwt}`]);
    } catch {
      this.scheduleReconnect();
      return;
    }
    this.socket = socket;
    socket.addEventListener('open', () => {
      void this.watch(socket);
    });
    socket.addEventListener('message', (event) => this.onMessage(socket, event));
    socket.addEventListener('close', () => {
      if (this.socket !== socket) {
        return;
      }
      this.socket = null;
      this.watchId = null;
      this.failPending('the socket closed');
      if (!this.wanted) {
        this.setStatus('offline');
        return;
      }
      if (this.identity && this.identity.expiresAt <= Date.now()) {
        this.expire('the identity expired');
        return;
      }
      this.scheduleReconnect();
    });
  }

  private scheduleReconnect(): void {
    this.setStatus('reconnecting');
    const base = Math.min(15_000, 250 * 2 ** this.attempt);
    const delay = Math.round(base * (0.5 + Math.random() / 2));
    this.attempt += 1;
    this.retryTimer = window.setTimeout(() => {
      this.retryTimer = null;
      if (this.wanted) {
        this.openSocket();
      }
    }, delay);
  }

  private async watch(socketArg: WebSocket): Promise<void> {
    const since = this.lastRevision;
    const resumed = this.attempt > 0 || this.reconnects > 0 || since !== null;
    try {
      let answer: ICloudlyMethods['watchChanges']['response'];
      try {
        answer = await this.socketCall(socketArg, 'watchChanges', since === null ? {} : { sinceRevision: since });
      } catch (error) {
        if (!(error instanceof ApiError) || error.code !== 'conflict') {
          throw error;
        }
        // revision-gone: list again, then watch afresh.
        this.lastRevision = null;
        answer = await this.socketCall(socketArg, 'watchChanges', {});
      }
      this.watchId = answer.watchId;
      if (this.lastRevision === null) {
        this.lastRevision = answer.revision;
      }
      if (resumed) {
        this.reconnects += 1;
      }
      this.attempt = 0;
      this.setStatus('live');
      if (resumed || this.stale) {
        this.readAgain();
      }
    } catch (error) {
      if (error instanceof ApiError && error.code === 'unauthenticated') {
        this.expire(error.explanation);
        return;
      }
      socketArg.close(4001, 'watch failed');
    }
  }

  private socketCall<M extends TCloudlyMethod>(socketArg: WebSocket, methodArg: M, requestArg: TAdminCallRequest<M>): Promise<ICloudlyMethods[M]['response']> {
    const id = randomId();
    return new Promise<ICloudlyMethods[M]['response']>((resolve, reject) => {
      const timer = window.setTimeout(() => {
        this.pending.delete(id);
        reject(new ApiError(methodArg, 'transport', 'No answer on the socket.', ['timeout'], null));
      }, 15_000);
      this.pending.set(id, { method: methodArg, resolve: resolve as (valueArg: unknown) => void, reject, timer });
      socketArg.send(JSON.stringify({
        method: methodArg,
        request: { ...requestArg, identity: this.identity },
        response: null,
        correlation: { id, phase: 'request' },
      }));
    });
  }

  private failPending(whyArg: string): void {
    for (const [id, pending] of this.pending) {
      clearTimeout(pending.timer);
      pending.reject(new ApiError(pending.method, 'transport', whyArg, [], null));
      this.pending.delete(id);
    }
  }

  private onMessage(socketArg: WebSocket, eventArg: MessageEvent): void {
    if (typeof eventArg.data !== 'string') {
      return;
    }
    let envelope: { method?: string; request?: any; response?: unknown; error?: { text?: unknown; data?: unknown } | null; correlation?: { id?: string; phase?: string } };
    try {
      envelope = JSON.parse(eventArg.data);
    } catch {
      return;
    }
    const id = envelope.correlation?.id;
    if (typeof id !== 'string') {
      return;
    }
    if (envelope.correlation?.phase === 'response') {
      const pending = this.pending.get(id);
      if (pending) {
        this.pending.delete(id);
        clearTimeout(pending.timer);
        if (envelope.error) {
          pending.reject(toApiError(pending.method, envelope.error));
        } else {
          pending.resolve(envelope.response);
        }
      }
      return;
    }
    const method = String(envelope.method ?? '');
    const answer = (responseArg: unknown, errorArg: { text: string; data: unknown } | null = null) => {
      if (socketArg.readyState === WebSocket.OPEN) {
        socketArg.send(JSON.stringify({ method, response: responseArg, error: errorArg, correlation: { id, phase: 'response' } }));
      }
    };
    if (method === 'changeEvent') {
      const change = envelope.request as IChangeEvent;
      answer({});
      if (change && change.watchId === this.watchId && typeof change.revision === 'number') {
        if (this.lastRevision === null || change.revision > this.lastRevision) {
          this.lastRevision = change.revision;
          this.dispatchEvent(new CustomEvent<IChangeEvent>('change', { detail: change }));
        }
      }
      return;
    }
    if (method === 'watchExpired') {
      answer({});
      // Too far behind: list again, then watch afresh.
      this.lastRevision = null;
      this.readAgain();
      void this.watch(socketArg);
      return;
    }
    answer(null, { text: 'The dashboard serves no such method.', data: { code: 'invalid-request', retryable: false, reasons: [methodNotServedReason], causes: [{ path: 'method', message: `method ${method} is not served` }] } });
  }
}

export const api = new CloudlyApi();
