import type { IService, IServiceWritableSpec } from './service.js';
import type { IServiceVolume } from './servicevolume.js';

/**
 * A stored service's spec as `updateService` takes it back, every member as read: the server's
 * volume `id` and `initialization` left out, absent lists and environments as empty. Project's own
 * helper, for a caller that changes one member of a service and must not drop the others. A
 * module of its own that imports only types, so a client (the CLI) that needs it loads nothing else.
 */
export const writableSpecOfService = (serviceArg: IService): IServiceWritableSpec => ({
  name: serviceArg.name,
  organizationId: serviceArg.organizationId,
  clusterId: serviceArg.clusterId,
  runtime: serviceArg.runtime,
  ports: serviceArg.ports ?? [],
  routes: serviceArg.routes ?? [],
  volumes: serviceArg.volumes.map(({ id: _id, initialization: _initialization, ...volume }: IServiceVolume) => volume),
  environment: serviceArg.environment ?? {},
  secrets: serviceArg.secrets ?? {},
  readiness: serviceArg.readiness ?? null,
  networkPolicy: serviceArg.networkPolicy ?? null,
});
