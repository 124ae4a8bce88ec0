import { WebSocket } from 'ws';
import { waitFor } from './cloudly.js';

/**
 * Raw wire access for tests that speak as an attacker or a third-party relay would: envelopes
 * written as text, sent over plain fetch and plain ws, with no client library in between.
 */

export interface IWireAnswer {
  method?: string;
  request?: unknown;
  response?: unknown;
  error?: { text: string; data: { code: string; retryable: boolean; reasons?: string[]; causes?: Array<{ path?: string; message: string }>; retryAfterMs?: number } } | null;
  correlation?: { id: string; phase: string };
}

export const deepArray = (depthArg: number): string => `${'['.repeat(depthArg)}${']'.repeat(depthArg)}`;

export const rawEnvelope = (methodArg: string, requestTextArg: string, idArg = 'c-1'): string =>
  `{"method":${JSON.stringify(methodArg)},"request":${requestTextArg},"response":null,"correlation":{"id":${JSON.stringify(idArg)},"phase":"request"}}`;

export const postText = async (baseUrlArg: string, bodyArg: string): Promise<{ status: number; cacheControl: string | null; text: string; body: IWireAnswer }> => {
  const response = await fetch(`${baseUrlArg}/typedrequest`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: bodyArg });
  const text = await response.text();
  return { status: response.status, cacheControl: response.headers.get('cache-control'), text, body: JSON.parse(text) as IWireAnswer };
};

/** A raw socket that collects every text frame it receives, matched by correlation id. */
export class RawSocket {
  public readonly answers = new Map<string, IWireAnswer>();
  public closeCode: number | null = null;
  public readonly requests: IWireAnswer[] = [];

  private constructor(public readonly socket: WebSocket) {
    socket.on('message', (data, isBinary) => {
      if (isBinary) {
        return;
      }
      const envelope = JSON.parse(data.toString()) as IWireAnswer;
      if (envelope.correlation?.phase === 'request') {
        this.requests.push(envelope);
      } else {
        this.answers.set(envelope.correlation?.id ?? '', envelope);
      }
    });
    socket.on('close', (code) => { this.closeCode = code; });
  }

  public static open(baseUrlArg: string, bearerArg: string, schemeArg = 'Bearer'): Promise<RawSocket> {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(`${baseUrlArg.replace(/^http/, 'ws')}/typedsocket`, {
        headers: { authorization: `${schemeArg} ${bearerArg}` },
        maxPayload: 64 * 1024 * 1024,
      });
      socket.once('open', () => resolve(new RawSocket(socket)));
      // The refusal's body travels on the error (`body`), read whole before it rejects.
      socket.once('unexpected-response', (_request, response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunkArg: string) => { body += chunkArg; });
        response.on('end', () => reject(Object.assign(new Error(`upgrade refused: ${response.statusCode}`), { body })));
      });
      socket.once('error', reject);
    });
  }

  public async send(textArg: string, idArg: string, timeoutMsArg = 10_000): Promise<IWireAnswer> {
    this.socket.send(textArg);
    await waitFor(() => this.answers.has(idArg) || this.closeCode !== null, `answer ${idArg}`, timeoutMsArg);
    const answer = this.answers.get(idArg);
    if (!answer) {
      throw new Error(`socket closed (${this.closeCode}) before answering ${idArg}`);
    }
    return answer;
  }

  public close(): void {
    this.socket.close();
  }
}

