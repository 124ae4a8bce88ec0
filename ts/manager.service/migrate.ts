import type { DocumentStore, TDecision } from '../core/store.js';
import type { TCloudlyLogger } from '../core/logger.js';
import type { IServicePort, IServiceRoute } from '../interfaces/data/service.js';
import { serviceKind, type IServiceDocument } from './service.manager.js';

/**
 * The start-up migration of service documents written while `ports` and `routes` sat inside the
 * runtime spec. The runtime spec is execution policy only and is stored exactly; a relay that
 * checks upstream's exact schema refuses one with a member it does not know, so those two moved
 * beside it. A moved document keeps its `specRevision`: the nodes are asked for the same thing,
 * only the shape it is written in changed, so the verdict on that revision still holds.
 */

/** The runtime members that moved out, as an old document may still hold them. */
const movedRuntimeMembers = ['ports', 'routes'] as const;

/** True when a stored runtime spec still carries a member that now sits beside it. */
export const hasOldServiceShape = (docArg: Pick<IServiceDocument, 'runtime'>): boolean =>
  movedRuntimeMembers.some((member) => Object.hasOwn(docArg.runtime, member));

/**
 * The move for one document, decided on the document as read: ports and routes leave the runtime
 * spec and take their place beside it. A document that already has them beside it keeps those
 * (written by this version, so newer than whatever is left inside). Everything else stays as it is.
 */
export const decideServiceShapeMigration = (currentArg: IServiceDocument | null): TDecision<IServiceDocument> => {
  if (!currentArg || !hasOldServiceShape(currentArg)) {
    return { kind: 'keep' };
  }
  const { ports, routes, ...runtime } = currentArg.runtime as IServiceDocument['runtime'] & {
    ports?: IServicePort[];
    routes?: IServiceRoute[];
  };
  return {
    kind: 'write',
    change: {
      set: {
        runtime,
        ports: currentArg.ports ?? ports ?? [],
        routes: currentArg.routes ?? routes ?? [],
      },
    },
  };
};

/**
 * Moves every old-shaped service document, one compare-and-swap write each (a write racing it, on
 * this instance or another one starting at the same time, is decided again on what it wrote).
 * Answers how many documents it moved.
 */
export const migrateServiceShapes = async (storeArg: DocumentStore, loggerArg: TCloudlyLogger): Promise<number> => {
  let moved = 0;
  for (const doc of await storeArg.find(serviceKind, {})) {
    if (!hasOldServiceShape(doc)) {
      continue;
    }
    const { outcome } = await storeArg.mutate(serviceKind, doc.id, decideServiceShapeMigration);
    if (outcome === 'written') {
      moved++;
    }
  }
  if (moved > 0) {
    loggerArg.info({ moved }, 'moved service ports and routes out of the runtime spec');
  }
  return moved;
};
