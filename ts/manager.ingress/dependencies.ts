import type { Cloudly } from '../classes.cloudly.js';
import type { IService } from '../interfaces/data/service.js';

/**
 * What the ingress manager needs from the cluster and service managers, kept narrow so the judge
 * and the designation depend on facts, not on another manager's internals.
 */
export interface IIngressDependencies {
  /** Whether the cluster exists. */
  clusterExists(clusterIdArg: string): Promise<boolean>;
  /** The service, or null. */
  getService(serviceIdArg: string): Promise<IService | null>;
  /** The exact origin of the cluster's accepted relay registration, or null when it has none. */
  getRelayOrigin(clusterIdArg: string): Promise<string | null>;
  /** The id of the relay session Cloudly elected for the cluster, or null when none is elected. */
  getElectedRelaySessionId(clusterIdArg: string): Promise<string | null>;
}

interface IServiceLookup {
  getService(serviceIdArg: string): Promise<IService | null>;
}

interface IRelayRegistrationLookup {
  getRelayRegistration(clusterIdArg: string): Promise<{ origin: string } | null>;
}

const hasMethod = <T>(valueArg: unknown, nameArg: string): valueArg is T =>
  typeof valueArg === 'object' && valueArg !== null
  && typeof (valueArg as Record<string, unknown>)[nameArg] === 'function';

/**
 * The dependencies as Cloudly provides them. The relay election is the relay registry's selector
 * (the cluster manager installs its election there), so the active session is the elected one.
 */
export const cloudlyIngressDependencies = (cloudlyArg: Cloudly): IIngressDependencies => ({
  async clusterExists(clusterIdArg) {
    return (await cloudlyArg.clusterManager.getCluster(clusterIdArg)) !== null;
  },
  async getService(serviceIdArg) {
    const services: unknown = (cloudlyArg as unknown as Record<string, unknown>).serviceManager;
    return hasMethod<IServiceLookup>(services, 'getService') ? services.getService(serviceIdArg) : null;
  },
  async getRelayOrigin(clusterIdArg) {
    const clusters: unknown = cloudlyArg.clusterManager;
    if (!hasMethod<IRelayRegistrationLookup>(clusters, 'getRelayRegistration')) {
      return null;
    }
    return (await clusters.getRelayRegistration(clusterIdArg))?.origin ?? null;
  },
  async getElectedRelaySessionId(clusterIdArg) {
    return cloudlyArg.relays.activeSession(clusterIdArg)?.id ?? null;
  },
});
