import type { TDecision } from '../core/store.js';
import type { TypedResponseError } from '@api.global/typedrequest';
import { refuse, type IRefusalCause, type TErrorCode } from '../core/errors.js';
import type { TIdentityRole } from '../interfaces/data/user.js';
import { readOnlyAccesses, type TAdminAccess } from '../core/access.js';
import type { IAdminUser } from './users.js';

/** Reasons the account methods give, defined once: machine tokens (docs/api-dashboard.md lists them). */
export const accountReasons = {
  usernameTaken: 'username-taken',
  userNotFound: 'user-not-found',
  generationMismatch: 'generation-mismatch',
  lastAdmin: 'last-enabled-admin',
  ownAccount: 'own-account',
  oldPasswordWrong: 'old-password-wrong',
  samePassword: 'password-unchanged',
  // Revocation: an identity that verified but whose account or session no longer stands.
  accountMissing: 'account-deleted',
  accountDisabled: 'account-disabled',
  sessionRevoked: 'session-revoked',
  sessionReplaced: 'sessions-replaced',
  roleChanged: 'role-changed',
} as const;

type TAccountReason = typeof accountReasons[keyof typeof accountReasons];

/** The sentence for people each account reason travels with (`causes`); clients branch on the token. */
export const accountReasonCauses: Partial<Record<TAccountReason, IRefusalCause>> = {
  'generation-mismatch': { path: 'request.expectedGeneration', message: 'is not the account\'s current generation' },
  'old-password-wrong': { path: 'request.oldPassword', message: 'is wrong' },
  'password-unchanged': { path: 'request.newPassword', message: 'must differ from the old password' },
  'account-deleted': { path: 'identity', message: 'names no account (deleted)' },
  'account-disabled': { path: 'identity', message: 'belongs to a disabled account' },
  'session-revoked': { path: 'identity', message: 'was revoked (logout)' },
  'sessions-replaced': { path: 'identity', message: 'was revoked by a password or role change or a logout of all sessions' },
  'role-changed': { path: 'identity', message: 'role is no longer the account\'s role; log in again' },
};

/** An account refusal: the token, with its sentence apart when it has one. */
export const accountRefusal = (codeArg: TErrorCode, reasonArg: TAccountReason): TypedResponseError => {
  const cause = accountReasonCauses[reasonArg];
  return refuse(codeArg, [reasonArg], cause ? { causes: [cause] } : {});
};

/**
 * Whether an identity of `roleArg` may call a method of `accessArg` (its declaration says which):
 * an administrator every administrator's method, a read-only `user` the `read` and `own-session` ones.
 */
export const roleMayCall = (roleArg: TIdentityRole, accessArg: TAdminAccess): boolean =>
  roleArg === 'admin' || readOnlyAccesses.has(accessArg);

/** A new account under a name-derived id: a second one with the name is refused by the database. */
export const decideCreateUser = (existingArg: IAdminUser | null, docArg: Omit<IAdminUser, 'generation'>): TDecision<IAdminUser> =>
  (existingArg
    ? { kind: 'refuse', refusal: accountRefusal('conflict', accountReasons.usernameTaken) }
    : { kind: 'create', doc: docArg });

const requireAccount = (currentArg: IAdminUser | null, expectedGenerationArg: number): TDecision<IAdminUser> | null => {
  if (!currentArg) {
    return { kind: 'refuse', refusal: accountRefusal('not-found', accountReasons.userNotFound) };
  }
  if (currentArg.generation !== expectedGenerationArg) {
    return { kind: 'refuse', refusal: accountRefusal('conflict', accountReasons.generationMismatch) };
  }
  return null;
};

export interface IAccountFacts {
  /** Enabled admin accounts other than the one decided on. */
  otherEnabledAdmins: number;
  /** The caller's own user id. */
  actorId: string;
}

/**
 * Disabling or enabling; the last enabled admin and the caller's own account cannot be disabled.
 * A disabled account's identities are refused; they stay refused after it is enabled again.
 */
export const decideSetDisabled = (
  currentArg: IAdminUser | null,
  requestArg: { disabled: boolean; expectedGeneration: number; newSessionKey: string },
  factsArg: IAccountFacts,
): TDecision<IAdminUser> => {
  const refused = requireAccount(currentArg, requestArg.expectedGeneration);
  if (refused) return refused;
  if ((currentArg!.disabled === true) === requestArg.disabled) {
    return { kind: 'keep' };
  }
  if (requestArg.disabled && currentArg!.id === factsArg.actorId) {
    return { kind: 'refuse', refusal: accountRefusal('conflict', accountReasons.ownAccount) };
  }
  if (requestArg.disabled && currentArg!.role === 'admin' && factsArg.otherEnabledAdmins === 0) {
    return { kind: 'refuse', refusal: accountRefusal('conflict', accountReasons.lastAdmin) };
  }
  // Disabling also replaces the session key: enabling again does not bring old identities back.
  return { kind: 'write', change: { set: requestArg.disabled ? { disabled: true, sessionKey: requestArg.newSessionKey, revokedSessions: [] } : { disabled: false } } };
};

/** A role change replaces the session key: identities carrying the old role must log in again. */
export const decideSetRole = (
  currentArg: IAdminUser | null,
  requestArg: { role: TIdentityRole; expectedGeneration: number; newSessionKey: string },
  factsArg: IAccountFacts,
): TDecision<IAdminUser> => {
  const refused = requireAccount(currentArg, requestArg.expectedGeneration);
  if (refused) return refused;
  if (currentArg!.role === requestArg.role) {
    return { kind: 'keep' };
  }
  if (currentArg!.role === 'admin' && currentArg!.disabled !== true && factsArg.otherEnabledAdmins === 0) {
    return { kind: 'refuse', refusal: accountRefusal('conflict', accountReasons.lastAdmin) };
  }
  return { kind: 'write', change: { set: { role: requestArg.role, sessionKey: requestArg.newSessionKey } } };
};

/** Deleting; the last enabled admin and the caller's own account cannot be deleted. */
export const decideDeleteUser = (
  currentArg: IAdminUser | null,
  requestArg: { expectedGeneration: number },
  factsArg: IAccountFacts,
): TDecision<IAdminUser> => {
  const refused = requireAccount(currentArg, requestArg.expectedGeneration);
  if (refused) return refused;
  if (currentArg!.id === factsArg.actorId) {
    return { kind: 'refuse', refusal: accountRefusal('conflict', accountReasons.ownAccount) };
  }
  if (currentArg!.role === 'admin' && currentArg!.disabled !== true && factsArg.otherEnabledAdmins === 0) {
    return { kind: 'refuse', refusal: accountRefusal('conflict', accountReasons.lastAdmin) };
  }
  return { kind: 'remove' };
};

/** One session revoked; sessions past their expiry are dropped from the list on the way. */
export const decideRevokeSession = (
  currentArg: IAdminUser | null,
  sessionArg: { sessionId: string; expiresAt: number },
  nowArg: number,
): TDecision<IAdminUser> => {
  if (!currentArg) {
    return { kind: 'refuse', refusal: accountRefusal('unauthenticated', accountReasons.accountMissing) };
  }
  const kept = (currentArg.revokedSessions ?? []).filter((sessionArg_) => sessionArg_.expiresAt > nowArg && sessionArg_.sessionId !== sessionArg.sessionId);
  return { kind: 'write', change: { set: { revokedSessions: [...kept, sessionArg] } } };
};

/** Every session revoked at once: a new session key (logout of all sessions, password change). */
export const decideReplaceSessionKey = (
  currentArg: IAdminUser | null,
  setArg: { sessionKey: string; passwordHash?: string; passwordChangedAt?: number },
): TDecision<IAdminUser> =>
  (currentArg
    ? { kind: 'write', change: { set: { ...setArg, revokedSessions: [] } } }
    : { kind: 'refuse', refusal: accountRefusal('unauthenticated', accountReasons.accountMissing) });

/** Why a verified identity no longer stands for its account, or null when it does. */
export const revocationOf = (
  accountArg: IAdminUser | null,
  identityArg: { role: TIdentityRole; sessionId: string; sessionKey: string },
): TAccountReason | null => {
  if (!accountArg) return accountReasons.accountMissing;
  if (accountArg.disabled === true) return accountReasons.accountDisabled;
  if ((accountArg.sessionKey ?? '') !== identityArg.sessionKey) return accountReasons.sessionReplaced;
  if (accountArg.role !== identityArg.role) return accountReasons.roleChanged;
  if ((accountArg.revokedSessions ?? []).some((sessionArg) => sessionArg.sessionId === identityArg.sessionId)) return accountReasons.sessionRevoked;
  return null;
};
