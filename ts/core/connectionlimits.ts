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

export type TConnectionRefusalReason = 'pending-per-address' | 'pending-total' | 'headers-timeout';

export interface IConnectionLimits {
  headersTimeoutMs: number;
  pendingPerAddress: number;
  pendingTotal: number;
  /** Addresses whose connections are not limited per address (CLOUDLY_TRUSTED_PROXIES). */
  trustedProxies: string[];
}

interface IPending {
  address: string;
  timer: NodeJS.Timeout;
}

/** `::ffff:127.0.0.1` and `127.0.0.1` are one address. */
export const normalizeAddress = (addressArg: string | undefined): string =>
  (addressArg ?? 'unknown').replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '');

export class PendingConnectionGuard {
  private readonly pending = new Map<Socket, IPending>();
  private readonly perAddress = new Map<string, number>();
  private readonly trusted: Set<string>;

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
        this.settle(requestArg.socket);
      }
    });
  }

  /** The WebSocket handshake on this connection is done. */
  public upgraded(socketArg: Socket): void {
    this.settle(socketArg);
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
    this.pending.set(socketArg, { address: counted ? address : '', timer });
    if (counted) {
      this.perAddress.set(address, (this.perAddress.get(address) ?? 0) + 1);
    }
    socketArg.once('close', () => this.settle(socketArg));
  }

  private settle(socketArg: Socket): void {
    const entry = this.pending.get(socketArg);
    if (!entry) {
      return;
    }
    this.pending.delete(socketArg);
    clearTimeout(entry.timer);
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
    // No HTTP answer: nothing was read that could be answered, and answering a flood costs more.
    socketArg.destroy();
  }
}
