import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import fastifyWebsocket from '@fastify/websocket';
import { EnvelopePeer, readFrame, refusalEnvelope, type IEnvelope, type ISocketRequestLimits } from './envelopepeer.js';
import { AttemptLimiter } from './attemptlimiter.js';
import type { Cloudly } from '../classes.cloudly.js';
import { watchSocketLiveness } from './socketliveness.js';

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
  }
}

const transportRefusal = (idArg: string | null, methodArg: string | null, reasonsArg: string | string[]): IEnvelope =>
  refusalEnvelope(idArg ?? '', methodArg ?? '', Array.isArray(reasonsArg) ? reasonsArg : [reasonsArg]);

const readBearer = (requestArg: FastifyRequest): string | null => {
  const header = requestArg.headers.authorization;
  if (typeof header !== 'string') {
    return null;
  }
  // The scheme name is case-insensitive (RFC 7235).
  const match = /^bearer ([A-Za-z0-9._~+/=-]{1,8192})$/i.exec(header);
  return match ? match[1] : null;
};

/** Socket upgrades one address may fail in a window before it is refused without a look. */
export const upgradeFailureLimit = { attempts: 30, windowMs: 60_000 } as const;
/** Socket upgrades one address may have waiting for authentication at once. */
export const upgradesInFlightPerAddress = 16;

export const createHttpServer = async (cloudlyArg: Cloudly): Promise<FastifyInstance> => {
  const app = Fastify({
    logger: false,
    bodyLimit: cloudlyArg.config.bodyLimitBytes,
    // Closing idle keep-alive connections lets a graceful stop finish promptly.
    forceCloseConnections: 'idle',
  });
  const socketLimits = (kindArg: 'relay' | 'admin'): ISocketRequestLimits => ({
    requestFrameBytes: cloudlyArg.config.bodyLimitBytes,
    // Only relays answer Cloudly's calls; an admin socket's answers are never waited for.
    answerFrameBytes: kindArg === 'relay' ? cloudlyArg.config.relayAnswerLimitBytes : cloudlyArg.config.bodyLimitBytes,
    framesPerSecond: cloudlyArg.config.socketRequestsPerSecond,
    frameBurst: cloudlyArg.config.socketRequestsPerSecond * 2,
    pendingRequests: cloudlyArg.config.socketPendingRequests,
  });
  // Frames up to twice the largest accepted size are read far enough to be answered and the
  // socket survives them; only beyond that does ws close the socket (1009).
  const hardFrameLimit = 2 * Math.max(cloudlyArg.config.bodyLimitBytes, cloudlyArg.config.relayAnswerLimitBytes, 512 * 1024);
  await app.register(fastifyWebsocket, { options: { maxPayload: hardFrameLimit } });
  const upgradeFailures = new AttemptLimiter(upgradeFailureLimit);
  const upgradesInFlight = new Map<string, number>();

  // Cloudly reads the body itself, so malformed JSON is answered as a named refusal envelope
  // rather than the framework's own error shape.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => done(null, body));

  app.setErrorHandler((error: { statusCode?: number; code?: string; message: string }, _request, reply) => {
    if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || error.statusCode === 413) {
      void reply.code(413).send(transportRefusal(null, null, `body exceeds ${cloudlyArg.config.bodyLimitBytes} bytes`));
      return;
    }
    if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
      void reply.code(error.statusCode).send(transportRefusal(null, null, 'the HTTP request is malformed'));
      return;
    }
    const errorId = cloudlyArg.logInternalFailure(error, 'http');
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
      return reply.code(400).send(transportRefusal(frame.correlationId, frame.method, frame.reasons));
    }
    if (frame.kind !== 'request') {
      return reply.code(400).send(transportRefusal(frame.correlationId, null, 'envelope phase must be request'));
    }
    const answer = await cloudlyArg.dispatch(frame.envelope, { transport: 'http', remoteAddress: request.ip });
    return reply.code(200).send(answer);
  });

  const authenticateUpgrade = async (requestArg: FastifyRequest): Promise<ISocketAuthentication | null> => {
    const bearer = readBearer(requestArg);
    if (bearer === null) {
      return null;
    }
    const relay = await cloudlyArg.clusterManager.authenticateRelayToken(bearer);
    if (relay) {
      return { kind: 'relay', clusterId: relay.clusterId, tokenGeneration: relay.tokenGeneration };
    }
    if (bearer.split('.').length === 3) {
      try {
        await cloudlyArg.auth.verifyAdminJwt(bearer);
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
      const inFlight = upgradesInFlight.get(address) ?? 0;
      if (retryAfterMs > 0 || inFlight >= upgradesInFlightPerAddress) {
        const seconds = Math.max(1, Math.ceil((retryAfterMs || 1000) / 1000));
        return reply.code(429).header('retry-after', String(seconds)).send({ error: 'too many socket upgrades from this address' });
      }
      upgradesInFlight.set(address, inFlight + 1);
      try {
        const authentication = await authenticateUpgrade(request);
        if (authentication) {
          request.cloudlySocketAuthentication = authentication;
          return;
        }
      } finally {
        const left = (upgradesInFlight.get(address) ?? 1) - 1;
        if (left > 0) {
          upgradesInFlight.set(address, left);
        } else {
          upgradesInFlight.delete(address);
        }
      }
      upgradeFailures.record(address);
      return reply.code(401).send({ error: 'Authorization: Bearer <relay token or admin identity JWT> is required, and this one is not valid' });
    },
  }, (socket, request) => {
    const authentication = request.cloudlySocketAuthentication!;
    const localData: Record<string, unknown> = { transport: 'socket', remoteAddress: request.ip };
    const peer = new EnvelopePeer(socket, {
      localData,
      limits: socketLimits(authentication.kind),
      route: (envelopeArg) => cloudlyArg.dispatch(envelopeArg, localData),
      onRouteFailure: (errorArg) => cloudlyArg.logInternalFailure(errorArg, 'socket frame'),
      onPolicyViolation: (reasonArg) => cloudlyArg.logger.warn(
        { kind: authentication.kind, clusterId: authentication.clusterId, remoteAddress: request.ip, reason: reasonArg },
        'socket closed for breaking its limits',
      ),
    });
    watchSocketLiveness(socket, { intervalMs: cloudlyArg.config.socketPingIntervalMs, missedPongsAllowed: cloudlyArg.config.socketMissedPongsAllowed },
      () => cloudlyArg.logger.warn({ kind: authentication.kind, clusterId: authentication.clusterId }, 'socket missed its pongs: terminated'));
    cloudlyArg.openSockets.add(peer);
    peer.onClose(() => cloudlyArg.openSockets.delete(peer));
    if (authentication.kind === 'relay') {
      const session = cloudlyArg.relays.add(authentication.clusterId!, peer, authentication.tokenGeneration!);
      localData.relaySession = session;
      cloudlyArg.logger.info({ clusterId: session.clusterId, sessionId: session.id }, 'relay socket opened');
      peer.onClose(() => cloudlyArg.logger.info({ clusterId: session.clusterId, sessionId: session.id }, 'relay socket closed'));
    }
  });

  app.get('/livez', async () => ({ status: 'live' }));
  app.get('/readyz', async (_request, reply) => {
    const reachable = cloudlyArg.started && await cloudlyArg.database.isReachable();
    return reply.code(reachable ? 200 : 503).send({ status: reachable ? 'ready' : 'not-ready', database: reachable ? 'reachable' : 'unreachable' });
  });
  app.get('/metrics', async (_request, reply) => {
    const text = await cloudlyArg.metrics.registry.metrics();
    return reply.type(cloudlyArg.metrics.registry.contentType).send(text);
  });
  app.get('/.well-known/jwks.json', async () => cloudlyArg.auth.jwks);
  return app;
};

