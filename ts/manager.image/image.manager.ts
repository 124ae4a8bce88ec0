import type { Cloudly } from '../classes.cloudly.js';
import { registerOperations } from '../core/operations.js';
import { imageOperations } from './operations.js';
import { ImageTransfers } from './transfers.js';
import { imageVersionId, imageVersionKind } from './documents.js';

/**
 * Image versions pushed to Cloudly (docs/api/images.md): a relay pushes a service's image as one tar
 * stream with its digest on its own socket, Cloudly stores it in the blob store (the backups' store)
 * and answers the stream's receipt once it is durable; administrators list a service's versions; the
 * relay of the cluster that runs the service pulls them back. The runtime verdict refuses
 * `image-plan-missing` for a service naming a version Cloudly does not hold (ts/manager.service).
 */

export { imageRefusalReasons } from './decide.js';
export { imageVersionKind, type IImageVersionDocument } from './documents.js';

export class ImageManager {
  private readonly transfers: ImageTransfers;

  constructor(private readonly cloudly: Cloudly) {
    this.transfers = new ImageTransfers({
      blobStore: cloudly.backupManager.blobStore,
      store: cloudly.store,
      logger: cloudly.logger,
      flushSnapshot: () => cloudly.database.flushSnapshot(),
    });
    registerOperations(cloudly, imageOperations({
      store: cloudly.store,
      transfers: this.transfers,
      getService: (serviceIdArg) => cloudly.serviceManager.getService(serviceIdArg),
    }));
  }

  public async start(): Promise<void> {}

  public async stop(): Promise<void> {
    await this.transfers.stop();
  }

  /** The image versions Cloudly holds for these services, as `<serviceId>/<digest>` ids: a fact of the runtime verdict. */
  public async heldImageVersionsOf(serviceIdsArg: string[]): Promise<Set<string>> {
    if (serviceIdsArg.length === 0) {
      return new Set();
    }
    const docs = await this.cloudly.store.find(imageVersionKind, { serviceId: { $in: serviceIdsArg } });
    return new Set(docs.map((doc) => imageVersionId(doc.serviceId, doc.digest)));
  }
}
