import { TypedHandler, TypedResponseError, TypedRouter } from '@api.global/typedrequest';
import type { ITypedRequest } from '@api.global/typedrequest-interfaces';
import type { ITypedContract } from '../interfaces/requests/admin.js';
import { EnvelopePeer } from '../core/envelopepeer.js';
import { openSocket } from './transport.js';
import { defaultSocketLivenessTiming, watchSocketLiveness, type ISocketLivenessTiming } from '../core/socketliveness.js';

type TAnyContract = ITypedContract<string, unknown, unknown>;

/**
 * A cluster relay's connection to Cloudly: one socket authenticated with the relay token. It
 * calls Cloudly with `fire` and answers Cloudly's calls with the handlers added by `addHandler`.
 * Real relays can use it as it is; the tests use it as their relay.
 */
export class CloudlyRelayClient {
  public readonly router = new TypedRouter();
  public peer!: EnvelopePeer;

  private constructor(public readonly baseUrl: string, private readonly options: { timeoutMs: number }) {}

  /**
   * Opens the socket. The client answers Cloudly's pings (ws does that by itself) and pings
   * Cloudly too (`liveness`, default every 5 s, terminated after 2 unanswered): a Cloudly that
   * stopped reading closes the socket, so the relay learns it through `onClose` and can reconnect.
   */
  public static async connect(
    baseUrlArg: string,
    relayTokenArg: string,
    optionsArg: { timeoutMs?: number; liveness?: ISocketLivenessTiming | false } = {},
  ): Promise<CloudlyRelayClient> {
    const client = new CloudlyRelayClient(baseUrlArg, { timeoutMs: optionsArg.timeoutMs ?? 30_000 });
    const socket = await openSocket(baseUrlArg, relayTokenArg);
    client.peer = new EnvelopePeer(socket, { router: client.router });
    if (optionsArg.liveness !== false) {
      watchSocketLiveness(socket, optionsArg.liveness ?? defaultSocketLivenessTiming);
    }
    return client;
  }

  /**
   * Answers calls from Cloudly. A handler's unexpected failure is answered as `internal`, so
   * Cloudly never waits for an answer that typedrequest would otherwise drop.
   */
  public addHandler<T extends TAnyContract>(
    methodArg: T['method'],
    fnArg: (requestArg: T['request']) => Promise<T['response']>,
  ): void {
    this.router.addTypedHandler(new TypedHandler<ITypedRequest>(methodArg, async (requestArg) => {
      try {
        return (await fnArg(requestArg as T['request'])) as ITypedRequest['response'];
      } catch (error) {
        if (error instanceof TypedResponseError) {
          throw error;
        }
        throw new TypedResponseError('relay handler failed', { code: 'internal', retryable: true });
      }
    }));
  }

  public async fire<T extends TAnyContract>(
    methodArg: T['method'],
    requestArg: T['request'],
    timeoutMsArg = this.options.timeoutMs,
  ): Promise<T['response']> {
    return this.peer.call<T['response']>(methodArg, requestArg, timeoutMsArg);
  }

  public get isOpen(): boolean {
    return this.peer.isOpen;
  }

  public onClose(listenerArg: () => void): void {
    this.peer.onClose(listenerArg);
  }

  /** Closes the socket cleanly. */
  public close(): void {
    this.peer.close();
  }

  /** Drops the socket without a close handshake, as a crashed relay would. */
  public terminate(): void {
    this.peer.terminate();
  }
}
