import type { Cloudly } from '../classes.cloudly.js';
import type { IReq_Admin_LoginWithUsernameAndPassword } from '../interfaces/requests/admin.js';
import { refuse } from '../core/errors.js';
import { checkRequestShape, isString } from '../core/validation.js';

/** Administrator login: the one method that needs no identity. */
export class AdminManager {
  constructor(private readonly cloudly: Cloudly) {
    cloudly.addPublicHandler<IReq_Admin_LoginWithUsernameAndPassword>('adminLoginWithUsernameAndPassword', async (request) => {
      const reasons = checkRequestShape(request, {
        required: { username: isString(1, 64), password: isString(1, 1024) },
      });
      if ((request as { identity?: unknown } | null)?.identity !== undefined) {
        reasons.push('request.identity is not a field of this request');
      }
      if (reasons.length > 0) {
        throw refuse('invalid-request', reasons);
      }
      const identity = await this.cloudly.auth.login(request.username, request.password);
      this.cloudly.logger.info({ username: request.username }, 'administrator logged in');
      return { identity };
    });
  }
}
