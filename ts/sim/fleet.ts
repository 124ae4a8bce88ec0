import * as http from 'node:http';
import type * as jose from 'jose';
import { CloudlyAdminClient } from '../client/admin.js';
import { openGet, readAnswerText } from '../client/transport.js';
import { allowPlainHttp, trustCaFile } from '../client/trust.js';
import type { IRuntimeNetworkAddressPlan } from '../interfaces/data/runtimenetworkaddressplan.js';
import type { ISimConfig } from './config.js';
import { emptyCounters, SimulatedCluster, type ISimFleetCounters, type TSimClusterState } from './cluster.js';

/**
 * The simulated fleet: N simulated clusters in one process, each with its own relay socket. It
 * can bootstrap the clusters itself (as an administrator) or run the relay tokens it is given.
 */

export type TSimLogger = (fieldsArg: Record<string, unknown>, messageArg: string) => void;

/** A text or JSON line logger on a stream (stdout in the CLI). */
export const lineLogger = (formatArg: 'text' | 'json', writeArg: (lineArg: string) => void): TSimLogger => (fieldsArg, messageArg) => {
  const time = new Date().toISOString();
  if (formatArg === 'json') {
    writeArg(`${JSON.stringify({ time, msg: messageArg, ...fieldsArg })}\n`);
    return;
  }
  const extra = Object.entries(fieldsArg)
    .filter(([key, value]) => !['cluster', 'from', 'to'].includes(key) && value !== undefined && value !== null)
    .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`)
    .join(' ');
  writeArg(`${time} ${messageArg}${extra ? ` (${extra})` : ''}\n`);
};

/** The workload plan `--address-plan` sets when Cloudly has none: workloads in 10.80.0.0/16. */
export const simAddressPlan = (): IRuntimeNetworkAddressPlan => ({
  authorityId: 'cloudly-sim',
  revision: 1,
  prefixes: ['10.64.0.0/10'],
  pools: [{ id: 'sim-workloads', prefix: '10.80.0.0/16' }],
  vpn: { hubPrefix: '10.64.0.0/24', peerPrefix: '10.65.0.0/16' },
  hubs: [],
  platformEndpoints: [
    { id: 'corestore', address: '10.64.1.1', protocol: 'tcp', port: 3000 },
    { id: 'relay', address: '10.64.1.1', protocol: 'tcp', port: 443 },
  ],
});

/** Runs `fnArg` over `itemsArg` with at most `limitArg` at once. */
const eachLimited = async <T>(itemsArg: T[], limitArg: number, fnArg: (itemArg: T, indexArg: number) => Promise<void>): Promise<void> => {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(limitArg, itemsArg.length) }, async () => {
    while (next < itemsArg.length) {
      const index = next++;
      await fnArg(itemsArg[index], index);
    }
  }));
};

/**
 * Creates (or takes over) the clusters `<prefix>-1 … <prefix>-N` and their services. A cluster
 * that already exists (a second run on the same Cloudly) has its relay token rotated, since a
 * token is shown only once; its services are kept and only missing ones are created.
 */
export const bootstrapClusters = async (configArg: ISimConfig, logArg: TSimLogger): Promise<Array<{ name: string; token: string }>> => {
  const admin = new CloudlyAdminClient(configArg.url);
  await admin.login(configArg.adminUsername, configArg.adminPassword ?? '');
  try {
    if (configArg.addressPlan) {
      const { plan } = await admin.call('getRuntimeNetworkAddressPlan', {});
      if (!plan) {
        await admin.call('setRuntimeNetworkAddressPlan', { plan: simAddressPlan() });
        logArg({ pool: simAddressPlan().pools[0].prefix }, 'bootstrap: workload address plan set');
      }
    }
    const existing = new Map<string, { id: string; generation: number }>();
    let cursor: string | undefined;
    do {
      const page = await admin.call('getClusters', cursor ? { cursor, limit: 500 } : { limit: 500 });
      for (const cluster of page.clusters) {
        existing.set(cluster.name, { id: cluster.id, generation: cluster.generation });
      }
      cursor = page.nextCursor;
    } while (cursor);
    const names = Array.from({ length: configArg.clusters }, (_unused, indexArg) => `${configArg.namePrefix}-${indexArg + 1}`);
    const tokens: Array<{ name: string; token: string }> = new Array(names.length);
    await eachLimited(names, 8, async (nameArg, indexArg) => {
      const known = existing.get(nameArg);
      let clusterId: string;
      if (known) {
        const rotated = await admin.call('rotateClusterRelayToken', { clusterId: known.id, expectedGeneration: known.generation });
        clusterId = known.id;
        tokens[indexArg] = { name: nameArg, token: rotated.relayToken };
      } else {
        const created = await admin.call('createCluster', { name: nameArg });
        clusterId = created.cluster.id;
        tokens[indexArg] = { name: nameArg, token: created.relayToken };
      }
      const present = new Set<string>();
      let serviceCursor: string | undefined;
      do {
        const page = await admin.call('getServices', serviceCursor ? { clusterId, cursor: serviceCursor } : { clusterId });
        for (const service of page.services) {
          present.add(service.name);
        }
        serviceCursor = page.nextCursor;
      } while (serviceCursor);
      for (let serviceIndex = 1; serviceIndex <= configArg.services; serviceIndex++) {
        const name = `${nameArg}-app-${serviceIndex}`;
        if (present.has(name)) {
          continue;
        }
        await admin.call('createService', {
          service: {
            name, organizationId: 'cloudly-sim', clusterId,
            runtime: { image: `registry.example/sim/app-${serviceIndex}:1`, replicas: configArg.replicas, profile: { runAs: null }, placement: { nodeIds: [] } },
            volumes: [],
          },
        });
      }
    });
    logArg({ clusters: names.length, services: configArg.services, replicas: configArg.replicas }, 'bootstrap: clusters and services ready');
    return tokens;
  } finally {
    admin.close();
  }
};

export class SimFleet {
  public readonly counters: ISimFleetCounters = emptyCounters();
  public readonly clusters: SimulatedCluster[] = [];
  private jwksCache: Promise<{ keys: jose.JWK[] }> | null = null;
  private acmeResponder: http.Server | null = null;

  constructor(public readonly config: ISimConfig, private readonly log: TSimLogger) {}

  /** Bootstraps when asked, then starts every cluster's relay (spread over `rampMs`). Resolves once each registered or gave up. */
  public async start(): Promise<void> {
    // The relays' and the administrator's connections verify against these (ts/client/trust.ts).
    if (this.config.caFile) {
      trustCaFile(this.config.caFile);
    }
    if (this.config.insecurePlainHttp) {
      allowPlainHttp(true);
    }
    if (this.config.acmeHttpPort > 0) {
      await this.answerAcmeChallenges(this.config.acmeHttpPort);
    }
    const tokens = this.config.bootstrap ? await bootstrapClusters(this.config, this.log) : this.config.tokens;
    const context = {
      config: this.config,
      counters: this.counters,
      log: this.log,
      jwks: (refreshArg = false) => this.jwks(refreshArg),
    };
    tokens.forEach((entryArg, indexArg) => {
      this.clusters.push(new SimulatedCluster(entryArg.name, entryArg.token, indexArg, context));
    });
    await Promise.all(this.clusters.map(async (clusterArg, indexArg) => {
      if (this.config.rampMs > 0) {
        await new Promise((resolve) => setTimeout(resolve, Math.floor((indexArg / this.clusters.length) * this.config.rampMs)));
      }
      await clusterArg.start();
    }));
  }

  /** Cloudly's projection signing keys, read once and again when a signature names an unknown key. */
  private jwks(refreshArg: boolean): Promise<{ keys: jose.JWK[] }> {
    if (!this.jwksCache || refreshArg) {
      this.jwksCache = openGet(`${this.config.url}/.well-known/jwks.json`).then(async (responseArg) => {
        const text = await readAnswerText(responseArg);
        if (responseArg.statusCode !== 200) {
          throw new Error(`jwks answered HTTP ${responseArg.statusCode}`);
        }
        return JSON.parse(text) as { keys: jose.JWK[] };
      });
      this.jwksCache.catch(() => { this.jwksCache = null; });
    }
    return this.jwksCache;
  }

  /** How many clusters are in each state. */
  public states(): Partial<Record<TSimClusterState, number>> {
    const counts: Partial<Record<TSimClusterState, number>> = {};
    for (const cluster of this.clusters) {
      counts[cluster.state] = (counts[cluster.state] ?? 0) + 1;
    }
    return counts;
  }

  /**
   * Serves `/.well-known/acme-challenge/<token>` on 127.0.0.1 as the clusters' ingresses would on
   * port 80: the key authorization comes from Cloudly over the relay socket
   * (`getClusterAcmeChallenge`) of whichever cluster Cloudly ordered it for.
   */
  private async answerAcmeChallenges(portArg: number): Promise<void> {
    const server = http.createServer((requestArg, responseArg) => {
      const match = /^\/\.well-known\/acme-challenge\/([A-Za-z0-9_-]{1,256})$/.exec(requestArg.url ?? '');
      if (!match || requestArg.method !== 'GET') {
        responseArg.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
        return;
      }
      void (async () => {
        for (const cluster of this.clusters) {
          const keyAuthorization = await cluster.acmeChallenge(match[1]);
          if (keyAuthorization !== null) {
            responseArg.writeHead(200, { 'content-type': 'application/octet-stream' }).end(keyAuthorization);
            return;
          }
        }
        responseArg.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      })();
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(portArg, '127.0.0.1', () => resolve());
    });
    this.acmeResponder = server;
  }

  /** Closes every relay socket with a normal close code (1000) and waits until each is closed. */
  public async stop(): Promise<void> {
    if (this.acmeResponder) {
      const responder = this.acmeResponder;
      this.acmeResponder = null;
      await new Promise<void>((resolve) => responder.close(() => resolve()));
    }
    await Promise.all(this.clusters.map((clusterArg) => clusterArg.stop()));
  }
}
