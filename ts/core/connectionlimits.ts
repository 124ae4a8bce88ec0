import type * as http from 'node:http';
import type { Socket } from 'node:net';

/**
 * Bounds on connections. Every connection, from its TCP accept to its close, is **established**
 * and bounded per address (`establishedPerAddress`) and in total (`establishedTotal`), below the
 * process's file-descriptor limit (`decideEstablishedLimits`): one address holding idle keep-alive
 * connections or sockets must not take the descriptors the journal, a snapshot or the blob store
 * need, nor every place of the other addresses.
 *
 * Among them, a connection that has not yet become a request or a socket is pending
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

export type TConnectionRefusalReason = 'established-per-address' | 'established-total' | 'pending-per-address' | 'pending-total' | 'headers-timeout' | 'relay-capacity';

export const connectionRefusalReasons: readonly TConnectionRefusalReason[] = [
  'established-per-address', 'established-total', 'pending-per-address', 'pending-total', 'headers-timeout', 'relay-capacity',
];

export interface IConnectionLimits {
  headersTimeoutMs: number;
  pendingPerAddress: number;
  pendingTotal: number;
  /** Open connections (any state) one address may hold. */
  establishedPerAddress: number;
  /** Open connections in total. */
  establishedTotal: number;
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

/**
 * File descriptors kept out of the connections' budget: the journal's segments, a snapshot being
 * written and read, the blob store's files, the database's and the logs' (Cloudly needs about a
 * hundred at rest; a backup or a compaction opens more).
 */
export const fileDescriptorReserve = 256;
/** The connection bounds when the file-descriptor limit cannot be read (or is unlimited). */
const fallbackEstablishedTotal = 65_536;

/**
 * The established-connection bounds: the configured ones (CLOUDLY_CONNECTIONS_TOTAL,
 * CLOUDLY_CONNECTIONS_PER_ADDRESS), or defaults derived from the process's open-files limit: the
 * total is the limit less `fileDescriptorReserve` (half the limit when it is below twice the
 * reserve), an address may hold half the total. `budgetExceeded` says that a configured total
 * leaves less than the reserve below the limit.
 */
export const decideEstablishedLimits = (
  openFilesArg: number | null,
  configuredArg: { connectionsTotal: number | null; connectionsPerAddress: number | null },
): { total: number; perAddress: number; reserve: number; budgetExceeded: boolean } => {
  const budget = openFilesArg === null
    ? fallbackEstablishedTotal
    : Math.max(1, openFilesArg >= 2 * fileDescriptorReserve ? openFilesArg - fileDescriptorReserve : Math.floor(openFilesArg / 2));
  const total = configuredArg.connectionsTotal ?? budget;
  const perAddress = Math.min(total, configuredArg.connectionsPerAddress ?? Math.max(1, Math.floor(total / 2)));
  return { total, perAddress, reserve: openFilesArg === null ? 0 : openFilesArg - budget, budgetExceeded: openFilesArg !== null && total > budget };
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

/**
 * Connections being refused at the same time; a refused connection holds its descriptor until the
 * peer closes or a second has passed. Beyond this many, a refused connection is reset at once,
 * without its 503: a flood must not hold the descriptors through its refusals.
 */
export const refusingConnectionsLimit = 128;

export class PendingConnectionGuard {
  private readonly pending = new Map<Socket, IPending>();
  private readonly perAddress = new Map<string, number>();
  /** Open connections by address (not those of trusted proxies), and in total. */
  private readonly establishedPerAddress = new Map<string, number>();
  private established = 0;
  private refusing = 0;
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

  public get establishedCount(): number {
    return this.established;
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
    if (this.established >= this.limits.establishedTotal) {
      this.refuse(socketArg, 'established-total', address);
      return;
    }
    if (counted && (this.establishedPerAddress.get(address) ?? 0) >= this.limits.establishedPerAddress) {
      this.refuse(socketArg, 'established-per-address', address);
      return;
    }
    this.establish(socketArg, counted ? address : '');
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
    // Removed when the connection settles: an open socket keeps only its established count's listener.
    const onClose = (): void => this.settle(socketArg);
    this.pending.set(socketArg, { address: counted ? address : '', timer, onClose });
    if (counted) {
      this.perAddress.set(address, (this.perAddress.get(address) ?? 0) + 1);
    }
    socketArg.once('close', onClose);
  }

  /** Counts the connection until it closes. */
  private establish(socketArg: Socket, addressArg: string): void {
    this.established++;
    if (addressArg) {
      this.establishedPerAddress.set(addressArg, (this.establishedPerAddress.get(addressArg) ?? 0) + 1);
    }
    socketArg.once('close', () => {
      this.established--;
      if (addressArg) {
        const left = (this.establishedPerAddress.get(addressArg) ?? 1) - 1;
        if (left > 0) {
          this.establishedPerAddress.set(addressArg, left);
        } else {
          this.establishedPerAddress.delete(addressArg);
        }
      }
    });
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
    socketArg.on('error', () => undefined);
    if (this.refusing >= refusingConnectionsLimit) {
      socketArg.destroy();
      return;
    }
    this.refusing++;
    socketArg.once('close', () => {
      this.refusing--;
    });
    const now = Date.now();
    if (now - this.refusedWindow.startedAt >= 1000) {
      this.refusedWindow = { startedAt: now, count: 0, previous: this.refusedWindow.count };
    }
    this.refusedWindow.count++;
    const limit = reasonArg === 'pending-total' ? this.limits.pendingTotal
      : reasonArg === 'established-total' ? this.limits.establishedTotal
        : reasonArg === 'established-per-address' ? this.limits.establishedPerAddress
          : this.limits.pendingPerAddress;
    const seconds = decideRefusalRetryAfterSeconds(Math.max(this.refusedWindow.count, this.refusedWindow.previous), limit, Math.random);
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
