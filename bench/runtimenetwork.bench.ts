/**
 * How long validating and digesting a runtime network projection takes, and how that grows with
 * the number of workload ingress grants (64 → 1,024), plus one maximal projection (1,024 grants,
 * 4,096 carried withdrawals, 64 host platform endpoints). Prints figures; asserts nothing.
 *
 *   node --import tsx bench/runtimenetwork.bench.ts
 */
import { performance } from 'node:perf_hooks';
import {
  computeRuntimeNetworkProjectionDigest,
  getRuntimeNetworkProjectionWorkloadIngressPacketGrants,
  sealRuntimeNetworkProjection,
  validateRuntimeNetworkProjection,
  type IRuntimeNetworkProjection,
  type IRuntimeNetworkWorkloadIngressWithdrawal,
} from '../ts/interfaces/data/index.js';

const pad = (valueArg: number): string => String(valueArg).padStart(5, '0');

const buildProjection = (grantCountArg: number, withdrawalCountArg: number, hostIdCountArg: number): IRuntimeNetworkProjection => {
  const targets = Array.from({ length: grantCountArg }, (_, index) => `target-${pad(index)}`);
  const withdrawals: IRuntimeNetworkWorkloadIngressWithdrawal[] = Array.from({ length: withdrawalCountArg }, (_, index) => ({
    source: { id: 'ingress', generation: 1 },
    destination: { id: `gone-${pad(index)}`, generation: 1 },
    protocol: 'tcp',
    port: 8080,
    generation: 2,
  }));
  return sealRuntimeNetworkProjection({
    id: 'cluster-1.node-a',
    generation: 2,
    previous: { generation: 1, digest: '0'.repeat(64) },
    controller: { kind: 'cloudly' },
    nodeId: 'node-a',
    endpoints: [
      { lease: { id: 'ingress', generation: 1 }, nodeId: 'node-a', address: '10.63.255.254' },
      ...targets.map((id, index) => ({
        lease: { id, generation: 1 },
        nodeId: index % 2 === 0 ? 'node-a' : 'node-b',
        address: `10.64.${Math.floor(index / 250)}.${(index % 250) + 1}`,
      })),
    ],
    grants: [],
    workloadIngress: {
      grants: targets.map((id) => ({
        source: { id: 'ingress', generation: 1 },
        destination: { id, generation: 1 },
        protocol: 'tcp' as const,
        port: 8080,
        authorization: { kind: 'cluster-ingress-route' as const, routeId: `route-${id}` },
      })),
      ...(withdrawals.length > 0 ? { withdrawals } : {}),
    },
    ...(hostIdCountArg > 0
      ? { hostPlatformEndpointIds: Array.from({ length: hostIdCountArg }, (_, index) => `endpoint-${pad(index)}`) }
      : {}),
  });
};

/** Median milliseconds of `runsArg` calls after a warm-up. */
const measure = (fnArg: () => unknown, runsArg: number): number => {
  for (let index = 0; index < Math.min(5, runsArg); index++) {
    fnArg();
  }
  const samples: number[] = [];
  for (let index = 0; index < runsArg; index++) {
    const started = performance.now();
    fnArg();
    samples.push(performance.now() - started);
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)];
};

const format = (msArg: number): string => `${msArg.toFixed(3)} ms`.padStart(11);

console.log('runtime network projection: validate (incl. digest check) and digest, median of 30 runs');
console.log('grants  endpoints   validate     digest   packet-grants  validate×  digest×');
const baseline: { validate: number; digest: number } = { validate: 0, digest: 0 };
for (const grants of [64, 128, 256, 512, 1_024]) {
  const projection = buildProjection(grants, 0, 0);
  if (validateRuntimeNetworkProjection(projection).length > 0) {
    throw new Error(`bench projection with ${grants} grants is invalid`);
  }
  const validate = measure(() => validateRuntimeNetworkProjection(projection), 30);
  const digest = measure(() => computeRuntimeNetworkProjectionDigest(projection), 30);
  const packets = measure(() => getRuntimeNetworkProjectionWorkloadIngressPacketGrants(projection), 30);
  if (grants === 64) {
    baseline.validate = validate;
    baseline.digest = digest;
  }
  console.log(`${String(grants).padStart(6)} ${String(projection.endpoints.length).padStart(10)} ${format(validate)} ${format(digest)} `
    + `${format(packets)}     ${(validate / baseline.validate).toFixed(1).padStart(5)}    ${(digest / baseline.digest).toFixed(1).padStart(5)}`);
}

const maximal = buildProjection(1_024, 4_096, 64);
const maximalReasons = validateRuntimeNetworkProjection(maximal);
if (maximalReasons.length > 0) {
  throw new Error(`maximal bench projection is invalid: ${maximalReasons[0]}`);
}
const bytes = Buffer.byteLength(JSON.stringify(maximal));
console.log(`maximal projection (1,024 grants, 4,096 withdrawals, 64 host endpoint ids, ${(bytes / 1024).toFixed(0)} KiB JSON):`);
console.log(`  validate ${format(measure(() => validateRuntimeNetworkProjection(maximal), 20))}`
  + `  digest ${format(measure(() => computeRuntimeNetworkProjectionDigest(maximal), 20))}`
  + `  packet grants ${format(measure(() => getRuntimeNetworkProjectionWorkloadIngressPacketGrants(maximal), 20))}`);
