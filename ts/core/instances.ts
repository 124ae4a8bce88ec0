import { TypedResponseError } from '@api.global/typedrequest';
import { connect } from 'node:net';
import { hostname } from 'node:os';
import { defineDocumentKind, type DocumentStore, type IStoredDocument } from './store.js';
import { identityReasons, refuse, refuseNamed } from './errors.js';
import type { CloudlyAuth } from './auth.js';
import type { TCloudlyLogger } from './logger.js';
import { InstanceLinks, type IForwardedRelayCall, type TForwardedRelayAnswer } from './instancelinks.js';

// The forwarded call and its answer are declared with the link, which carries them without
// knowing this registry; the HTTP endpoint carries the very same shapes.
export type { IForwardedRelayCall, TForwardedRelayAnswer };

/**
 * The instance registry: every Cloudly process sharing one database keeps a document here that
 * says where the others reach it (its internal URL) and until when it counts as alive (renewed on
 * a heartbeat, like the relay leases). A relay call for a cluster whose elected socket another
 * live instance holds is forwarded to that instance over the link to it (`GET /internal/link`,
 * ts/core/instancelinks.ts), or over `POST /internal/relaycall` when no link can be opened; both
 * carry a short-lived JWT signed by the shared signing key, audience `internalAudience`: an admin
 * identity (another audience) is refused there, and so is a token made for another instance.
 * docs/multi-instance.md describes the whole arrangement.
 */

export interface ICloudlyInstanceDocument extends IStoredDocument {
  /** Equal to `id`; the relay election's instance id. */
  instanceId: string;
  /** Where the other instances send forwarded calls. */
  internalUrl: string;
  host: string;
  pid: number;
  startedAt: number;
  heartbeatAt: number;
  /** Epoch milliseconds; after this the instance counts as gone. */
  expiresAt: number;
}

// Heartbeats are not changes anyone asked for: no audit event.
export const cloudlyInstanceKind = defineDocumentKind<ICloudlyInstanceDocument>('CloudlyInstance', { audited: false });

export const internalAudience = 'serve.zone/cloudly/internal';
export const internalRelayCallPath = '/internal/relaycall';
/** How long one internal token is valid; it is reused for half of that. */
export const internalTokenTtlMs = 60_000;
/** Reasons of the `unavailable` answer when the holder of a cluster's socket cannot be asked. */
export const instanceFailureReasons = {
  /** The lease names an instance whose registry entry ran out or is gone: it died; the lease runs out next. */
  holderGone: 'relay-holder-gone',
  /** The holder is registered but did not answer the forwarded call. */
  holderUnreachable: 'relay-holder-unreachable',
} as const;

/** How long a registry read is reused when deciding where to forward. */
const registryCacheMs = 500;
/** Time on top of the caller's timeout the exchange with the holder (link or HTTP) may take. */
const forwardingSlackMs = 1_000;
/**
 * How old a probe's finding may be before the next question starts a new probe; how long a finding
 * that an instance is down is trusted (an instance id is one process: once its port refused, it
 * does not come back, a restart has a new id); how long a probe may wait for its connect.
 */
const downProbeRefreshMs = 500;
const downProbeTrustMs = 5_000;
const downProbeTimeoutMs = 500;

export class InstanceRegistry {
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private stopped = true;
  private internalUrl = '';
  private readonly startedAt = Date.now();
  private readonly cache = new Map<string, { doc: ICloudlyInstanceDocument | null; readAt: number }>();
  private readonly tokens = new Map<string, { token: string; reuseUntil: number; expiresAt: number }>();
  /** The links to the holders this instance forwards to, opened by the first call to each. */
  public readonly links: InstanceLinks;
  /** Forwarded calls made and served, for the benchmark and `/metrics`-like diagnosis. */
  public forwardedCalls = 0;
  public servedForwardedCalls = 0;

  constructor(
    private readonly options: {
      instanceId: string;
      store: DocumentStore;
      auth: CloudlyAuth;
      logger: TCloudlyLogger;
      heartbeatMs: number;
      ttlMs: number;
    },
  ) {
    this.links = new InstanceLinks({
      token: (targetArg, expiringAfterArg) => this.internalToken(targetArg, expiringAfterArg),
      logger: options.logger,
    });
  }

  public get instanceId(): string {
    return this.options.instanceId;
  }

  /** Registers this instance (its URL reachable by the others) and renews it on the heartbeat. */
  public async start(internalUrlArg: string): Promise<void> {
    this.internalUrl = internalUrlArg;
    this.stopped = false;
    await this.renew();
    this.scheduleHeartbeat();
    this.options.logger.info({ instanceId: this.instanceId, internalUrl: internalUrlArg }, 'instance registered');
  }

  public async stop(): Promise<void> {
    this.stopped = true;
    this.links.close();
    if (this.heartbeatTimer) {
      clearTimeout(this.heartbeatTimer);
      this.heartbeatTimer = null;
    }
    this.lastWritten = null;
    await this.options.store.mutate(cloudlyInstanceKind, this.instanceId, (currentArg) => (currentArg ? { kind: 'remove' } : { kind: 'keep' }))
      .catch((error: unknown) => this.options.logger.warn({ err: error }, 'instance registry entry not removed on stop'));
  }

  private scheduleHeartbeat(): void {
    if (this.stopped) {
      return;
    }
    this.heartbeatTimer = setTimeout(() => {
      this.renew()
        .catch((error: unknown) => this.options.logger.warn({ err: error }, 'instance heartbeat failed'))
        .finally(() => this.scheduleHeartbeat());
    }, this.options.heartbeatMs);
    this.heartbeatTimer.unref();
  }

  private async renew(): Promise<void> {
    const now = Date.now();
    const fields = {
      instanceId: this.instanceId,
      internalUrl: this.internalUrl,
      host: hostname(),
      pid: process.pid,
      startedAt: this.startedAt,
      heartbeatAt: now,
      expiresAt: now + this.options.ttlMs,
    };
    // Decided on the entry as this instance last wrote it: nobody else writes a live entry, so the
    // renewal is one compare-and-swap; should the entry have moved (removed as expired after a
    // stall), the swap fails and the store reads it and decides again.
    const { doc } = await this.options.store.mutate(cloudlyInstanceKind, this.instanceId, (currentArg) => (currentArg
      ? { kind: 'write', change: { set: fields } }
      : { kind: 'create', doc: { id: this.instanceId, ...fields } }), this.lastWritten ? { read: this.lastWritten } : {});
    this.lastWritten = doc;
  }

  /** This instance's entry as its last renewal wrote it. */
  private lastWritten: ICloudlyInstanceDocument | null = null;

  /** Every registered instance that has not run out, this one included. */
  public async liveInstances(): Promise<ICloudlyInstanceDocument[]> {
    return this.options.store.find(cloudlyInstanceKind, { expiresAt: { $gt: Date.now() } });
  }

  /** The instance if it is registered and alive (a read at most `registryCacheMs` old), else null. */
  public async liveInstance(instanceIdArg: string): Promise<ICloudlyInstanceDocument | null> {
    const cached = this.cache.get(instanceIdArg);
    let doc: ICloudlyInstanceDocument | null;
    if (cached && Date.now() - cached.readAt < registryCacheMs) {
      doc = cached.doc;
    } else {
      doc = await this.options.store.get(cloudlyInstanceKind, instanceIdArg);
      this.cache.set(instanceIdArg, { doc, readAt: Date.now() });
      if (this.cache.size > 1024) {
        this.cache.delete(this.cache.keys().next().value!);
      }
    }
    return doc && doc.expiresAt > Date.now() ? doc : null;
  }

  /** What the last probe of each instance found (`isKnownDown`), and when. */
  private readonly probes = new Map<string, { down: boolean; at: number; running: boolean }>();

  /**
   * Whether the instance is known to be down: gone from the registry, or its internal URL refused
   * a TCP connection at the last probe (at most `downProbeTrustMs` ago). Answers at once from what
   * earlier probes found and starts a new probe when that is stale, so a caller never waits for
   * the network; a holder that is up, slow or unreachable (a connect that times out) counts as not
   * known down. The relay election asks it of another instance's lease it cannot take: a holder
   * that was killed never releases its leases early, so its sockets' relays need not be told to
   * ask again every second until the lease runs out.
   */
  public isKnownDown(instanceIdArg: string): boolean {
    const probe = this.probes.get(instanceIdArg);
    if ((!probe || Date.now() - probe.at > downProbeRefreshMs) && !probe?.running && !this.stopped) {
      this.probes.set(instanceIdArg, { down: probe?.down ?? false, at: probe?.at ?? 0, running: true });
      void this.probe(instanceIdArg).then((downArg) => {
        this.probes.set(instanceIdArg, { down: downArg, at: Date.now(), running: false });
        if (this.probes.size > 1024) {
          this.probes.delete(this.probes.keys().next().value!);
        }
      });
    }
    return probe !== undefined && probe.down && Date.now() - probe.at <= downProbeTrustMs;
  }

  private async probe(instanceIdArg: string): Promise<boolean> {
    let doc: ICloudlyInstanceDocument | null;
    try {
      doc = await this.liveInstance(instanceIdArg);
    } catch {
      return false;
    }
    if (!doc) {
      return true;
    }
    let url: URL;
    try {
      url = new URL(doc.internalUrl);
    } catch {
      return false;
    }
    const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    return new Promise<boolean>((resolve) => {
      const socket = connect({ host: url.hostname.replace(/^\[|\]$/g, ''), port });
      const done = (downArg: boolean): void => {
        clearTimeout(timer);
        socket.destroy();
        resolve(downArg);
      };
      const timer = setTimeout(() => done(false), downProbeTimeoutMs);
      socket.once('connect', () => done(false));
      socket.once('error', (errorArg: NodeJS.ErrnoException) => done(errorArg.code === 'ECONNREFUSED'));
    });
  }

  /**
   * A token only the named instance accepts, signed with the shared key; reused for half its life.
   * A link replacing its token asks for one that expires after `expiringAfterArg` (epoch ms).
   */
  public async internalToken(targetInstanceIdArg: string, expiringAfterArg = 0): Promise<string> {
    const cached = this.tokens.get(targetInstanceIdArg);
    if (cached && cached.reuseUntil > Date.now() && cached.expiresAt > expiringAfterArg) {
      return cached.token;
    }
    const now = Date.now();
    // The JWT's expiry has whole seconds: the cache keeps what the holder will read.
    const expiresAt = Math.floor((now + internalTokenTtlMs) / 1000) * 1000;
    const token = await this.options.auth.signJwt(
      { target: targetInstanceIdArg },
      { audience: internalAudience, subject: `instance:${this.instanceId}`, expiresAtMs: expiresAt },
    );
    this.tokens.set(targetInstanceIdArg, { token, reuseUntil: now + internalTokenTtlMs / 2, expiresAt });
    return token;
  }

  /**
   * Verifies the bearer of a forwarded call: the shared key's signature, issuer, the internal
   * audience, not expired, made for this instance by an instance. Anything else is refused
   * `unauthenticated` (an admin identity carries the admin audience and fails here).
   */
  public async verifyInternalToken(bearerArg: string | null): Promise<void> {
    if (bearerArg === null) {
      throw refuseNamed('unauthenticated', identityReasons.internalTokenMissing, 'the internal endpoint needs Authorization: Bearer <internal token>', 'headers.authorization');
    }
    let payload: Record<string, unknown>;
    try {
      payload = await this.options.auth.verifyJwt(bearerArg, internalAudience) as Record<string, unknown>;
    } catch {
      throw refuseNamed('unauthenticated', identityReasons.internalTokenInvalid, 'the internal token is not valid (signature, issuer, audience or expiry)', 'headers.authorization');
    }
    if (payload.target !== this.instanceId || typeof payload.sub !== 'string' || !payload.sub.startsWith('instance:')) {
      throw refuseNamed('unauthenticated', identityReasons.internalTokenWrongInstance, 'the internal token was not made for this instance', 'headers.authorization');
    }
  }

  /**
   * Sends one relay call to the instance that holds the cluster's elected socket and returns its
   * answer, or throws its refusal unchanged. The call travels over the link to the holder, or over
   * HTTP when no link can carry it. An instance that does not answer (the link drops, nothing comes
   * back in time) is `unavailable` (`relay-holder-unreachable`) with `retryAfterMs`: until the
   * holder's lease runs out.
   */
  public async forward<TResponse>(
    holderArg: ICloudlyInstanceDocument,
    callArg: IForwardedRelayCall,
    retryAfterMsArg: number,
  ): Promise<TResponse> {
    this.forwardedCalls++;
    const deadline = Date.now() + callArg.timeoutMs + forwardingSlackMs;
    let answer: TForwardedRelayAnswer;
    try {
      answer = await this.links.call(holderArg, callArg, deadline) ?? await this.forwardOverHttp(holderArg, callArg, deadline);
    } catch (error) {
      this.cache.delete(holderArg.instanceId);
      this.options.logger.warn({ err: error, holder: holderArg.instanceId, clusterId: callArg.clusterId, method: callArg.method }, 'forwarded relay call got no answer');
      throw refuse('unavailable', [instanceFailureReasons.holderUnreachable], { retryAfterMs: retryAfterMsArg });
    }
    if ('error' in answer) {
      throw new TypedResponseError(answer.error.text, answer.error.data as object);
    }
    return answer.response as TResponse;
  }

  /** `POST /internal/relaycall`: the way to a holder no link reaches (e.g. an instance without links). */
  private async forwardOverHttp(holderArg: ICloudlyInstanceDocument, callArg: IForwardedRelayCall, deadlineArg: number): Promise<TForwardedRelayAnswer> {
    const token = await this.internalToken(holderArg.instanceId);
    const response = await fetch(`${holderArg.internalUrl}${internalRelayCallPath}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify(callArg),
      signal: AbortSignal.timeout(Math.max(1, deadlineArg - Date.now())),
    });
    const text = await response.text();
    const answer = JSON.parse(text) as TForwardedRelayAnswer;
    if (response.status !== 200 || !answer || typeof answer !== 'object') {
      throw new Error(`internal endpoint answered HTTP ${response.status}`);
    }
    return answer;
  }
}

/** Reads a forwarded call's body; null when it is not one. */
export const readForwardedRelayCall = (bodyArg: unknown): IForwardedRelayCall | null => {
  if (!bodyArg || typeof bodyArg !== 'object' || Array.isArray(bodyArg)) {
    return null;
  }
  const body = bodyArg as Record<string, unknown>;
  if (typeof body.clusterId !== 'string' || body.clusterId.length === 0 || body.clusterId.length > 256
    || typeof body.method !== 'string' || !/^[A-Za-z][A-Za-z0-9_]{0,127}$/.test(body.method)
    || !Number.isSafeInteger(body.timeoutMs) || (body.timeoutMs as number) < 1 || !('request' in body)) {
    return null;
  }
  return { clusterId: body.clusterId, method: body.method, request: body.request, timeoutMs: body.timeoutMs as number };
};
