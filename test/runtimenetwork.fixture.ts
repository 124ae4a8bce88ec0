import type { IRuntimeNetworkAddressPlan } from '../ts/interfaces/data/runtimenetworkaddressplan.js';

/**
 * The contract's example address plan: hub 192.0.2.1 in 192.0.2.0/28, relay and Corestore on
 * 192.0.2.17 with two ports, workloads in 192.0.2.128/25. A fresh copy each call, so a test may
 * edit it.
 */
export const upstreamExamplePlan = (): IRuntimeNetworkAddressPlan => ({
  authorityId: 'authority-1',
  revision: 1,
  prefixes: ['192.0.2.0/24', '198.51.100.0/24'],
  pools: [{ id: 'workloads', prefix: '192.0.2.128/25' }],
  vpn: { hubPrefix: '192.0.2.0/28', peerPrefix: '192.0.2.64/26' },
  hubs: [{ clusterId: 'cluster-1', address: '192.0.2.1' }],
  platformEndpoints: [
    { id: 'corestore', address: '192.0.2.17', protocol: 'tcp', port: 3000 },
    { id: 'relay', address: '192.0.2.17', protocol: 'tcp', port: 443 },
  ],
});
