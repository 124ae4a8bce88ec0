/** The identity every administrator request carries. Project's own definition. */
export type TIdentityRole = 'admin' | 'user';

export interface IIdentity {
  name: string;
  userId: string;
  type: 'user' | 'machine';
  role: TIdentityRole;
  /** Epoch milliseconds after which the identity is refused. */
  expiresAt: number;
  /** Compact RS256 JWT signed by Cloudly; the only part the server trusts. */
  jwt: string;
}
