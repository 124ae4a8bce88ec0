import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import type { Socket } from 'node:net';
import type { ServerResponse } from 'node:http';
import type { WebSocket } from 'ws';
import fastifyWebsocket from '@fastify/websocket';
import { PendingConnectionGuard, UpgradeLine, type TConnectionRefusalReason } from './connectionlimits.js';
import { EnvelopePeer, frameTooLargeReason, readFrame, refusalEnvelope, type IEnvelope, type ISocketRequestLimits } from './envelopepeer.js';
import { boundaryReasons } from './boundary.js';
import { AttemptLimiter } from './attemptlimiter.js';
import { errorTexts, refusalData, type IRefusal } from './refusal.js';
import { identityReasons, type IRefusalCause } from '../interfaces/data/refusal.js';
import type { ICloudlyConfig } from '../config.js';
import type { TCloudlyLogger } from './logger.js';
import type { IRelaySession } from './relaysessions.js';
import { watchSocketLiveness } from './socketliveness.js';
import { internalRelayCallPath } from './instances.js';
import { instanceLinkLimits, internalLinkPath, serveInstanceLink } from './instancelinks.js';
import type { SecureContextOptions } from 'node:tls';

/**
 * The HTTP and WebSocket surface: `POST /typedrequest`, `GET /typedsocket`, health, metrics and
 * the JWKS. A socket authenticates on the upgrade (`Authorization: Bearer ...`), before any frame:
 * a relay token binds the socket to its cluster, an admin identity JWT opens an admin socket.
 */

interface ISocketAuthentication {
  kind: 'relay' | 'admin';
  clusterId?: string;
  tokenGeneration?: number;
}

declare module 'fastify' {
  interface FastifyRequest {
    cloudlySocketAuthentication?: ISocketAuthentication;
    /** The internal token a `GET /internal/link` upgrade was authenticated with. */
    cloudlyInternalLinkBearer?: string;
    /** Ends the count of a relay upgrade admitted under the capacity limit (its socket is open or gone). */
    cloudlyRelayAdmissionSettle?: () => void;
  }
}

/** The reason an address that failed too many socket upgrades is refused with (HTTP 429, `unavailable`). */
export const upgradeRateLimitedReason = 'upgrade-rate-limited';

/**
 * The body of a refused socket upgrade: the refusal shape of every other answer (`{ error: { text,
 * data } }`), so a client reads the same token whether the upgrade or a call was refused.
 */
const upgradeRefusalBody = (bearerArg: string | null): { error: { text: string; data: object } } => ({
  error: {
    text: errorTexts.unauthenticated,
    data: bearerArg === null
      ? refusalData('unauthenticated', [identityReasons.missing], {
        causes: [{ path: 'headers.authorization', message: 'Authorization: Bearer <relay token or admin identity JWT> is required' }],
      })
      : refusalData('unauthenticated', [identityReasons.invalid], {
        causes: [{ path: 'headers.authorization', message: 'is neither a current relay token nor a valid administrator identity JWT' }],
      }),
  },
});

/** The body of an upgrade refused because its address failed too many (HTTP 429). */
const upgradeRateLimitedBody = (retryAfterMsArg: number): { error: { text: string; data: object } } => ({
  error: {
    text: errorTexts.unavailable,
    data: refusalData('unavailable', [upgradeRateLimitedReason], {
      retryAfterMs: retryAfterMsArg,
      causes: [{ message: 'too many failed socket upgrades from this address' }],
    }),
  },
});

/** The reason of an HTTP request the server cannot read at all (fastify's 4xx before any body is parsed). */
export const httpRequestMalformedReason = 'http-request-malformed';

const transportRefusal = (idArg: string | null, methodArg: string | null, reasonsArg: string[], causesArg: IRefusalCause[]): IEnvelope =>
  refusalEnvelope(idArg ?? '', methodArg ?? '', reasonsArg, causesArg);

const readBearer = (requestArg: FastifyRequest): string | null => {
  const header = requestArg.headers.authorization;
  if (typeof header !== 'string') {
    return null;
  }
  // The scheme name is case-insensitive (RFC 7235).
  const match = /^bearer ([A-Za-z0-9._~+/=-]{1,8192})$/i.exec(header);
  return match ? match[1] : null;
};

/**
 * What the transport needs from the server, and nothing more: core's transport imports no manager
 * and no `Cloudly` (adapters depend on the server, never the reverse). The composition root builds
 * this from the managers.
 */
export interface ITransportHost {
  config: Pick<ICloudlyConfig,
    'bodyLimitBytes' | 'relayAnswerLimitBytes' | 'socketRequestsPerSecond' | 'socketPendingRequests'
    | 'socketPingIntervalMs' | 'socketMissedPongsAllowed' | 'headersTimeoutMs' | 'pendingConnectionsPerAddress'
    | 'pendingConnectionsTotal' | 'keepAliveTimeoutMs' | 'trustedProxies' | 'socketUpgradesPerAddress' | 'maxRelaysPerInstance'
    | 'relayCapacityRetryMs' | 'webSocketCompression'>;
  /** Relay sockets open on this instance right now (the capacity check, CLOUDLY_MAX_RELAYS_PER_INSTANCE). */
  relaySocketCount(): number;
  /**
   * `GET /admin/snapshot` (`cloudly snapshot save`): who may download the control plane's
   * snapshot (an administrator's identity JWT as bearer), and the download itself.
   */
  snapshotDownload?: {
    authorize(bearerArg: string | null): Promise<{ ok: true; actor: string } | { ok: false; status: number; refusal: IRefusal }>;
    export(sinkArg: (chunkArg: Buffer) => Promise<void>, onStartArg: (infoArg: { lsn: number; documents: number }) => void): Promise<{ lsn: number; documents: number; bytes: number }>;
  };
  /** Counts a connection refused or ended before its first request (connectionlimits.ts), and tells the pending and open counts. */
  connectionLimits?: { refused(reasonArg: TConnectionRefusalReason): void; pending(countArg: () => number): void; established?(countArg: () => number): void };
  /** The bounds on open connections (`decideEstablishedLimits`); absent: no bound beyond the pending ones. */
  establishedConnectionLimits?: { total: number; perAddress: number };
  /** Counts an answer a socket sent to a call never made, and whether it closed the socket (envelopepeer.ts). */
  unsolicitedResponse?(closedArg: boolean): void;
  logger: TCloudlyLogger;
  /** Answers one request envelope from any transport. */
  dispatch(envelopeArg: IEnvelope, localDataArg: Record<string, unknown>): Promise<IEnvelope>;
  /** The cluster a relay token opens, or null. */
  authenticateRelayToken(tokenArg: string): Promise<{ clusterId: string; tokenGeneration: number } | null>;
  /** Resolves when the JWT is a valid admin identity; rejects otherwise. */
  verifyAdminJwt(jwtArg: string): Promise<unknown>;
  /** Binds an authenticated relay socket to its cluster for its whole life. */
  openRelaySession(clusterIdArg: string, peerArg: EnvelopePeer, tokenGenerationArg: number): IRelaySession;
  /** Keeps the socket until it closes (graceful stop closes every tracked socket). */
  trackSocket(peerArg: EnvelopePeer): void;
  logInternalFailure(errorArg: unknown, whereArg: string): string;
  /** Started and the database answers. */
  isReady(): Promise<boolean>;
  /** True while the embedded database's disk is full: reads are served, writes refused `storage-full`. */
  storageReadOnly(): boolean;
  /** The scrape's text: every metric, or only the named ones. */
  metricsText(namesArg?: readonly string[]): Promise<{ contentType: string; text: string }>;
  jwks(): unknown;
  /** The certificate every listener serves (TLS 1.2 or newer), or null for plain HTTP (docs/tls.md). */
  tls: SecureContextOptions | null;
  /** How this listener is protected, for `/readyz` (docs/tls.md). */
  listenerStatus(): IListenerStatus;
  /**
   * `POST /internal/relaycall` (docs/multi-instance.md): a relay call another instance forwarded
   * here, with its bearer (an internal token) and its parsed body. Every call on an instance link
   * (`GET /internal/link`) is served through it too, with the link's bearer.
   */
  serveForwardedRelayCall(bearerArg: string | null, bodyArg: unknown): Promise<{ status: number; answer: unknown }>;
  /**
   * The refusal an internal bearer gets, with the checks of `POST /internal/relaycall` (404 where
   * no forwarded calls are served, 401 for a token that fails), or null when it passes.
   */
  refuseInternalBearer(bearerArg: string | null): Promise<{ status: number; answer: unknown } | null>;
}

/** `/readyz`'s `listener`: whether the wire is protected, and the certificate served. */
export interface IListenerStatus {
  tls: boolean;
  /** Plain HTTP on an address other machines reach, with no CLOUDLY_ALLOW_PLAIN_HTTP: credentials cross the network in clear. */
  plainHttpExposed: boolean;
  certificate?: { fingerprint256: string; notAfter: string };
  /** With ACME (docs/tls.md): the order's state, and the last problem while it fails. */
  acme?: {
    domains: string[];
    state: 'pending' | 'ordering' | 'valid' | 'failed';
    failures: number;
    nextAttemptAt: string | null;
    problem: { type: string; detail: string; at: string } | null;
  };
}

/** Socket upgrades one address may fail in a window before it is refused without a look. */
export const upgradeFailureLimit = { attempts: 30, windowMs: 60_000 } as const;
/**
 * Whether one more relay socket fits on this instance (CLOUDLY_MAX_RELAYS_PER_INSTANCE, 0: no
 * limit). `heldArg` counts the open relay sockets and the relay upgrades admitted but not open yet,
 * so a storm cannot overshoot the limit by the upgrades in flight.
 */
export const decideRelayAdmission = (heldArg: number, maxArg: number, retryAfterMsArg: number): { admit: true } | { admit: false; retryAfterMs: number } =>
  maxArg === 0 || heldArg < maxArg ? { admit: true } : { admit: false, retryAfterMs: retryAfterMsArg };

/** `cloudly snapshot save` downloads the control plane's snapshot here (docs/storage.md). */
export const snapshotDownloadPath = '/admin/snapshot';

/**
 * Lets go of what the WebSocket plugin (@fastify/websocket) keeps of an upgrade for the socket's
 * whole life: the connection's `_httpMessage` is the stand-in response the plugin routed the
 * upgrade with (and through it the request, headers included), and the plugin's 'error' listener
 * closes over the framework's request and reply. Its listener only terminated the socket (its
 * logger is off here), which the one put in its place does too.
 */
const releaseUpgradeRequest = (socketArg: WebSocket, connectionArg: Socket): void => {
  const connection = connectionArg as Socket & { _httpMessage?: ServerResponse | null };
  connection._httpMessage?.detachSocket(connection);
  socketArg.removeAllListeners('error');
  socketArg.on('error', () => socketArg.terminate());
};

export const createHttpServer = async (hostArg: ITransportHost): Promise<FastifyInstance> => {
  // With a certificate the server is node's https.Server: the same routes, sockets and limits, and
  // setSecureContext for reloads. Fastify types it apart from the http one; the surface used is common.
  const app = Fastify({
    ...(hostArg.tls ? { https: hostArg.tls } : {}),
    logger: false,
    bodyLimit: hostArg.config.bodyLimitBytes,
    // Closing idle keep-alive connections lets a graceful stop finish promptly.
    forceCloseConnections: 'idle',
    keepAliveTimeout: hostArg.config.keepAliveTimeoutMs,
    // request.ip (every per-address limit after the headers) is the client behind a listed proxy.
    trustProxy: hostArg.config.trustedProxies.length > 0 ? hostArg.config.trustedProxies : false,
  }) as unknown as FastifyInstance;
  const connectionGuard = new PendingConnectionGuard({
    headersTimeoutMs: hostArg.config.headersTimeoutMs,
    pendingPerAddress: hostArg.config.pendingConnectionsPerAddress,
    pendingTotal: hostArg.config.pendingConnectionsTotal,
    establishedTotal: hostArg.establishedConnectionLimits?.total ?? Number.MAX_SAFE_INTEGER,
    establishedPerAddress: hostArg.establishedConnectionLimits?.perAddress ?? Number.MAX_SAFE_INTEGER,
    trustedProxies: hostArg.config.trustedProxies,
    tls: hostArg.tls !== null,
  }, (reasonArg, addressArg) => {
    hostArg.connectionLimits?.refused(reasonArg);
    hostArg.logger.debug({ reason: reasonArg, remoteAddress: addressArg }, 'connection ended before a request');
  });
  connectionGuard.attach(app.server);
  hostArg.connectionLimits?.pending(() => connectionGuard.pendingCount);
  hostArg.connectionLimits?.established?.(() => connectionGuard.establishedCount);
  // Node's own bound, for the headers of later requests on a kept-alive connection.
  app.server.headersTimeout = hostArg.config.headersTimeoutMs;
  const socketLimits = (kindArg: 'relay' | 'admin'): ISocketRequestLimits => ({
    requestFrameBytes: hostArg.config.bodyLimitBytes,
    // Only relays answer Cloudly's calls; an admin socket's answers are never waited for.
    answerFrameBytes: kindArg === 'relay' ? hostArg.config.relayAnswerLimitBytes : hostArg.config.bodyLimitBytes,
    framesPerSecond: hostArg.config.socketRequestsPerSecond,
    frameBurst: hostArg.config.socketRequestsPerSecond * 2,
    pendingRequests: hostArg.config.socketPendingRequests,
  });
  // Frames up to twice the largest accepted size are read far enough to be answered and the
  // socket survives them; only beyond that does ws close the socket (1009).
  const hardFrameLimit = 2 * Math.max(hostArg.config.bodyLimitBytes, hostArg.config.relayAnswerLimitBytes, 512 * 1024);
  const compression = new Set(hostArg.config.webSocketCompression);
  // permessage-deflate keeps a zlib context per socket; it is offered only to the kinds listed
  // (the upgrade of any other kind has its extension offer removed before ws reads it).
  await app.register(fastifyWebsocket, {
    options: {
      maxPayload: hardFrameLimit,
      perMessageDeflate: compression.size > 0 ? { threshold: 1024, serverNoContextTakeover: false, clientNoContextTakeover: false } : false,
    },
  });
  // The handshake is done: the connection is a socket now, bounded by its liveness checks.
  app.websocketServer.on('connection', (_socketArg: unknown, requestArg: { socket: Socket }) => connectionGuard.upgraded(requestArg.socket));
  const upgradeFailures = new AttemptLimiter(upgradeFailureLimit);
  const upgradeLine = new UpgradeLine(hostArg.config.socketUpgradesPerAddress);
  /** Relay upgrades admitted under the capacity limit whose socket is not open (or gone) yet. */
  let relayUpgradesAdmitted = 0;

  // Cloudly reads the body itself, so malformed JSON is answered as a named refusal envelope
  // rather than the framework's own error shape.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => done(null, body));

  app.setErrorHandler((error: { statusCode?: number; code?: string; message: string }, _request, reply) => {
    if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || error.statusCode === 413) {
      void reply.code(413).send(transportRefusal(null, null, [frameTooLargeReason], [{ path: 'body', message: `exceeds ${hostArg.config.bodyLimitBytes} bytes` }]));
      return;
    }
    if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
      void reply.code(error.statusCode).send(transportRefusal(null, null, [httpRequestMalformedReason], [{ message: 'the HTTP request is malformed' }]));
      return;
    }
    const errorId = hostArg.logInternalFailure(error, 'http');
    void reply.code(500).send({ error: { text: 'Cloudly failed to answer this request.', data: { code: 'internal', retryable: true, errorId } } });
  });

  // The published typedrequest client caches answers per URL and falls back to a cached answer
  // when a call fails; without this header it could hand a caller another call's answer.
  app.addHook('onSend', async (request, reply) => {
    if (request.url.startsWith('/typedrequest')) {
      void reply.header('cache-control', 'no-store');
    }
  });

  app.post('/typedrequest', async (request, reply) => {
    const body = typeof request.body === 'string' ? request.body : '';
    const frame = readFrame(body, 'body');
    if (frame.kind === 'refused') {
      return reply.code(400).send(transportRefusal(frame.correlationId, frame.method, frame.reasons, frame.causes));
    }
    if (frame.kind !== 'request') {
      return reply.code(400).send(transportRefusal(frame.correlationId, null, [boundaryReasons.envelopeInvalid], [{ path: 'correlation.phase', message: 'must be request' }]));
    }
    const answer = await hostArg.dispatch(frame.envelope, { transport: 'http', remoteAddress: request.ip });
    return reply.code(200).send(answer);
  });

  const authenticateUpgrade = async (requestArg: FastifyRequest): Promise<ISocketAuthentication | null> => {
    const bearer = readBearer(requestArg);
    if (bearer === null) {
      return null;
    }
    const relay = await hostArg.authenticateRelayToken(bearer);
    if (relay) {
      return { kind: 'relay', clusterId: relay.clusterId, tokenGeneration: relay.tokenGeneration };
    }
    if (bearer.split('.').length === 3) {
      try {
        await hostArg.verifyAdminJwt(bearer);
        return { kind: 'admin' };
      } catch {
        // Falls through to the refusal.
      }
    }
    return null;
  };

  app.get('/typedsocket', {
    websocket: true,
    preValidation: async (request, reply) => {
      const address = request.ip;
      const retryAfterMs = upgradeFailures.retryAfterMs(address);
      if (retryAfterMs > 0) {
        const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
        return reply.code(429).header('retry-after', String(seconds)).send(upgradeRateLimitedBody(retryAfterMs));
      }
      const release = await upgradeLine.enter(address);
      let authentication: ISocketAuthentication | null;
      try {
        authentication = request.raw.socket.destroyed ? null : await authenticateUpgrade(request);
      } finally {
        release();
      }
      if (!authentication) {
        if (request.raw.socket.destroyed) {
          // Gone while waiting in line (the headers timeout, or the client gave up): nothing to answer.
          return reply.code(408).send({ error: 'the connection closed during the upgrade' });
        }
        upgradeFailures.record(address);
        return reply.code(401).send(upgradeRefusalBody(readBearer(request)));
      }
      if (authentication.kind === 'relay') {
        const admission = decideRelayAdmission(hostArg.relaySocketCount() + relayUpgradesAdmitted, hostArg.config.maxRelaysPerInstance, hostArg.config.relayCapacityRetryMs);
        if (!admission.admit) {
          hostArg.connectionLimits?.refused('relay-capacity');
          return reply.code(503).header('retry-after', String(Math.max(1, Math.ceil(admission.retryAfterMs / 1000)))).send({
            error: {
              text: 'this instance holds as many relays as it may; connect again (through the load balancer) after retryAfterMs',
              data: { code: 'unavailable', retryable: true, reasons: ['instance-relay-capacity'], retryAfterMs: admission.retryAfterMs },
            },
          });
        }
        relayUpgradesAdmitted++;
        let counted = true;
        const settle = (): void => {
          if (counted) {
            counted = false;
            relayUpgradesAdmitted--;
          }
        };
        const connection = request.raw.socket;
        const settleOnce = (): void => {
          connection.removeListener('close', settleOnce);
          settle();
        };
        request.cloudlyRelayAdmissionSettle = settleOnce;
        connection.on('close', settleOnce);
      }
      if (!compression.has(authentication.kind)) {
        delete request.raw.headers['sec-websocket-extensions'];
      }
      request.cloudlySocketAuthentication = authentication;
    },
  }, (socket, request) => {
    const authentication = request.cloudlySocketAuthentication!;
    // The relay is counted as an open socket from here on (openRelaySession below).
    request.cloudlyRelayAdmissionSettle?.();
    // Nothing below keeps `request` (the upgrade's request and its raw message, headers included)
    // in a closure that lives as long as the socket: per idle relay that was memory for nothing.
    releaseUpgradeRequest(socket, request.raw.socket);
    const remoteAddress = request.ip;
    const localData: Record<string, unknown> = { transport: 'socket', remoteAddress };
    const peer: EnvelopePeer = new EnvelopePeer(socket, {
      localData,
      limits: socketLimits(authentication.kind),
      route: (envelopeArg) => hostArg.dispatch(envelopeArg, localData),
      onRouteFailure: (errorArg) => hostArg.logInternalFailure(errorArg, 'socket frame'),
      onUnsolicitedResponse: (closedArg) => hostArg.unsolicitedResponse?.(closedArg),
      onPolicyViolation: (reasonArg) => hostArg.logger.warn(
        { kind: authentication.kind, clusterId: authentication.clusterId, remoteAddress, reason: reasonArg },
        'socket closed for breaking its limits',
      ),
    });
    watchSocketLiveness(socket, { intervalMs: hostArg.config.socketPingIntervalMs, missedPongsAllowed: hostArg.config.socketMissedPongsAllowed },
      () => hostArg.logger.warn({ kind: authentication.kind, clusterId: authentication.clusterId }, 'socket missed its pongs: terminated'));
    // Handlers that answer on this socket later (a watch) find it here; envelopes never carry it,
    // so nothing walks it.
    localData.peer = peer;
    hostArg.trackSocket(peer);
    if (authentication.kind === 'relay') {
      const session = hostArg.openRelaySession(authentication.clusterId!, peer, authentication.tokenGeneration!);
      // Its 'relay socket opened' and 'relay socket closed' lines are the sessions' (within their budget).
      localData.relaySession = session;
    }
  });

  app.get(snapshotDownloadPath, async (request, reply) => {
    const download = hostArg.snapshotDownload;
    if (!download) {
      return reply.code(404).send({ error: 'snapshot download is not served here' });
    }
    const authorized = await download.authorize(readBearer(request));
    if (!authorized.ok) {
      return reply.code(authorized.status).header('cache-control', 'no-store')
        .send({ error: { text: authorized.refusal.errorText, data: authorized.refusal.errorData } });
    }
    void reply.hijack();
    const raw = reply.raw;
    let started = false;
    let gone = false;
    raw.once('close', () => {
      gone = true;
    });
    try {
      const summary = await download.export(async (chunkArg) => {
        if (gone) {
          throw new Error('the client went away');
        }
        if (!raw.write(chunkArg)) {
          // Backpressure: the next chunk is serialised only once this one is on its way.
          await new Promise<void>((resolve) => {
            const done = () => {
              raw.off('drain', done);
              raw.off('close', done);
              resolve();
            };
            raw.on('drain', done);
            raw.on('close', done);
          });
        }
      }, (infoArg) => {
        raw.writeHead(200, {
          'content-type': 'application/octet-stream',
          'cache-control': 'no-store',
          'x-cloudly-snapshot-lsn': String(infoArg.lsn),
          'x-cloudly-snapshot-documents': String(infoArg.documents),
        });
        started = true;
      });
      raw.end();
      hostArg.logger.info({ actor: authorized.actor, lsn: summary.lsn, documents: summary.documents, bytes: summary.bytes }, 'control-plane snapshot downloaded');
    } catch (error) {
      hostArg.logger.warn({ err: error, actor: authorized.actor }, 'control-plane snapshot download failed');
      if (!started && !gone) {
        raw.writeHead(503, { 'content-type': 'application/json', 'cache-control': 'no-store' });
        raw.end(JSON.stringify({ error: (error as Error).message }));
      } else {
        // Cut off mid-stream: the client sees a file without its end frame, which it refuses.
        raw.destroy();
      }
    }
  });

  app.post(internalRelayCallPath, async (request, reply) => {
    let body: unknown = null;
    try {
      body = JSON.parse(typeof request.body === 'string' ? request.body : '');
    } catch {
      body = null;
    }
    const { status, answer } = await hostArg.serveForwardedRelayCall(readBearer(request), body);
    return reply.code(status).header('cache-control', 'no-store').send(answer);
  });

  // An instance link (ts/core/instancelinks.ts): another instance's persistent socket for the
  // relay calls it forwards here, authenticated on the upgrade like the HTTP endpoint.
  app.get(internalLinkPath, {
    websocket: true,
    preValidation: async (request, reply) => {
      const retryAfterMs = upgradeFailures.retryAfterMs(request.ip);
      if (retryAfterMs > 0) {
        return reply.code(429).header('retry-after', String(Math.max(1, Math.ceil(retryAfterMs / 1000)))).send(upgradeRateLimitedBody(retryAfterMs));
      }
      const bearer = readBearer(request);
      const refused = await hostArg.refuseInternalBearer(bearer);
      if (!refused && bearer !== null) {
        request.cloudlyInternalLinkBearer = bearer;
        // Links carry relay answers between instances on one network: never compressed, whatever
        // CLOUDLY_WEBSOCKET_COMPRESSION says for relay and admin sockets.
        delete request.raw.headers['sec-websocket-extensions'];
        return;
      }
      const { status, answer } = refused ?? { status: 401, answer: null };
      if (status !== 404) {
        upgradeFailures.record(request.ip);
      }
      return reply.code(status).header('cache-control', 'no-store').send(answer);
    },
  }, (socket, request) => {
    serveInstanceLink(socket, {
      bearer: request.cloudlyInternalLinkBearer!,
      authenticate: async (bearerArg) => (await hostArg.refuseInternalBearer(bearerArg)) === null,
      serve: (bearerArg, callArg) => hostArg.serveForwardedRelayCall(bearerArg, callArg),
      requestFrameBytes: hostArg.config.bodyLimitBytes + instanceLinkLimits.requestFrameOverheadBytes,
      liveness: { intervalMs: hostArg.config.socketPingIntervalMs, missedPongsAllowed: hostArg.config.socketMissedPongsAllowed },
      logger: hostArg.logger,
      onInternalFailure: (errorArg) => hostArg.logInternalFailure(errorArg, 'instance link frame'),
      remoteAddress: request.ip,
    });
  });

  app.get('/livez', async () => ({ status: 'live' }));
  app.get('/readyz', async (_request, reply) => {
    const reachable = await hostArg.isReady();
    // Read-only on a full disk is still ready (reads are served, so a balancer must keep sending
    // them), and says so, with the reason writes are refused.
    const details = hostArg.storageReadOnly() ? { storage: 'read-only', reasons: ['storage-full'] } : {};
    return reply.code(reachable ? 200 : 503).send({
      status: reachable ? 'ready' : 'not-ready',
      database: reachable ? 'reachable' : 'unreachable',
      listener: hostArg.listenerStatus(),
      ...details,
    });
  });
  app.get('/metrics', async (request, reply) => {
    // `?name=a&name=b`: only those metrics (names of the Prometheus form; anything else is ignored).
    const requested = (request.query as { name?: unknown } | undefined)?.name;
    const names = (Array.isArray(requested) ? requested : [requested])
      .filter((nameArg): nameArg is string => typeof nameArg === 'string' && /^[a-zA-Z_:][a-zA-Z0-9_:]{0,199}$/.test(nameArg));
    const { contentType, text } = await hostArg.metricsText(names);
    return reply.type(contentType).send(text);
  });
  app.get('/.well-known/jwks.json', async () => hostArg.jwks());
  return app;
};


/**
 * Stops the HTTP server within `graceMsArg`: it stops accepting at once and waits for in-flight
 * requests and streams and for the sockets (already asked to close with 1001) to end; once the
 * grace has passed, it ends what is left (a peer that stopped reading never answers the close
 * handshake, which ws would otherwise wait 30 s for). Says what it had to end.
 */
export const closeHttpServerWithin = async (
  appArg: FastifyInstance,
  graceMsArg: number,
): Promise<{ graceElapsed: boolean; terminatedSockets: number; closedConnections: number }> => {
  const closing = appArg.close();
  let timer: NodeJS.Timeout | null = null;
  const inTime = await Promise.race([
    closing.then(() => true),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), graceMsArg);
    }),
  ]);
  if (timer) {
    clearTimeout(timer);
  }
  if (inTime) {
    return { graceElapsed: false, terminatedSockets: 0, closedConnections: 0 };
  }
  let terminatedSockets = 0;
  const clients = (appArg as unknown as { websocketServer?: { clients?: Set<{ readyState: number; terminate(): void }> } }).websocketServer?.clients;
  for (const client of clients ?? []) {
    // 3: CLOSED. CLOSING sockets are the ones waiting for a close answer that may never come.
    if (client.readyState !== 3) {
      client.terminate();
      terminatedSockets++;
    }
  }
  const server = appArg.server as { closeAllConnections?: () => void; getConnections?: (callbackArg: (errorArg: Error | null, countArg: number) => void) => void };
  const closedConnections = await new Promise<number>((resolve) => {
    if (!server.getConnections) {
      resolve(0);
      return;
    }
    server.getConnections((errorArg, countArg) => resolve(errorArg ? 0 : countArg));
  });
  // In-flight HTTP requests and streams past the grace: their connections are ended too.
  server.closeAllConnections?.();
  await closing;
  return { graceElapsed: true, terminatedSockets, closedConnections };
};
