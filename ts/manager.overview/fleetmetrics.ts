import * as promClient from 'prom-client';
import type { DocumentStore } from '../core/store.js';
import { clusterKind } from '../manager.cluster/documents.js';
import { clusterRelayLeaseKind } from '../manager.cluster/relayelection.js';
import { operationKind } from '../manager.operation/documents.js';
import { serviceKind, serviceRuntimeStatusKind } from '../manager.service/documents.js';

/**
 * Fleet health in `/metrics`, for alerting (docs/alerts.example.yml): services by runtime state,
 * `unknown` included; clusters by whether a relay holds their lease; operations running and
 * failed. Read from the database when scraped (a few counting queries, whatever the fleet's size),
 * so every instance answers the same figures: aggregate them with `max`, not `sum`.
 */

export const registerFleetMetrics = (registryArg: promClient.Registry, storeArg: DocumentStore): void => {
  const registers = [registryArg];
  new promClient.Gauge({
    name: 'cloudly_services',
    help: 'Services by runtime state as stored: unknown when their cluster is not current (relay gone past the grace, or reports stale), unjudged when never judged.',
    labelNames: ['state'],
    registers,
    async collect() {
      const statuses = storeArg.collection(serviceRuntimeStatusKind);
      const judgedStates = ['converged', 'converging', 'waiting', 'refused'] as const;
      // One count per bucket: a verdict carries `unknown` only while its cluster is not current.
      const [services, unknown, ...byState] = await Promise.all([
        storeArg.collection(serviceKind).countDocuments({}),
        statuses.countDocuments({ unknown: { $exists: true } }),
        ...judgedStates.map((state) => statuses.countDocuments({ state, unknown: { $exists: false } })),
      ]);
      const counts = new Map<string, number>(judgedStates.map((state, index) => [state, byState[index]]));
      counts.set('unknown', unknown);
      counts.set('unjudged', Math.max(0, services - unknown - byState.reduce((sum, count) => sum + count, 0)));
      for (const [state, count] of counts) {
        this.set({ state }, count);
      }
    },
  });
  new promClient.Gauge({
    name: 'cloudly_clusters',
    help: 'Clusters by relay: connected (a relay holds the cluster\'s unexpired lease on some instance) or disconnected.',
    labelNames: ['relay'],
    registers,
    async collect() {
      const now = Date.now();
      const [clusters, connected] = await Promise.all([
        storeArg.collection(clusterKind).countDocuments({}),
        storeArg.collection(clusterRelayLeaseKind).countDocuments({ sessionId: { $ne: null }, expiresAt: { $gt: now } }),
      ]);
      this.set({ relay: 'connected' }, connected);
      this.set({ relay: 'disconnected' }, Math.max(0, clusters - connected));
    },
  });
  new promClient.Gauge({
    name: 'cloudly_operations',
    help: 'Operations (backups, restores, adoptions) running now, and failed ones still kept (CLOUDLY_OPERATION_RETENTION_DAYS).',
    labelNames: ['state'],
    registers,
    async collect() {
      const [running, failed] = await Promise.all([
        storeArg.collection(operationKind).countDocuments({ state: 'running' }),
        storeArg.collection(operationKind).countDocuments({ state: 'failed' }),
      ]);
      this.set({ state: 'running' }, running);
      this.set({ state: 'failed' }, failed);
    },
  });
};
