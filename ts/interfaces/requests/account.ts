import type { IIdentity, TIdentityRole } from '../data/user.js';
import type { ITypedContract } from './admin.js';
import type { IPageRequest, IPageAnswer } from './pagination.js';

/**
 * Project's own definitions (the contract text defines only the login): accounts of people who
 * operate Cloudly. `admin` may call every method; `user` is read-only (the methods declared
 * `read`, and its own `changePassword` / `logout`, declared `own-session`); every other method
 * is refused `forbidden`. docs/api-dashboard.md describes the revocation rules.
 */

/** An account as answered: never a password or its hash. */
export interface IAccount {
  userId: string;
  username: string;
  role: TIdentityRole;
  disabled: boolean;
  createdAt: number;
  /** When the password was last set (creation or change). */
  passwordChangedAt: number;
  generation: number;
}

/** Creates an account; the username is unique (refused `conflict`, `username-taken`). */
export type IReq_Admin_CreateUser = ITypedContract<
  'createUser',
  { identity: IIdentity; username: string; password: string; role: TIdentityRole },
  { user: IAccount }
>;

/** Every account, paged like every admin list (whole list in creation order). Admins only. */
export type IReq_Admin_GetUsers = ITypedContract<
  'getUsers',
  { identity: IIdentity } & IPageRequest,
  { users: IAccount[] } & IPageAnswer
>;

/**
 * Disables or enables an account (compare-and-swap on its generation). A disabled account cannot
 * log in, and every identity it holds is refused from the next call on.
 */
export type IReq_Admin_SetUserDisabled = ITypedContract<
  'setUserDisabled',
  { identity: IIdentity; userId: string; disabled: boolean; expectedGeneration: number },
  { user: IAccount }
>;

/** Changes an account's role (compare-and-swap); its identities must log in again. */
export type IReq_Admin_SetUserRole = ITypedContract<
  'setUserRole',
  { identity: IIdentity; userId: string; role: TIdentityRole; expectedGeneration: number },
  { user: IAccount }
>;

/** Deletes an account (compare-and-swap); its identities are refused from the next call on. */
export type IReq_Admin_DeleteUser = ITypedContract<
  'deleteUser',
  { identity: IIdentity; userId: string; expectedGeneration: number },
  { user: IAccount }
>;

/**
 * Changes the caller's own password; the old one is required. Every identity of the account,
 * this one included, is revoked; the answer carries a fresh identity.
 */
export type IReq_Account_ChangePassword = ITypedContract<
  'changePassword',
  { identity: IIdentity; oldPassword: string; newPassword: string },
  { identity: IIdentity }
>;

/**
 * Revokes the caller's identity (its session); with `allSessions`, every identity of the account.
 * Refused from the next call on, on every instance.
 */
export type IReq_Account_Logout = ITypedContract<
  'logout',
  { identity: IIdentity; allSessions?: boolean },
  { revoked: 'session' | 'all-sessions' }
>;

/**
 * Project's own rules for a new account, shared by Cloudly's `createUser` and the dashboard's
 * form (which checks them as the administrator types).
 */
export const accountRules = Object.freeze({
  usernamePattern: /^[A-Za-z0-9][A-Za-z0-9._@-]*$/,
  usernameMaxLength: 64,
  passwordMinLength: 12,
  passwordMaxLength: 1024,
});

/** Every reason a new account's fields are not admissible, in the server's words (ts/core/validation.ts isString). */
export const validateNewAccount = (valueArg: { username: unknown; password: unknown; role: unknown }): string[] => {
  const reasons: string[] = [];
  const { username, password, role } = valueArg;
  if (typeof username !== 'string' || username.length < 1 || username.length > accountRules.usernameMaxLength) {
    reasons.push(`username must be a string of 1 to ${accountRules.usernameMaxLength} characters`);
  } else if (!accountRules.usernamePattern.test(username)) {
    reasons.push('username has characters that are not allowed');
  }
  if (typeof password !== 'string' || password.length < accountRules.passwordMinLength || password.length > accountRules.passwordMaxLength) {
    reasons.push(`password must be a string of ${accountRules.passwordMinLength} to ${accountRules.passwordMaxLength} characters`);
  }
  if (role !== 'admin' && role !== 'user') {
    reasons.push('role must be admin or user');
  }
  return reasons;
};
