import type * as http from 'node:http';
import type { Socket } from 'node:net';

/**
 * Bounds on connections that have not yet become a request or a socket. A connection is pending
 * from its TCP accept until its first request's headers are complete (HTTP) or its WebSocket
 * handshake is done (upgrade, authentication included). A pending connection
 * - must finish within `headersTimeoutMs`, or it is ended;
 * - is refused at accept when its address already has `pendingPerAddress` pending, or the server
 *   `pendingTotal`.
 * Connections from a trusted proxy are not counted per address: all of the proxy's clients share
 * its address (the proxy bounds its own clients; the total still holds). Every refusal is counted
 * by reason.
 *
 * Node's own headersTimeout is checked only every connectionsCheckingInterval (30 s) and has no
 * caps, hence this guard; Node's is set too, for the headers of later requests on a kept-alive
 * connection.
 */

export type TConnectionRefusalReason = 'pending-per-address' | 'pending-total' | 'headers-timeout' | 'relay-capacity';

export interface IConnectionLimits {
  headersTimeoutMs: number;
  pendingPerAddress: number;
  pendingTotal: number;
  /** Addresses whose connections are not limited per address (CLOUDLY_TRUSTED_PROXIES). */
  trustedProxies: string[];
  /** The server speaks TLS: requests arrive on a TLS socket wrapped around the connection counted here. */
  tls?: boolean;
}

/**
 * The TCP connection a request or upgrade arrived on. Over TLS, `connection` hands the guard the
 * raw socket and requests carry the TLS socket node wrapped around it (its `_parent`).
 */
const connectionOf = (socketArg: Socket): Socket => (socketArg as Socket & { _parent?: Socket | null })._parent ?? socketArg;

/**
 * The `Retry-After` (whole seconds) for a connection refused at accept because too many are
 * pending. A storm larger than the limit is refused in bulk; told to come back all after the same
 * second, the refused would return as one wave and be refused again. So the advice spreads them
 * over as many seconds as the limit needs to take them in: the refusals of the last second divided
 * by the limit (each second about one limit's worth gets through), at least 1 s, at most 30 s.
 */
export const decideRefusalRetryAfterSeconds = (refusedLastSecondArg: number, limitArg: number, randomArg: () => number): number => {
  const spreadSeconds = Math.min(30, Math.max(1, Math.ceil(refusedLastSecondArg / Math.max(1, limitArg))));
  return 1 + Math.floor(randomArg() * spreadSeconds);
};

/** What a refused connection is answered: a bare 503 with the advice, then the connection is ended. */
export const refusalResponse = (retryAfterSecondsArg: number): string =>
  `HTTP/1.1 503 Service Unavailable\r\nRetry-After: ${retryAfterSecondsArg}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`;

interface IPending {
  address: string;
  timer: NodeJS.Timeout;
  onClose: () => void;
}

/** `::ffff:127.0.0.1` and `127.0.0.1` are one address. */
export const normalizeAddress = (addressArg: string | undefined): string =>
  (addressArg ?? 'unknown').replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '');

export class PendingConnectionGuard {
  private readonly pending = new Map<Socket, IPending>();
  private readonly perAddress = new Map<string, number>();
  private readonly trusted: Set<string>;
  /** Refusals at accept in the current second, for the spread of their advice. */
  private refusedWindow = { startedAt: 0, count: 0, previous: 0 };

  constructor(
    private readonly limits: IConnectionLimits,
    private readonly onRefusal: (reasonArg: TConnectionRefusalReason, addressArg: string) => void,
  ) {
    this.trusted = new Set(limits.trustedProxies.map((address) => normalizeAddress(address)));
  }

  public get pendingCount(): number {
    return this.pending.size;
  }

  /** Watches `serverArg`'s connections; call before it listens. */
  public attach(serverArg: http.Server): void {
    serverArg.on('connection', (socket: Socket) => this.accept(socket));
    // Headers complete: the connection is a request now, bounded by the request and keep-alive timeouts.
    serverArg.on('request', (requestArg: http.IncomingMessage) => {
      if (requestArg.headers.upgrade === undefined) {
        this.settle(connectionOf(requestArg.socket));
      }
    });
  }

  /** The WebSocket handshake on this connection is done. */
  public upgraded(socketArg: Socket): void {
    this.settle(connectionOf(socketArg));
  }

  private accept(socketArg: Socket): void {
    const address = normalizeAddress(socketArg.remoteAddress);
    const counted = !this.trusted.has(address);
    if (this.pending.size >= this.limits.pendingTotal) {
      this.refuse(socketArg, 'pending-total', address);
      return;
    }
    if (counted && (this.perAddress.get(address) ?? 0) >= this.limits.pendingPerAddress) {
      this.refuse(socketArg, 'pending-per-address', address);
      return;
    }
    const timer = setTimeout(() => {
      if (this.pending.has(socketArg)) {
        this.settle(socketArg);
        this.refuse(socketArg, 'headers-timeout', address);
      }
    }, this.limits.headersTimeoutMs);
    timer.unref();
    // Removed when the connection settles: an open socket keeps no listener of the guard.
    const onClose = (): void => this.settle(socketArg);
    this.pending.set(socketArg, { address: counted ? address : '', timer, onClose });
    if (counted) {
      this.perAddress.set(address, (this.perAddress.get(address) ?? 0) + 1);
    }
    socketArg.once('close', onClose);
  }

  private settle(socketArg: Socket): void {
    const entry = this.pending.get(socketArg);
    if (!entry) {
      return;
    }
    this.pending.delete(socketArg);
    clearTimeout(entry.timer);
    socketArg.removeListener('close', entry.onClose);
    if (entry.address) {
      const left = (this.perAddress.get(entry.address) ?? 1) - 1;
      if (left > 0) {
        this.perAddress.set(entry.address, left);
      } else {
        this.perAddress.delete(entry.address);
      }
    }
  }

  private refuse(socketArg: Socket, reasonArg: TConnectionRefusalReason, addressArg: string): void {
    this.onRefusal(reasonArg, addressArg);
    if (reasonArg === 'headers-timeout') {
      // A client that sent no complete request in time is not waiting for an answer.
      socketArg.destroy();
      return;
    }
    if (this.limits.tls) {
      // The client is starting a TLS handshake: a plain-text answer would only read as a broken one.
      socketArg.destroy();
      return;
    }
    // Refused at accept: a 503 with Retry-After written before anything is read (one small write,
    // no parsing). Without it a relay saw a reset, backed off exponentially and, in a storm larger
    // than the limit, came back seconds after there was room (bench/results/fleet.md).
    const now = Date.now();
    if (now - this.refusedWindow.startedAt >= 1000) {
      this.refusedWindow = { startedAt: now, count: 0, previous: this.refusedWindow.count };
    }
    this.refusedWindow.count++;
    const limit = reasonArg === 'pending-total' ? this.limits.pendingTotal : this.limits.pendingPerAddress;
    const seconds = decideRefusalRetryAfterSeconds(Math.max(this.refusedWindow.count, this.refusedWindow.previous), limit, Math.random);
    socketArg.on('error', () => undefined);
    socketArg.end(refusalResponse(seconds));
    // A peer that never reads must not keep the connection: it is destroyed shortly after.
    setTimeout(() => socketArg.destroy(), 1000).unref();
  }
}

/**
 * Socket upgrades of one address authenticating at once are bounded (`perAddressArg`); the rest
 * wait in line, first come first served, instead of being refused. A waiting upgrade is still a
 * pending connection, so the line is bounded by the pending limits and the headers timeout. A
 * refusal (the old 429) cost a relay its advice's second plus jitter and a new TCP handshake;
 * waiting costs it only its turn.
 */
export class UpgradeLine {
  private readonly active = new Map<string, number>();
  private readonly waiting = new Map<string, Array<() => void>>();

  constructor(private readonly perAddressArg: number) {}

  /** Resolves with the release function once the address has a free place. */
  public async enter(addressArg: string): Promise<() => void> {
    const active = this.active.get(addressArg) ?? 0;
    if (active < this.perAddressArg) {
      this.active.set(addressArg, active + 1);
      return this.releaser(addressArg);
    }
    await new Promise<void>((resolve) => {
      const line = this.waiting.get(addressArg) ?? [];
      line.push(resolve);
      this.waiting.set(addressArg, line);
    });
    // The place was handed over by a release: the active count already includes it.
    return this.releaser(addressArg);
  }

  /** Upgrades of this address waiting in line right now. */
  public waitingCount(addressArg: string): number {
    return this.waiting.get(addressArg)?.length ?? 0;
  }

  private releaser(addressArg: string): () => void {
    let released = false;
    return () => {
      if (released) {
        return;
      }
      released = true;
      const line = this.waiting.get(addressArg);
      const next = line?.shift();
      if (line && line.length === 0) {
        this.waiting.delete(addressArg);
      }
      if (next) {
        // The place passes straight to the next in line.
        next();
        return;
      }
      const left = (this.active.get(addressArg) ?? 1) - 1;
      if (left > 0) {
        this.active.set(addressArg, left);
      } else {
        this.active.delete(addressArg);
      }
    };
  }
}
