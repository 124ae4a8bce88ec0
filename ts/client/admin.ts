import type { IIdentity } from '../interfaces/data/user.js';
import type { ITypedContract, IReq_Admin_LoginWithUsernameAndPassword } from '../interfaces/requests/admin.js';
import type { ICloudlyMethods, TAdminCallRequest, TCloudlyMethod } from '../interfaces/requests/methodmap.js';
import { EnvelopePeer, methodNotServedEnvelope, type IEnvelope } from '../core/envelopepeer.js';
import { openSocket, postEnvelope } from './transport.js';
import { defaultSocketLivenessTiming, watchSocketLiveness, type ISocketLivenessTiming } from '../core/socketliveness.js';

type TAnyContract = ITypedContract<string, unknown, unknown>;
/** Names no contract: `call<TUntypedContract>(…)` sends a request the contracts do not type (hostile-input tests, test-only methods). */
export type TUntypedContract = TAnyContract;
type TWithoutIdentity<TRequest> = Omit<TRequest, 'identity'>;

/**
 * An administrator's client: HTTP by default, or one WebSocket opened with the identity's JWT.
 * `fire` sends a request exactly as given; `call` adds the logged-in identity.
 */
export class CloudlyAdminClient {
  public identity: IIdentity | null = null;
  private peer: EnvelopePeer | null = null;
  /** What this client answers when Cloudly calls it on the socket (`changeEvent`, `watchExpired`). */
  private readonly callHandlers = new Map<string, (requestArg: unknown) => unknown>();

  constructor(
    public readonly baseUrl: string,
    private readonly options: {
      socketTimeoutMs?: number;
      liveness?: ISocketLivenessTiming | false;
      /**
       * Sends one request and answers its response (throwing its refusal), instead of an HTTP
       * POST: e.g. straight into a Cloudly in the same process (test/helpers/cloudly.ts).
       */
      post?: (methodArg: string, requestArg: unknown) => Promise<unknown>;
    } = {},
  ) {}

  public async login(usernameArg: string, passwordArg: string): Promise<IIdentity> {
    const answer = await this.fire<IReq_Admin_LoginWithUsernameAndPassword>('adminLoginWithUsernameAndPassword', {
      username: usernameArg,
      password: passwordArg,
    });
    this.identity = answer.identity;
    return answer.identity;
  }

  /**
   * Sends the request as given (identity included), over the socket when one is open, otherwise
   * over HTTP; its types follow from the method name like `call`'s, or from a contract named explicitly.
   */
  public async fire<M extends TCloudlyMethod>(methodArg: M, requestArg: ICloudlyMethods[M]['request']): Promise<ICloudlyMethods[M]['response']>;
  /** `fire<TUntypedContract>(…)` names no contract; no default, so an unfitting request fails to compile (see `call`). */
  public async fire<T extends TAnyContract = never>(methodArg: T['method'], requestArg: T['request']): Promise<T['response']>;
  public async fire<T extends TAnyContract>(methodArg: T['method'], requestArg: T['request']): Promise<T['response']> {
    if (this.peer?.isOpen) {
      return this.peer.call<T['response']>(methodArg, requestArg, this.options.socketTimeoutMs ?? 30_000);
    }
    if (this.options.post) {
      return this.options.post(methodArg, requestArg) as Promise<T['response']>;
    }
    return postEnvelope<T['response']>(this.baseUrl, methodArg, requestArg);
  }

  /**
   * Sends the request with the logged-in identity added. The request and answer types follow from
   * the method name (`call('getClusters', {})`) through the contracts' method map; a contract type
   * may still be named explicitly (`call<IReq_…>(…)`).
   */
  public async call<M extends TCloudlyMethod>(
    methodArg: M,
    requestArg: TAdminCallRequest<M>,
  ): Promise<ICloudlyMethods[M]['response']>;
  public async call<T extends TAnyContract = never>(
    methodArg: T['method'],
    requestArg: TWithoutIdentity<T['request']>,
  ): Promise<T['response']>;
  public async call<T extends TAnyContract>(
    methodArg: T['method'],
    requestArg: TWithoutIdentity<T['request']>,
  ): Promise<T['response']> {
    if (!this.identity) {
      throw new Error('log in first');
    }
    return this.fire<T>(methodArg, { ...(requestArg as object), identity: this.identity } as T['request']);
  }

  /** Moves this client onto one WebSocket authenticated with the identity's JWT. */
  public async connectSocket(): Promise<void> {
    if (!this.identity) {
      throw new Error('log in first');
    }
    const socket = await openSocket(this.baseUrl, this.identity.jwt);
    this.peer = new EnvelopePeer(socket, { route: (envelopeArg) => this.answerCall(envelopeArg) });
    if (this.options.liveness !== false) {
      // Pings Cloudly as Cloudly pings this socket, so a dead server does not hold calls for ever.
      watchSocketLiveness(socket, this.options.liveness ?? defaultSocketLivenessTiming);
    }
  }

  /**
   * Answers the calls Cloudly makes on this client's socket: `changeEvent` and `watchExpired` after
   * `watchChanges`. The handler's return value is the answer (`{}` when it returns nothing).
   */
  public handleCall<T extends TAnyContract>(methodArg: T['method'], handlerArg: (requestArg: T['request']) => T['response'] | void | Promise<T['response'] | void>): void {
    this.callHandlers.set(methodArg, handlerArg as (requestArg: unknown) => unknown);
  }

  private async answerCall(envelopeArg: IEnvelope): Promise<IEnvelope> {
    const handler = this.callHandlers.get(envelopeArg.method);
    if (!handler) {
      return methodNotServedEnvelope(envelopeArg);
    }
    const response = (await handler(envelopeArg.request)) ?? {};
    return { method: envelopeArg.method, response, correlation: { id: envelopeArg.correlation.id, phase: 'response' } };
  }

  public get socketOpen(): boolean {
    return this.peer?.isOpen ?? false;
  }

  public close(): void {
    this.peer?.close();
    this.peer = null;
  }
}
