import { performance } from 'node:perf_hooks';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { contractSchema } from '../../ts/interfaces/schema/contract.generated.js';
import {
  runtimeNetworkWorkloadIngressContract,
  sealRuntimeNetworkProjection,
  validateRuntimeNetworkProjection,
  type IRuntimeNetworkProjection,
} from '../../ts/interfaces/data/runtimenetwork.js';

/**
 * The largest value the contract schema checks: a runtime network projection at the contract's
 * grant limit (1,024 workload ingress grants from one ingress lease to as many targets), as
 * `getClusterNodeRuntimeNetworkProjection` answers it. Validated by Ajv against the generated
 * schema, and by the contracts module's hand validator as the baseline in the same run.
 */
const lease = (idArg: string) => ({ id: idArg, generation: 1 });

export const maximalProjection = (grantsArg: number): IRuntimeNetworkProjection => {
  const targets = Array.from({ length: grantsArg }, (_, indexArg) => `target-${String(indexArg).padStart(5, '0')}`);
  return sealRuntimeNetworkProjection({
    id: 'cluster-1.node-a',
    generation: 1,
    previous: null,
    controller: { kind: 'cloudly' },
    nodeId: 'node-a',
    endpoints: [
      { lease: lease('ingress'), nodeId: 'node-a', address: '10.63.255.254' },
      ...targets.map((idArg, indexArg) => ({ lease: lease(idArg), nodeId: 'node-b', address: `10.64.${Math.floor(indexArg / 250)}.${(indexArg % 250) + 1}` })),
    ],
    grants: [],
    workloadIngress: {
      grants: targets.map((idArg) => ({
        source: lease('ingress'), destination: lease(idArg), protocol: 'tcp' as const, port: 8080,
        authorization: { kind: 'cluster-ingress-route' as const, routeId: 'route-1' },
      })),
    },
  });
};

const median = (valuesArg: number[]): number => [...valuesArg].sort((a, b) => a - b)[Math.floor(valuesArg.length / 2)];

/** Figures, one a line: compile once, then the median of `runsArg` validations of each validator. */
export const measureSchemaValidation = (runsArg: number, grantsArg: number = runtimeNetworkWorkloadIngressContract.maximumGrants): string[] => {
  const answer = { projection: maximalProjection(grantsArg), signature: 'x'.repeat(86) };
  const compileStarted = performance.now();
  const ajv = new Ajv2020({ allErrors: true, strict: true });
  ajv.addSchema({ $schema: contractSchema.$schema, $id: contractSchema.$id, $defs: contractSchema.$defs });
  const validate = ajv.getSchema(`${contractSchema.$id}#/$defs/getClusterNodeRuntimeNetworkProjection.answer`)!;
  const compileMs = performance.now() - compileStarted;
  // The figure is worth something only if the schema reaches the last grant: one broken grant must fail it.
  const broken = structuredClone(answer) as { projection: { workloadIngress: { grants: Array<{ port: unknown }> } } };
  broken.projection.workloadIngress.grants[grantsArg - 1].port = 'eighty';
  if (validate(broken)) throw new Error('the schema did not reach the last grant');
  const schemaMs: number[] = [];
  const handMs: number[] = [];
  for (let run = 0; run < runsArg; run++) {
    let started = performance.now();
    if (!validate(answer)) throw new Error(`the maximal projection fails the schema: ${JSON.stringify(validate.errors)}`);
    schemaMs.push(performance.now() - started);
    started = performance.now();
    if (validateRuntimeNetworkProjection(answer.projection).length > 0) throw new Error('the maximal projection fails the hand validator');
    handMs.push(performance.now() - started);
  }
  const schema = median(schemaMs);
  const hand = median(handMs);
  return [
    `schema validation, projection with ${grantsArg} grants (${JSON.stringify(answer).length} bytes of JSON), median of ${runsArg}:`,
    `  Ajv against GET /schema's getClusterNodeRuntimeNetworkProjection.answer: ${schema.toFixed(3)} ms (aim: under 10 ms)`,
    `  hand validator validateRuntimeNetworkProjection (baseline, digest included): ${hand.toFixed(3)} ms; ratio schema/hand ${(schema / hand).toFixed(3)}`,
    `  compiling the validator once (whole document reachable from it): ${compileMs.toFixed(0)} ms`,
  ];
};
