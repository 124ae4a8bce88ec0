import type { Cloudly } from '../classes.cloudly.js';
import { registerOperations } from '../core/operations.js';
import { rolloutOperations } from './operations.js';

/**
 * Rollouts (docs/rollouts.md): the plan, the creation and the controls as declared operations.
 * The rollout controller, built with the others in `Cloudly.buildControllers`, advances them.
 */
export class RolloutManager {
  constructor(cloudly: Cloudly) {
    registerOperations(cloudly, rolloutOperations({
      store: cloudly.store,
      judgeService: (docArg) => cloudly.controllers.verdict.judgeService(docArg),
    }));
  }
}
