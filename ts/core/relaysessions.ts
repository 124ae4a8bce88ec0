import { randomUUID } from 'node:crypto';
import type { EnvelopePeer } from './envelopepeer.js';
import {
  defaultRelayCallTimeouts,
  isCloudlyToRelayMethod,
  relayCallFailureReasons,
  relayCallOutcomeOf,
  relayCallRefusal,
  relayCallTimeoutMs,
  relayUnavailable,
  type IRelayCallTimeouts,
} from './relaycalls.js';
import type { CloudlyMetrics } from './metrics.js';
import { RelayActivityLog } from './relayactivity.js';
import type { TCloudlyLogger } from './logger.js';
import { currentOperation, haltIfDryRun } from './operationcontext.js';
import type { ICloudlyOutboundMethods, TCloudlyOutboundMethod } from '../interfaces/requests/methodmap.js';

/**
 * The authenticated relay sockets this instance holds. A session is bound to one cluster for its
 * whole life (the cluster its token named at the upgrade). Cloudly calls a cluster's relay through
 * `call`, which always ends: with the relay's answer, the relay's own refusal, or a named
 * `unavailable` refusal (`relay-not-connected`, `relay-timeout`, `relay-disconnected`).
 */

export interface IRelaySession {
  id: string;
  clusterId: string;
  connectedAt: number;
  peer: EnvelopePeer;
  /** The relay-token generation the session authenticated with; a rotation closes older ones. */
  tokenGeneration: number;
}

/**
 * Where a call goes when this instance holds no elected socket of the cluster: to the instance
 * that does (ts/core/instances.ts). Null means nobody else holds it either; a refusal is thrown
 * as it is; otherwise the holder's answer.
 */
export type TRemoteRelayRoute = (
  clusterIdArg: string,
  methodArg: string,
  requestArg: unknown,
  timeoutMsArg: number,
) => Promise<{ answer: unknown } | null>;

/**
 * What the sessions ask of the domain that elects a cluster's socket: a port declared here, in
 * core, implemented by the relay election (ts/manager.cluster/relayelection.ts) and handed over by
 * the composition root (ts/classes.cloudly.ts) when it builds the sessions. Core imports nothing
 * above it.
 */
export interface IRelaySessionPorts {
  /** Which live session of the cluster carries calls to it right now, or null (none elected here). */
  selectSession(sessionsArg: IRelaySession[], clusterIdArg: string): IRelaySession | null;
  /** Awaited by `call` before it selects, so a call does not miss an election still in flight. */
  awaitElection(clusterIdArg: string): Promise<void>;
  /** Where a call goes when no session here is selected (another instance's socket), or null. */
  routeElsewhere: TRemoteRelayRoute;
}

/**
 * The ports of sessions with no election (one process, no other instance): the oldest open
 * session carries the calls, nothing is awaited and nothing is forwarded.
 */
export const unelectedRelaySessionPorts: IRelaySessionPorts = Object.freeze({
  selectSession: (sessionsArg: IRelaySession[]) => [...sessionsArg].sort((a, b) => a.connectedAt - b.connectedAt)[0] ?? null,
  awaitElection: async () => undefined,
  routeElsewhere: async () => null,
});

export interface IRelayCallOptions {
  /** Only for methods outside the table (tests, extensions); a table method takes its own. */
  timeoutMs?: number;
  /**
   * Set on a call another instance forwarded here: it is answered with a socket of this instance
   * or not at all (never forwarded again), and waits at most this long (the caller's remaining time).
   */
  forwardedTimeoutMs?: number;
}

type TSessionListener = (sessionArg: IRelaySession) => void | Promise<void>;

export class RelaySessions {
  private readonly byCluster = new Map<string, Map<string, IRelaySession>>();
  private readonly openListeners = new Set<TSessionListener>();
  private readonly closeListeners = new Set<TSessionListener>();
  /** Relay sockets open on this instance (the capacity check reads it on every relay upgrade). */
  private openCount = 0;

  /** Timeouts by class; the ordinary class starts as the configured default until `setCallTimeouts`. */
  private timeouts: IRelayCallTimeouts;

  /** Each relay's own log lines (socket opened and closed here, elected, registered), within a budget. */
  public readonly activity: RelayActivityLog;

  constructor(
    private readonly options: { defaultTimeoutMs: number; metrics: CloudlyMetrics; logger: TCloudlyLogger },
    /** The election's port (selection, in-flight election, forwarding); without one, the oldest session carries calls. */
    private readonly ports: IRelaySessionPorts = unelectedRelaySessionPorts,
  ) {
    this.timeouts = { ...defaultRelayCallTimeouts, ordinary: options.defaultTimeoutMs };
    this.activity = new RelayActivityLog(options.logger);
  }

  public setCallTimeouts(timeoutsArg: IRelayCallTimeouts): void {
    this.timeouts = { ...timeoutsArg };
  }

  /** How long a call of this method may take (the table in relaycalls.ts). */
  public timeoutOf(methodArg: string): number {
    return relayCallTimeoutMs(methodArg, this.timeouts);
  }

  /** Relay sockets open on this instance right now. */
  public get socketCount(): number {
    return this.openCount;
  }

  public onSessionOpened(listenerArg: TSessionListener): void {
    this.openListeners.add(listenerArg);
  }

  public onSessionClosed(listenerArg: TSessionListener): void {
    this.closeListeners.add(listenerArg);
  }

  /** Registers an authenticated socket; the session leaves the registry the moment it closes. */
  public add(clusterIdArg: string, peerArg: EnvelopePeer, tokenGenerationArg: number): IRelaySession {
    const session: IRelaySession = {
      id: randomUUID(),
      clusterId: clusterIdArg,
      connectedAt: Date.now(),
      peer: peerArg,
      tokenGeneration: tokenGenerationArg,
    };
    let sessions = this.byCluster.get(clusterIdArg);
    if (!sessions) {
      sessions = new Map();
      this.byCluster.set(clusterIdArg, sessions);
    }
    sessions.set(session.id, session);
    this.openCount++;
    this.options.metrics.relaySockets.inc();
    this.activity.line({ clusterId: clusterIdArg, sessionId: session.id }, 'relay socket opened');
    peerArg.onClose(() => {
      this.activity.line({ clusterId: clusterIdArg, sessionId: session.id }, 'relay socket closed');
      const current = this.byCluster.get(clusterIdArg);
      if (current?.delete(session.id)) {
        this.openCount--;
        this.options.metrics.relaySockets.dec();
        if (current.size === 0) {
          this.byCluster.delete(clusterIdArg);
        }
        this.notify(this.closeListeners, session);
      }
    });
    this.notify(this.openListeners, session);
    return session;
  }

  private notify(listenersArg: Set<TSessionListener>, sessionArg: IRelaySession): void {
    for (const listener of listenersArg) {
      Promise.resolve()
        .then(() => listener(sessionArg))
        .catch((error: unknown) => this.options.logger.error({ err: error, clusterId: sessionArg.clusterId }, 'relay session listener failed'));
    }
  }

  public sessionsOf(clusterIdArg: string): IRelaySession[] {
    return [...(this.byCluster.get(clusterIdArg)?.values() ?? [])].filter((session) => session.peer.isOpen);
  }

  public allSessions(): IRelaySession[] {
    return [...this.byCluster.values()].flatMap((sessions) => [...sessions.values()]);
  }

  /** The session that carries calls to this cluster right now, or null. */
  public activeSession(clusterIdArg: string): IRelaySession | null {
    const sessions = this.sessionsOf(clusterIdArg);
    return sessions.length === 0 ? null : this.ports.selectSession(sessions, clusterIdArg);
  }

  /** Closes every session of a cluster older than the given token generation. */
  public closeSessionsBefore(clusterIdArg: string, tokenGenerationArg: number): number {
    if (currentOperation().dryRun) {
      // A dry-run rotation closes nothing: the token it answers was never stored.
      return 0;
    }
    let closed = 0;
    for (const session of this.sessionsOf(clusterIdArg)) {
      if (session.tokenGeneration < tokenGenerationArg) {
        session.peer.close(4001, 'relay token rotated');
        closed++;
      }
    }
    return closed;
  }

  /**
   * Calls a method on the cluster's relay; always ends within the method's timeout from the table
   * (`timeoutMs` overrides it only for methods outside the table, e.g. in tests). When another
   * live instance holds the cluster's elected socket, the call is forwarded there and its answer
   * or refusal comes back unchanged.
   */
  /**
   * A call whose request is typed by the method map (`ICloudlyOutboundMethods`): the method name
   * alone checks the request. The answer stays `unknown`: what a relay says is read with the
   * contract's validators before anything uses it.
   */
  public async ask<M extends TCloudlyOutboundMethod>(
    clusterIdArg: string,
    methodArg: M,
    requestArg: ICloudlyOutboundMethods[M]['request'],
    optionsArg: IRelayCallOptions = {},
  ): Promise<unknown> {
    return this.call<unknown>(clusterIdArg, methodArg, requestArg, optionsArg);
  }

  public async call<TResponse = unknown>(
    clusterIdArg: string,
    methodArg: string,
    requestArg: unknown,
    optionsArg: IRelayCallOptions = {},
  ): Promise<TResponse> {
    // A dry run stops here: it tells what it would commit, and never asks a cluster to act.
    haltIfDryRun(`relay call ${methodArg}`);
    await this.ports.awaitElection(clusterIdArg);
    const session = this.activeSession(clusterIdArg);
    if (!session) {
      if (optionsArg.forwardedTimeoutMs === undefined) {
        const remote = await this.ports.routeElsewhere(clusterIdArg, methodArg, requestArg, this.effectiveTimeoutMs(methodArg, optionsArg));
        if (remote) {
          return remote.answer as TResponse;
        }
      }
      this.options.metrics.relayCalls.inc({ method: methodArg, outcome: relayCallFailureReasons.notConnected });
      throw relayUnavailable([relayCallFailureReasons.notConnected]);
    }
    return this.callSession<TResponse>(session, methodArg, requestArg, optionsArg);
  }

  /** The table's timeout of a method (or `timeoutMs` outside the table), cut to a forwarded caller's remaining time. */
  private effectiveTimeoutMs(methodArg: string, optionsArg: IRelayCallOptions): number {
    // A method of the table always takes its own timeout, so no call site can drift from it.
    const own = isCloudlyToRelayMethod(methodArg) ? this.timeoutOf(methodArg) : optionsArg.timeoutMs ?? this.timeoutOf(methodArg);
    return optionsArg.forwardedTimeoutMs === undefined ? own : Math.max(1, Math.min(own, optionsArg.forwardedTimeoutMs));
  }

  public async callSession<TResponse = unknown>(
    sessionArg: IRelaySession,
    methodArg: string,
    requestArg: unknown,
    optionsArg: IRelayCallOptions = {},
  ): Promise<TResponse> {
    haltIfDryRun(`relay call ${methodArg}`);
    const timeoutMs = this.effectiveTimeoutMs(methodArg, optionsArg);
    try {
      const response = await sessionArg.peer.call<TResponse>(methodArg, requestArg, timeoutMs);
      this.options.metrics.relayCalls.inc({ method: methodArg, outcome: 'ok' });
      return response;
    } catch (error) {
      const refusal = relayCallRefusal(error);
      this.options.metrics.relayCalls.inc({ method: methodArg, outcome: relayCallOutcomeOf(refusal) });
      throw refusal;
    }
  }

  /** Asks every relay socket to close (1001); answers how many it asked. */
  public closeAll(): number {
    let count = 0;
    for (const session of this.allSessions()) {
      session.peer.close(1001, 'cloudly is stopping');
      count++;
    }
    return count;
  }
}
