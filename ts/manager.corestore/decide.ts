import { refuse, refuseNamed } from '../core/errors.js';
import type { TDecision } from '../core/store.js';
import type { IPlatformBinding } from '../interfaces/data/platformbinding.js';

/**
 * The Corestore domain's pure decisions over what the store read (the ledger's own decisions
 * stay beside the ledger in corestore.manager.ts).
 */

/** An administrator deletes a platform binding: it must exist and still have the generation the caller read. */
export const decidePlatformBindingDeletion = <TBinding extends IPlatformBinding>(
  currentArg: TBinding | null,
  platformBindingIdArg: string,
  expectedGenerationArg: number,
): TDecision<TBinding> => {
  if (!currentArg) {
    return { kind: 'refuse', refusal: refuseNamed('not-found', 'platform-binding-not-found', `platform binding ${platformBindingIdArg} does not exist`) };
  }
  if (currentArg.generation !== expectedGenerationArg) {
    return { kind: 'refuse', refusal: refuseNamed('conflict', 'generation-mismatch', "is not the platform binding's current generation", 'request.expectedGeneration') };
  }
  return { kind: 'remove' };
};
