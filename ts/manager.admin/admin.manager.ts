import { randomBytes } from 'node:crypto';
import { accountRules } from '../interfaces/requests/account.js';
import type { Cloudly } from '../classes.cloudly.js';
import type { IReq_Admin_LoginWithUsernameAndPassword } from '../interfaces/requests/admin.js';
import type { IIdentity, TIdentityRole } from '../interfaces/data/user.js';
import { accessDeniedRefusal, identityReasons, isRefusal, readCloudlyErrorData, refuse, refuseNamed } from '../core/errors.js';
import { checkRequestShape, shapeSchema, fieldProblem, fieldProblemReasons, invalidField, isBoolean, isIdString, isNonNegativeInteger, isOneOf, isString, refuseFields, type TFieldCheck } from '../core/validation.js';
import type { TAdminAccess } from '../core/access.js';
import { FailureThrottle, type IFailureThrottle } from '../core/failurethrottle.js';
import { dummyPasswordHash, hashPassword, verifyPassword, type IVerifiedIdentity } from '../core/auth.js';
import { findPage, nextCursorMember, oldestFirst, orderedPageShape } from '../core/pagination.js';
import { adminMutation, adminQuery, registerOperations } from '../core/operations.js';
import { adminUserKind, toPublicAccount, userIdOf, type IAdminUser } from './users.js';
import {
  accountReasons,
  accountRefusal,
  decideCreateUser,
  decideDeleteUser,
  decideReplaceSessionKey,
  decideRevokeSession,
  decideSetDisabled,
  decideSetRole,
  revocationOf,
  roleMayCall,
} from './decide.js';

/**
 * Failed logins are throttled per address and per address and account, never per account alone
 * (a lock on an account would let anyone lock its owner out): a few failures are free, then each
 * further failure doubles the wait before the next attempt, which is refused without a look at
 * the password. A login from an address with no recent failures is judged on its password alone.
 * Counted per Cloudly instance. A wrong old password on `changePassword` counts like a failed login.
 */
export const loginFailureLimits: Readonly<Record<'perAddress' | 'perAddressAndAccount', Readonly<IFailureThrottle>>> = Object.freeze({
  perAddressAndAccount: Object.freeze({ freeFailures: 5, firstDelayMs: 30_000, maxDelayMs: 15 * 60_000, forgetAfterMs: 60 * 60_000, maxKeys: 10_000 }),
  perAddress: Object.freeze({ freeFailures: 30, firstDelayMs: 30_000, maxDelayMs: 15 * 60_000, forgetAfterMs: 60 * 60_000, maxKeys: 10_000 }),
});

/** The key of an address and an account (JSON, so no address or name can pose as another pair). */
const addressAndAccount = (addressArg: string, usernameArg: string): string => JSON.stringify([addressArg, usernameArg]);

/** The address a call came from, as the transport read it (behind a trusted proxy: the client it names). */
const callerAddress = (remoteAddressArg: unknown): string => (typeof remoteAddressArg === 'string' ? remoteAddressArg : 'unknown');

// The rules live with the contract (accountRules), so the dashboard's form checks the same ones.
export const usernamePattern = accountRules.usernamePattern;
const isUsername = isString(1, accountRules.usernameMaxLength, usernamePattern);
/** A new password: 12 to 1,024 characters. */
export const passwordLimits = Object.freeze({ minLength: accountRules.passwordMinLength, maxLength: accountRules.passwordMaxLength });
const isNewPassword = isString(passwordLimits.minLength, passwordLimits.maxLength);
const isRole: TFieldCheck = isOneOf(['admin', 'user'], 'must be admin or user');
/** A login names an account and a password; their lengths bound the work an anonymous caller can ask for. */
const loginShape = { required: { username: isString(1, 64), password: isString(1, 1024) } };

const newSessionKey = (): string => randomBytes(16).toString('base64url');

/**
 * How long the revocation check may reuse a read of an account. A change committed on this
 * instance drops the entry at once; a change committed on another instance is seen here within
 * this bound. Reads of one account are also shared while one is in flight.
 */
export const accountCheckCacheMs = 1_000;
const accountCacheLimit = 10_000;

/**
 * Accounts and sessions: login, the bootstrap admin, account management, password change, logout
 * and revocation. Every admin call is checked here after its signature verified
 * (`requireActiveSession`) against the account read by id: a disabled or deleted account, a role
 * change, a password change or a logout is refused from the next call on this instance, and
 * within `accountCheckCacheMs` on every other instance (a read of an account is reused for at
 * most that long; a local commit of the account drops it at once).
 */
export class AdminManager {
  private readonly addressFailures = new FailureThrottle(loginFailureLimits.perAddress);
  private readonly accountFailures = new FailureThrottle(loginFailureLimits.perAddressAndAccount);
  /** Recent reads of accounts for the revocation check, by user id (the read's start time and its promise). */
  private readonly accountReads = new Map<string, { at: number; read: Promise<IAdminUser | null>; refreshing?: boolean }>();

  constructor(private readonly cloudly: Cloudly) {
    cloudly.store.onCommitted((kindArg, idArg) => {
      if (kindArg === (adminUserKind as unknown)) {
        this.accountReads.delete(idArg);
      }
    });
    this.registerLogin();
    this.registerAccounts();
  }

  /** Creates the bootstrap admin when no account has that name. Returns the generated password, if any. */
  public async ensureFirstAdmin(usernameArg: string, passwordArg: string | null): Promise<string | null> {
    if (await this.cloudly.store.findOne(adminUserKind, { username: usernameArg })) {
      return null;
    }
    const generated = passwordArg === null ? randomBytes(18).toString('base64url') : null;
    const passwordHash = await hashPassword(passwordArg ?? generated!, this.cloudly.config.passwordScryptN);
    const now = Date.now();
    // Two instances starting at once create one: the id is derived from the name.
    const { outcome } = await this.cloudly.store.mutate(adminUserKind, userIdOf(usernameArg), (existingArg) => (existingArg ? { kind: 'keep' } : {
      kind: 'create',
      doc: { id: userIdOf(usernameArg), username: usernameArg, passwordHash, role: 'admin' as const, createdAt: now, passwordChangedAt: now, sessionKey: newSessionKey() },
    }));
    return outcome === 'created' ? generated : null;
  }

  /** Logs in: the identity carries the account's session key, so a later revocation reaches it. */
  public async login(usernameArg: string, passwordArg: string): Promise<IIdentity> {
    const user = await this.cloudly.store.findOne(adminUserKind, { username: usernameArg });
    // Verify against a dummy hash when the user is unknown (or has no hash yet), so timing does not reveal names.
    const ok = await verifyPassword(passwordArg, user?.passwordHash || dummyPasswordHash(this.cloudly.config.passwordScryptN));
    if (!user || !user.passwordHash || !ok || user.disabled === true) {
      throw refuseNamed('unauthenticated', identityReasons.credentialsWrong, 'username or password is wrong');
    }
    return this.cloudly.auth.issueIdentity({ id: user.id, username: user.username, role: user.role, ...(user.sessionKey ? { sessionKey: user.sessionKey } : {}) });
  }

  /**
   * The guard's check after the signature: the role may call the method (`forbidden` otherwise),
   * and the identity still stands for its account (`unauthenticated` otherwise).
   */
  public async requireAllowed(identityArg: IVerifiedIdentity, accessArg: TAdminAccess): Promise<void> {
    if (!roleMayCall(identityArg.role, accessArg)) {
      throw accessDeniedRefusal();
    }
    await this.requireActiveSession(identityArg);
  }

  /** Refuses an identity whose account is gone or disabled, or whose session was revoked. */
  public async requireActiveSession(identityArg: IVerifiedIdentity): Promise<void> {
    const revoked = revocationOf(await this.readAccount(identityArg.userId), identityArg);
    if (revoked) {
      throw accountRefusal('unauthenticated', revoked);
    }
  }

  /**
   * The account as read at most `accountCheckCacheMs` ago (a read in flight is shared). Past half
   * that, the account is read again in the background and the answer installed when it lands, so
   * a call seldom waits for the database (during a relay storm it may be slow) and the bound holds.
   */
  private readAccount(userIdArg: string): Promise<IAdminUser | null> {
    const now = Date.now();
    const recent = this.accountReads.get(userIdArg);
    if (recent && now - recent.at < accountCheckCacheMs) {
      if (now - recent.at >= accountCheckCacheMs / 2 && !recent.refreshing) {
        recent.refreshing = true;
        const refresh = this.cloudly.store.get(adminUserKind, userIdArg);
        refresh.then((accountArg) => {
          // Only over the entry it refreshes: a local change (delete) or a newer read wins.
          if (this.accountReads.get(userIdArg) === recent) {
            this.accountReads.set(userIdArg, { at: now, read: Promise.resolve(accountArg) });
          }
        }, () => {
          recent.refreshing = false;
        });
      }
      return recent.read;
    }
    if (this.accountReads.size >= accountCacheLimit) {
      this.accountReads.clear();
    }
    const read = this.cloudly.store.get(adminUserKind, userIdArg);
    this.accountReads.set(userIdArg, { at: now, read });
    read.catch(() => {
      if (this.accountReads.get(userIdArg)?.read === read) {
        this.accountReads.delete(userIdArg);
      }
    });
    return read;
  }

  /** The socket upgrade: a verified JWT of a standing account (either role; each call is checked again). */
  public async verifySocketJwt(jwtArg: string): Promise<IVerifiedIdentity> {
    const identity = await this.cloudly.auth.verifyIdentityJwt(jwtArg);
    await this.requireActiveSession(identity);
    return identity;
  }

  private async otherEnabledAdmins(userIdArg: string): Promise<number> {
    const admins = await this.cloudly.store.find(adminUserKind, { role: 'admin' });
    return admins.filter((adminArg) => adminArg.id !== userIdArg && adminArg.disabled !== true).length;
  }

  private registerLogin(): void {
    this.cloudly.checkedRequestMembers.set('adminLoginWithUsernameAndPassword', shapeSchema(loginShape));
    this.cloudly.addPublicHandler<IReq_Admin_LoginWithUsernameAndPassword>('adminLoginWithUsernameAndPassword', async (request, context) => {
      const problems = checkRequestShape(request, loginShape);
      if ((request as { identity?: unknown } | null)?.identity !== undefined) {
        problems.push(fieldProblem('request.identity', fieldProblemReasons.unknown, 'is not a field of this request'));
      }
      if (problems.length > 0) {
        throw refuseFields(problems);
      }
      const address = callerAddress(context.remoteAddress);
      const pair = addressAndAccount(address, request.username);
      this.refuseWhileThrottled(address, pair, request.username);
      try {
        const identity = await this.login(request.username, request.password);
        this.accountFailures.clear(pair);
        this.cloudly.logger.info({ username: request.username }, 'administrator logged in');
        return { identity };
      } catch (error) {
        if (isRefusal(error) && readCloudlyErrorData(error.errorData)?.code === 'unauthenticated') {
          this.recordFailure(address, pair);
        }
        throw error;
      }
    });
  }

  /** Refuses `unavailable login-rate-limited` while the address, or the address for this account, must wait. */
  private refuseWhileThrottled(addressArg: string, pairArg: string, usernameArg: string): void {
    const retryAfterMs = Math.max(this.addressFailures.retryAfterMs(addressArg), this.accountFailures.retryAfterMs(pairArg));
    if (retryAfterMs > 0) {
      this.cloudly.logger.warn({ username: usernameArg, remoteAddress: addressArg, retryAfterMs }, 'login refused: too many failed logins from this address');
      throw refuse('unavailable', ['login-rate-limited'], { retryAfterMs });
    }
  }

  private recordFailure(addressArg: string, pairArg: string): void {
    this.addressFailures.recordFailure(addressArg);
    this.accountFailures.recordFailure(pairArg);
  }

  private registerAccounts(): void {
    /** The facts every decision that could lock administrators out needs. */
    const guardFacts = async (userIdArg: string, actorIdArg: string) => ({
      otherEnabledAdmins: await this.otherEnabledAdmins(userIdArg),
      actorId: actorIdArg,
      newSessionKey: newSessionKey(),
    });
    registerOperations(this.cloudly, [
      adminMutation({
        method: 'createUser',
        access: 'write',
        input: { required: { username: isUsername, password: isNewPassword, role: isRole } },
        // Hashed before the write; a dry run hashes too (it answers what the real call would).
        facts: async (request) => ({ passwordHash: await hashPassword(request.password, this.cloudly.config.passwordScryptN), sessionKey: newSessionKey() }),
        target: (request) => ({ kind: adminUserKind, id: userIdOf(request.username) }),
        decide: (existing, { request, facts, now }) => decideCreateUser(existing, {
          id: userIdOf(request.username),
          username: request.username,
          passwordHash: facts.passwordHash,
          role: request.role,
          createdAt: now,
          passwordChangedAt: now,
          sessionKey: facts.sessionKey,
        }),
        answer: ({ doc }) => ({ user: toPublicAccount(doc!) }),
        after: ({ doc }) => {
          this.cloudly.logger.info({ userId: doc!.id, username: doc!.username, role: doc!.role }, 'account created');
        },
      }),
      adminQuery({
        method: 'getUsers',
        access: 'admin-only',
        input: { required: {}, optional: orderedPageShape('getUsers', oldestFirst('createdAt')) },
        run: async (request) => {
          const page = await findPage(this.cloudly.store, adminUserKind, {}, 'getUsers', request, oldestFirst('createdAt'));
          return { users: page.items.map(toPublicAccount), ...nextCursorMember(page) };
        },
      }),
      adminMutation({
        method: 'setUserDisabled',
        access: 'write',
        input: { required: { userId: isIdString, disabled: isBoolean, expectedGeneration: isNonNegativeInteger } },
        facts: (request, context) => guardFacts(request.userId, context.identity.userId),
        target: (request) => ({ kind: adminUserKind, id: request.userId }),
        decide: (current, { request, facts }) => decideSetDisabled(current, { ...request, newSessionKey: facts.newSessionKey }, facts),
        answer: ({ doc }) => ({ user: toPublicAccount(doc!) }),
        after: (_outcome, { request }) => {
          this.cloudly.logger.info({ userId: request.userId, disabled: request.disabled }, 'account disabled state set');
        },
      }),
      adminMutation({
        method: 'setUserRole',
        access: 'write',
        input: { required: { userId: isIdString, role: isRole, expectedGeneration: isNonNegativeInteger } },
        facts: (request, context) => guardFacts(request.userId, context.identity.userId),
        target: (request) => ({ kind: adminUserKind, id: request.userId }),
        decide: (current, { request, facts }) =>
          decideSetRole(current, { role: request.role as TIdentityRole, expectedGeneration: request.expectedGeneration, newSessionKey: facts.newSessionKey }, facts),
        answer: ({ doc }) => ({ user: toPublicAccount(doc!) }),
        after: (_outcome, { request }) => {
          this.cloudly.logger.info({ userId: request.userId, role: request.role }, 'account role set');
        },
      }),
      adminMutation({
        method: 'deleteUser',
        access: 'write',
        input: { required: { userId: isIdString, expectedGeneration: isNonNegativeInteger } },
        facts: (request, context) => guardFacts(request.userId, context.identity.userId),
        target: (request) => ({ kind: adminUserKind, id: request.userId }),
        decide: (current, { request, facts }) => decideDeleteUser(current, request, facts),
        // The account as it was when its removal committed (a removal already done is not-found).
        answer: ({ previous }) => {
          if (!previous) {
            throw accountRefusal('not-found', accountReasons.userNotFound);
          }
          return { user: toPublicAccount(previous) };
        },
        after: (_outcome, { request }) => {
          this.cloudly.logger.info({ userId: request.userId }, 'account deleted');
        },
      }),
      // The old password is checked (rate-limited like a login) and the new one hashed before the
      // one write, which replaces the hash and the session key (every identity of the account revoked).
      adminMutation({
        method: 'changePassword',
        access: 'own-session',
        input: { required: { oldPassword: isString(1, passwordLimits.maxLength), newPassword: isNewPassword } },
        check: (request) => (request.oldPassword === request.newPassword ? [invalidField('request.newPassword', 'must differ from request.oldPassword')] : []),
        refusals: { invalid: () => accountRefusal('invalid-request', accountReasons.samePassword) },
        facts: async (request, context) => {
          const username = context.identity.name;
          const address = callerAddress(context.localData.remoteAddress);
          const pair = addressAndAccount(address, username);
          this.refuseWhileThrottled(address, pair, username);
          const account = await this.cloudly.store.get(adminUserKind, context.identity.userId);
          if (!account || !(await verifyPassword(request.oldPassword, account.passwordHash || dummyPasswordHash(this.cloudly.config.passwordScryptN)))) {
            this.recordFailure(address, pair);
            throw accountRefusal('invalid-request', accountReasons.oldPasswordWrong);
          }
          return { sessionKey: newSessionKey(), passwordHash: await hashPassword(request.newPassword, this.cloudly.config.passwordScryptN) };
        },
        target: (_request, _facts, context) => ({ kind: adminUserKind, id: context.identity.userId }),
        decide: (current, { facts, now }) => decideReplaceSessionKey(current, { ...facts, passwordChangedAt: now }),
        answer: async ({ doc }) => ({
          identity: await this.cloudly.auth.issueIdentity({ id: doc!.id, username: doc!.username, role: doc!.role, sessionKey: doc!.sessionKey }),
        }),
        after: ({ doc }) => {
          this.cloudly.logger.info({ userId: doc!.id }, 'password changed; every identity of the account revoked');
        },
      }),
      adminMutation({
        method: 'logout',
        access: 'own-session',
        input: { required: {}, optional: { allSessions: isBoolean } },
        // The session is the caller's own: this identity's session, or every one of its account.
        facts: async (_request, context) => ({
          sessionKey: newSessionKey(),
          session: { sessionId: context.identity.sessionId, expiresAt: context.identity.expiresAt },
        }),
        target: (_request, _facts, context) => ({ kind: adminUserKind, id: context.identity.userId }),
        decide: (current, { request, facts, now }) => (request.allSessions === true
          ? decideReplaceSessionKey(current, { sessionKey: facts.sessionKey })
          : decideRevokeSession(current, facts.session, now)),
        answer: (_outcome, { request }) => ({ revoked: request.allSessions === true ? 'all-sessions' as const : 'session' as const }),
      }),
    ]);
  }
}

export type { IAdminUser };
