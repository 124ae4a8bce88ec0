import { randomUUID } from 'node:crypto';
import type { WebSocket } from 'ws';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { IEnvelope } from '../core/envelopepeer.js';
import { CloudlyRefusal } from '../core/refusal.js';
import { holdEarlyMessages } from '../core/heldmessages.js';
import { assertCredentialsMayTravel, clientTlsOptions } from './trust.js';

/** Client-side transport pieces shared by the admin and the relay client. */

export const buildRequestEnvelope = (methodArg: string, requestArg: unknown): IEnvelope => ({
  method: methodArg,
  request: requestArg,
  response: null,
  correlation: { id: randomUUID(), phase: 'request' },
});

/** Thrown when the server answered with a status and body that are not an envelope. */
export class CloudlyTransportError extends Error {
  constructor(
    public readonly status: number,
    public readonly body: string,
    /** The answer's `Retry-After` in ms (e.g. a `429` for too many refused upgrades), or null. */
    public readonly retryAfterMs: number | null = null,
  ) {
    super(`cloudly answered HTTP ${status}: ${body.slice(0, 200)}`);
    this.name = 'CloudlyTransportError';
  }
}

/** An answer's `Retry-After` (whole seconds) in ms, or null when it has none. */
const retryAfterMsOf = (headersArg: IncomingHttpHeaders): number | null => {
  const seconds = Number(headersArg['retry-after']);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : null;
};

/**
 * One POST through node's own HTTP client: `fetch` would load undici (and compile its parser) on the
 * first call of every process, which a one-shot command like `cloudly clusters list` pays in full.
 * Connections are kept alive by node's global agent as `fetch` kept them. A connection failure
 * rejects with node's error (`code` ECONNREFUSED, ENOTFOUND, …).
 */
const postText = async (urlArg: string, bodyArg: string): Promise<{ status: number; text: string; retryAfterMs: number | null }> => {
  const url = new URL(urlArg);
  // Every POST carries a password, an identity or a token: never in clear to another machine.
  assertCredentialsMayTravel(urlArg);
  const { request } = url.protocol === 'https:' ? await import('node:https') : await import('node:http');
  return new Promise((resolve, reject) => {
    const outgoing = request(url, {
      ...(url.protocol === 'https:' ? clientTlsOptions() : {}),
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(bodyArg) },
    }, (incoming) => {
      const chunks: Buffer[] = [];
      incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
      incoming.on('error', reject);
      incoming.on('end', () => resolve({
        status: incoming.statusCode ?? 0,
        text: Buffer.concat(chunks).toString('utf8'),
        retryAfterMs: retryAfterMsOf(incoming.headers),
      }));
    });
    outgoing.on('error', reject);
    outgoing.end(bodyArg);
  });
};

/**
 * A GET whose answer is read as it arrives (`cloudly snapshot save`, the simulator's JWKS), through
 * the same trust as every call: https verified against the system's CAs and CLOUDLY_CA_FILE, no
 * plain http to a remote host.
 */
export const openGet = async (urlArg: string, headersArg: Record<string, string> = {}): Promise<IncomingMessage> => {
  const url = new URL(urlArg);
  assertCredentialsMayTravel(urlArg);
  const { get } = url.protocol === 'https:' ? await import('node:https') : await import('node:http');
  return new Promise((resolve, reject) => {
    get(url, { ...(url.protocol === 'https:' ? clientTlsOptions() : {}), headers: headersArg }, resolve).once('error', reject);
  });
};

/** The whole body of an answer, as text. */
export const readAnswerText = async (incomingArg: IncomingMessage): Promise<string> => {
  const chunks: Buffer[] = [];
  for await (const chunk of incomingArg) {
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
};

/**
 * A connection Cloudly refused at accept (too many connections waiting, docs/connections.md) is
 * answered `503` with a `Retry-After` and no body before anything of the request was read, so the
 * request never reached a handler and sending it again is safe whatever the method. The client
 * waits as told (at most `acceptRetryCapMs`, with jitter so a crowd of clients spreads out) and
 * tries again, `acceptRetries` times; then the refusal reaches the caller with its `retryAfterMs`.
 */
const acceptRetries = 3;
const acceptRetryCapMs = 5_000;

const refusedAtAccept = (answerArg: { status: number; text: string; retryAfterMs: number | null }): boolean =>
  answerArg.status === 503 && answerArg.text === '' && answerArg.retryAfterMs !== null;

/** POSTs one envelope to `/typedrequest`; throws the answer's error as a CloudlyRefusal. */
export const postEnvelope = async <TResponse>(baseUrlArg: string, methodArg: string, requestArg: unknown): Promise<TResponse> => {
  const body = JSON.stringify(buildRequestEnvelope(methodArg, requestArg));
  let answered = await postText(`${baseUrlArg}/typedrequest`, body);
  for (let retry = 0; retry < acceptRetries && refusedAtAccept(answered); retry++) {
    const waitMs = Math.min(answered.retryAfterMs!, acceptRetryCapMs) * (0.5 + Math.random() / 2);
    await new Promise((resolve) => setTimeout(resolve, waitMs));
    answered = await postText(`${baseUrlArg}/typedrequest`, body);
  }
  const { status, text, retryAfterMs } = answered;
  let answer: IEnvelope;
  try {
    answer = JSON.parse(text) as IEnvelope;
  } catch {
    throw new CloudlyTransportError(status, text, retryAfterMs);
  }
  if (answer?.error) {
    throw new CloudlyRefusal(answer.error.text, answer.error.data);
  }
  if (status < 200 || status > 299 || answer?.response === undefined) {
    throw new CloudlyTransportError(status, text, retryAfterMs);
  }
  return answer.response as TResponse;
};

/**
 * Opens `/typedsocket` with a bearer; rejects with the HTTP status when the upgrade is refused.
 * `ws` is loaded here, on the first socket, so a command that only POSTs never loads it.
 */
export const openSocket = async (baseUrlArg: string, bearerArg: string): Promise<WebSocket> => {
  const { WebSocket } = await import('ws');
  return openSocketWith(WebSocket, baseUrlArg, bearerArg);
};

const openSocketWith = (socketClassArg: typeof WebSocket, baseUrlArg: string, bearerArg: string): Promise<WebSocket> => new Promise((resolve, reject) => {
  assertCredentialsMayTravel(baseUrlArg);
  const socket = new socketClassArg(`${baseUrlArg.replace(/^http/, 'ws')}/typedsocket`, {
    ...(baseUrlArg.startsWith('https:') ? clientTlsOptions() : {}),
    headers: { authorization: `Bearer ${bearerArg}` },
    maxPayload: 64 * 1024 * 1024,
  });
  // Cloudly may call the socket the moment it opens: those frames wait for the peer (envelopepeer.ts).
  holdEarlyMessages(socket);
  socket.once('open', () => resolve(socket));
  socket.once('unexpected-response', (_request, response) => {
    let body = '';
    response.on('data', (chunk: Buffer) => { body += chunk.toString(); });
    response.on('end', () => reject(new CloudlyTransportError(response.statusCode ?? 0, body, retryAfterMsOf(response.headers))));
  });
  socket.once('error', (error) => reject(error));
});
