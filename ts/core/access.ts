/**
 * Who may call a method, declared with the method (`access` in its operation declaration) and
 * enforced by the pipeline's guard. Nothing is inferred from a method's name: a `get…` that
 * writes must say `write`, and a method without a declaration does not start.
 *
 * - `read`: any signed-in account (an administrator or a read-only user); changes nothing.
 * - `own-session`: any signed-in account, acting on its own account or session only
 *   (`changePassword`, `logout`).
 * - `write`: administrators only; changes state or makes a cluster act.
 * - `admin-only`: administrators only although it changes nothing (account management reads).
 * - `relay`: only an authenticated relay socket; the socket names the cluster.
 * - `public`: no identity (login: it is how an identity is obtained).
 */
export const methodAccesses = ['read', 'own-session', 'write', 'admin-only', 'relay', 'public'] as const;
export type TMethodAccess = (typeof methodAccesses)[number];

/** What an administrator's declaration may say (the relay and public ones have their own registration). */
export type TAdminAccess = Extract<TMethodAccess, 'read' | 'own-session' | 'write' | 'admin-only'>;

/** Who is on the other end of a served method. */
export type TMethodCaller = 'admin' | 'relay' | 'public';

export const isMethodAccess = (valueArg: unknown): valueArg is TMethodAccess =>
  typeof valueArg === 'string' && (methodAccesses as readonly string[]).includes(valueArg);

/** The accesses a read-only (`user`) account may call; an administrator may call every admin access. */
export const readOnlyAccesses: ReadonlySet<TMethodAccess> = new Set<TMethodAccess>(['read', 'own-session']);

/** The refusal reason token for a role that may not call a method of some access. */
export { accessDeniedReason } from './errors.js';

/**
 * Thrown at registration when a declaration names no access, so a method added without one
 * stops the server at start-up with a sentence that says what to add.
 */
export const missingAccessMessage = (methodArg: string, valueArg: unknown): string =>
  `method ${methodArg} declares no valid access (got ${JSON.stringify(valueArg)}): add access: ${methodAccesses.map((accessArg) => `'${accessArg}'`).join(' | ')} to its declaration (docs/foundation.md, "Adding a method")`;

/** One served method as the catalogue lists it (GET /schema, the role tests). */
export interface IServedMethod {
  method: string;
  caller: TMethodCaller;
  access: TMethodAccess;
}
