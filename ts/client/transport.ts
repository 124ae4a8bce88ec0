import { randomUUID } from 'node:crypto';
import { TypedResponseError } from '@api.global/typedrequest';
import { WebSocket } from 'ws';
import type { IEnvelope } from '../core/envelopepeer.js';

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

/** POSTs one envelope to `/typedrequest`; throws the answer's error as a TypedResponseError. */
export const postEnvelope = async <TResponse>(baseUrlArg: string, methodArg: string, requestArg: unknown): Promise<TResponse> => {
  const response = await fetch(`${baseUrlArg}/typedrequest`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(buildRequestEnvelope(methodArg, requestArg)),
  });
  const text = await response.text();
  let answer: IEnvelope;
  try {
    answer = JSON.parse(text) as IEnvelope;
  } catch {
    throw new CloudlyTransportError(response.status, text);
  }
  if (answer?.error) {
    throw new TypedResponseError(answer.error.text, answer.error.data);
  }
  if (!response.ok || answer?.response === undefined) {
    throw new CloudlyTransportError(response.status, text);
  }
  return answer.response as TResponse;
};

/** Opens `/typedsocket` with a bearer; rejects with the HTTP status when the upgrade is refused. */
export const openSocket = (baseUrlArg: string, bearerArg: string): Promise<WebSocket> => new Promise((resolve, reject) => {
  const socket = new WebSocket(`${baseUrlArg.replace(/^http/, 'ws')}/typedsocket`, {
    headers: { authorization: `Bearer ${bearerArg}` },
    maxPayload: 64 * 1024 * 1024,
  });
  socket.once('open', () => resolve(socket));
  socket.once('unexpected-response', (_request, response) => {
    let body = '';
    response.on('data', (chunk: Buffer) => { body += chunk.toString(); });
    const retryAfter = Number(response.headers['retry-after']);
    response.on('end', () => reject(new CloudlyTransportError(response.statusCode ?? 0, body, Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter * 1000 : null)));
  });
  socket.once('error', (error) => reject(error));
});
