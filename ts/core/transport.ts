import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import fastifyWebsocket from '@fastify/websocket';
import { EnvelopePeer, readEnvelope, refusalEnvelope, type IEnvelope } from './envelopepeer.js';
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

const transportRefusal = (idArg: string | null, methodArg: string | null, reasonArg: string): IEnvelope =>
  refusalEnvelope(idArg ?? '', methodArg ?? '', null, [reasonArg]);

const readBearer = (requestArg: FastifyRequest): string | null => {
  const header = requestArg.headers.authorization;
  if (typeof header !== 'string') {
    return null;
  }
  const match = /^Bearer ([A-Za-z0-9._~+/=-]{1,8192})$/.exec(header);
  return match ? match[1] : null;
};

export const createHttpServer = async (cloudlyArg: Cloudly): Promise<FastifyInstance> => {
  const app = Fastify({
    logger: false,
    bodyLimit: cloudlyArg.config.bodyLimitBytes,
    // Closing idle keep-alive connections lets a graceful stop finish promptly.
    forceCloseConnections: 'idle',
  });
  await app.register(fastifyWebsocket, {
    options: { maxPayload: Math.max(cloudlyArg.config.bodyLimitBytes, 1024 * 1024) },
  });

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

  app.post('/typedrequest', async (request, reply) => {
    const body = typeof request.body === 'string' ? request.body : '';
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      return reply.code(400).send(transportRefusal(null, null, 'body is not valid JSON'));
    }
    const envelope = readEnvelope(parsed);
    if (typeof envelope === 'string') {
      const loose = parsed as Partial<IEnvelope> | null;
      return reply.code(400).send(transportRefusal(
        typeof loose?.correlation?.id === 'string' ? loose.correlation.id : null,
        typeof loose?.method === 'string' ? loose.method : null,
        envelope,
      ));
    }
    if (envelope.correlation.phase !== 'request') {
      return reply.code(400).send(transportRefusal(envelope.correlation.id, envelope.method, 'envelope phase must be request'));
    }
    const answer = await cloudlyArg.dispatch(envelope, { transport: 'http' });
    return reply.code(200).send(answer);
  });

  app.get('/typedsocket', {
    websocket: true,
    preValidation: async (request, reply) => {
      const bearer = readBearer(request);
      if (bearer === null) {
        return reply.code(401).send({ error: 'Authorization: Bearer <relay token or admin identity JWT> is required' });
      }
      const relay = await cloudlyArg.clusterManager.authenticateRelayToken(bearer);
      if (relay) {
        request.cloudlySocketAuthentication = { kind: 'relay', clusterId: relay.clusterId, tokenGeneration: relay.tokenGeneration };
        return;
      }
      if (bearer.split('.').length === 3) {
        try {
          await cloudlyArg.auth.verifyAdminJwt(bearer);
          request.cloudlySocketAuthentication = { kind: 'admin' };
          return;
        } catch {
          // Falls through to the refusal below.
        }
      }
      return reply.code(401).send({ error: 'the bearer is not a valid relay token or admin identity' });
    },
  }, (socket, request) => {
    const authentication = request.cloudlySocketAuthentication!;
    const localData: Record<string, unknown> = { transport: 'socket' };
    const peer = new EnvelopePeer(socket, {
      localData,
      route: (envelopeArg) => cloudlyArg.dispatch(envelopeArg, envelopeArg.localData as Record<string, unknown>),
      onMalformedFrame: (reasonArg) => {
        if (peer.isOpen) {
          socket.send(JSON.stringify(transportRefusal(null, null, reasonArg)));
        }
      },
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

