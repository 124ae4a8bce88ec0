import { defineDocumentKind, type IStoredDocument } from '../core/store.js';
import { sha256Hex } from '../interfaces/private/canonicaljson.js';
import type { TIdentityRole } from '../interfaces/data/user.js';
import type { IAccount } from '../interfaces/requests/account.js';

/**
 * Accounts as stored. The collection keeps its name from before accounts were managed, so the
 * bootstrap admin of an existing data directory is the same account. Neither the password nor its
 * hash ever leaves the server: answers use `toPublicAccount`, audit events show only `role` and `disabled`, and
 * the watch publishes this kind without one.
 */
export interface IAdminUser extends IStoredDocument {
  username: string;
  /** scrypt (ts/core/auth.ts `hashPassword`). */
  passwordHash: string;
  role: TIdentityRole;
  createdAt: number;
  disabled?: boolean;
  passwordChangedAt?: number;
  /**
   * Signed into every identity of the account (claim `sk`); replaced by a password change, a
   * role change and `logout { allSessions: true }`, which revokes every identity issued before.
   * Absent on accounts stored before revocation existed (identities without the claim match it).
   */
  sessionKey?: string;
  /** Identities revoked one by one (`logout`), until they would have expired anyway. */
  revokedSessions?: Array<{ sessionId: string; expiresAt: number }>;
}

// An account's audit events show its role and whether it is disabled: never its password hash or session keys.
export const adminUserKind = defineDocumentKind<IAdminUser>('CloudlyAdminUser', { auditedFields: ['role', 'disabled'] });

/** One account per name: the id is derived from it, so the database decides a race between two creations. */
export const userIdOf = (usernameArg: string): string => `admin-${sha256Hex(usernameArg).slice(0, 24)}`;

export const toPublicAccount = (docArg: IAdminUser): IAccount => ({
  userId: docArg.id,
  username: docArg.username,
  role: docArg.role,
  disabled: docArg.disabled === true,
  createdAt: docArg.createdAt,
  passwordChangedAt: docArg.passwordChangedAt ?? docArg.createdAt,
  generation: docArg.generation,
});
