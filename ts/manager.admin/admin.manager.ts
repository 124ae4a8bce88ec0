import type { Cloudly } from '../classes.cloudly.js';
import type { IReq_Admin_LoginWithUsernameAndPassword } from '../interfaces/requests/admin.js';
import { isTypedResponseError, readCloudlyErrorData, refuse } from '../core/errors.js';
import { checkRequestShape, isString } from '../core/validation.js';
import { AttemptLimiter, type IAttemptLimit } from '../core/attemptlimiter.js';

/**
 * Failed logins allowed before further attempts are refused without a look at the password:
 * per username (guessing one account's password) and per address (trying many accounts).
 * Counted per Cloudly instance.
 */
export const loginFailureLimits: Readonly<Record<'perUsername' | 'perAddress', IAttemptLimit>> = Object.freeze({
  perUsername: { attempts: 10, windowMs: 5 * 60_000 },
  perAddress: { attempts: 30, windowMs: 5 * 60_000 },
});

/** Administrator login: the one method that needs no identity. */
export class AdminManager {
  private readonly usernameFailures = new AttemptLimiter(loginFailureLimits.perUsername);
  private readonly addressFailures = new AttemptLimiter(loginFailureLimits.perAddress);

  constructor(private readonly cloudly: Cloudly) {
    cloudly.addPublicHandler<IReq_Admin_LoginWithUsernameAndPassword>('adminLoginWithUsernameAndPassword', async (request, context) => {
      const reasons = checkRequestShape(request, {
        required: { username: isString(1, 64), password: isString(1, 1024) },
      });
      if ((request as { identity?: unknown } | null)?.identity !== undefined) {
        reasons.push('request.identity is not a field of this request');
      }
      if (reasons.length > 0) {
        throw refuse('invalid-request', reasons);
      }
      const address = typeof context.remoteAddress === 'string' ? context.remoteAddress : 'unknown';
      const retryAfterMs = Math.max(this.usernameFailures.retryAfterMs(request.username), this.addressFailures.retryAfterMs(address));
      if (retryAfterMs > 0) {
        this.cloudly.logger.warn({ username: request.username, remoteAddress: address }, 'login refused: too many failed logins');
        throw refuse('unavailable', ['login-rate-limited'], { retryAfterMs });
      }
      try {
        const identity = await this.cloudly.auth.login(request.username, request.password);
        this.usernameFailures.clear(request.username);
        this.cloudly.logger.info({ username: request.username }, 'administrator logged in');
        return { identity };
      } catch (error) {
        if (isTypedResponseError(error) && readCloudlyErrorData(error.errorData)?.code === 'unauthenticated') {
          this.usernameFailures.record(request.username);
          this.addressFailures.record(address);
        }
        throw error;
      }
    });
  }
}
