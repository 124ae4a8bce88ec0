import type { IIdentity } from '../interfaces/data/user.js';
import type { ITypedContract, IReq_Admin_LoginWithUsernameAndPassword } from '../interfaces/requests/admin.js';
import { EnvelopePeer } from '../core/envelopepeer.js';
import { openSocket, postEnvelope } from './transport.js';
import { defaultSocketLivenessTiming, watchSocketLiveness, type ISocketLivenessTiming } from '../core/socketliveness.js';

type TAnyContract = ITypedContract<string, unknown, unknown>;
type TWithoutIdentity<TRequest> = Omit<TRequest, 'identity'>;

/**
 * An administrator's client: HTTP by default, or one WebSocket opened with the identity's JWT.
 * `fire` sends a request exactly as given; `call` adds the logged-in identity.
 */
export class CloudlyAdminClient {
  public identity: IIdentity | null = null;
  private peer: EnvelopePeer | null = null;

  constructor(
    public readonly baseUrl: string,
    private readonly options: { socketTimeoutMs?: number; liveness?: ISocketLivenessTiming | false } = {},
  ) {}

  public async login(usernameArg: string, passwordArg: string): Promise<IIdentity> {
    const answer = await this.fire<IReq_Admin_LoginWithUsernameAndPassword>('adminLoginWithUsernameAndPassword', {
      username: usernameArg,
      password: passwordArg,
    });
    this.identity = answer.identity;
    return answer.identity;
  }

  /** Sends the request as given, over the socket when one is open, otherwise over HTTP. */
  public async fire<T extends TAnyContract>(methodArg: T['method'], requestArg: T['request']): Promise<T['response']> {
    if (this.peer?.isOpen) {
      return this.peer.call<T['response']>(methodArg, requestArg, this.options.socketTimeoutMs ?? 30_000);
    }
    return postEnvelope<T['response']>(this.baseUrl, methodArg, requestArg);
  }

  /** Sends the request with the logged-in identity added. */
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
    this.peer = new EnvelopePeer(socket);
    if (this.options.liveness !== false) {
      // Pings Cloudly as Cloudly pings this socket, so a dead server does not hold calls for ever.
      watchSocketLiveness(socket, this.options.liveness ?? defaultSocketLivenessTiming);
    }
  }

  public get socketOpen(): boolean {
    return this.peer?.isOpen ?? false;
  }

  public close(): void {
    this.peer?.close();
    this.peer = null;
  }
}
