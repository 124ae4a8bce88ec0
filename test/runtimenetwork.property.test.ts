import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  admitRuntimeNetworkAddressPlanChange,
  admitRuntimeNetworkProjection,
  compareRuntimeNetworkWorkloadIngressGrants,
  getRuntimeNetworkProjectionWorkloadIngressPacketGrants,
  sealRuntimeNetworkProjection,
  validateRuntimeNetworkAddressPlan,
  validateRuntimeNetworkProjection,
  validateRuntimeNetworkProjectionApplication,
  type IRuntimeNetworkWorkloadIngressGrant,
} from '../ts/interfaces/data/index.js';

const isListOfStrings = (valueArg: unknown): boolean =>
  Array.isArray(valueArg) && valueArg.every((entry) => typeof entry === 'string');

/** Arbitrary values, including objects with accessors and null prototypes. */
const hostile = fc.oneof(
  fc.anything({ withNullPrototype: true, withBigInt: true, withDate: true, withMap: true, withSet: true, withTypedArray: true, withSparseArray: true, withBoxedValues: true }),
  fc.dictionary(fc.string(), fc.anything()).map((record) => {
    const withGetter = { ...record };
    Object.defineProperty(withGetter, 'generation', { get: () => { throw new Error('getter'); }, enumerable: true });
    return withGetter;
  }),
);

const endpointIds = ['a', 'b', 'c', 'd', 'e'];

/** Valid projections with a random subset of ingress grants between five endpoints on two nodes. */
const validProjection = fc.uniqueArray(
  fc.record({
    source: fc.constantFrom(...endpointIds),
    destination: fc.constantFrom(...endpointIds),
    protocol: fc.constantFrom('tcp' as const, 'udp' as const),
    port: fc.integer({ min: 1, max: 65_535 }),
  }),
  { selector: (entry) => `${entry.source}/${entry.destination}/${entry.protocol}/${entry.port}`, maxLength: 40 },
).map((entries) => {
  const grants: IRuntimeNetworkWorkloadIngressGrant[] = entries
    .filter((entry) => entry.source !== entry.destination && (entry.source === 'a' || entry.destination === 'a' || entry.source === 'b'))
    .map((entry) => ({
      source: { id: entry.source, generation: 1 },
      destination: { id: entry.destination, generation: 1 },
      protocol: entry.protocol,
      port: entry.port,
      authorization: { kind: 'cluster-ingress-route' as const, routeId: 'route' },
    }))
    .sort(compareRuntimeNetworkWorkloadIngressGrants);
  return sealRuntimeNetworkProjection({
    id: 'p',
    generation: 1,
    previous: null,
    controller: { kind: 'cloudly' },
    nodeId: 'node-a',
    endpoints: endpointIds.map((id, index) => ({
      lease: { id, generation: 1 },
      nodeId: id === 'a' || id === 'b' ? 'node-a' : 'node-b',
      address: `10.0.0.${index + 1}`,
    })),
    grants: [],
    workloadIngress: { grants },
  });
});

/** Replaces one member, at any depth, of a valid projection with an arbitrary value. */
const mutate = (valueArg: unknown, pathArg: number[], replacementArg: unknown): unknown => {
  if (pathArg.length === 0 || valueArg === null || typeof valueArg !== 'object') {
    return replacementArg;
  }
  const keys = Object.keys(valueArg);
  if (keys.length === 0) {
    return replacementArg;
  }
  const key = keys[pathArg[0] % keys.length];
  const copy: Record<string, unknown> = Array.isArray(valueArg) ? [...valueArg] as never : { ...valueArg };
  copy[key] = mutate((valueArg as Record<string, unknown>)[key], pathArg.slice(1), replacementArg);
  return copy;
};

describe('runtime network contracts never throw', () => {
  test('validators and judges answer plain reasons for arbitrary input', () => {
    fc.assert(fc.property(hostile, hostile, (left, right) => {
      assert.ok(isListOfStrings(validateRuntimeNetworkProjection(left)));
      assert.ok(isListOfStrings(validateRuntimeNetworkAddressPlan(left)));
      assert.ok(isListOfStrings(validateRuntimeNetworkProjectionApplication(left)));
      const packet = getRuntimeNetworkProjectionWorkloadIngressPacketGrants(left, { previous: right });
      assert.equal(packet.valid, false);
      assert.equal(admitRuntimeNetworkProjection(left, right).admitted, false);
      assert.equal(admitRuntimeNetworkAddressPlanChange(left, right).admitted, false);
    }), { numRuns: 500 });
  });

  test('a valid projection with any one member replaced is judged without throwing', () => {
    fc.assert(fc.property(validProjection, fc.array(fc.nat(), { maxLength: 6 }), hostile, (projection, path, replacement) => {
      const mutated = mutate(projection, path, replacement);
      const reasons = validateRuntimeNetworkProjection(mutated);
      assert.ok(isListOfStrings(reasons));
      const packet = getRuntimeNetworkProjectionWorkloadIngressPacketGrants(mutated);
      assert.equal(packet.valid, reasons.length === 0);
    }), { numRuns: 500 });
  });

  test('every generated valid projection is valid and answers one packet grant per grant', () => {
    fc.assert(fc.property(validProjection, (projection) => {
      assert.deepEqual(validateRuntimeNetworkProjection(projection), []);
      const packet = getRuntimeNetworkProjectionWorkloadIngressPacketGrants(projection);
      assert.equal(packet.valid && packet.grants.length, projection.workloadIngress?.grants.length);
    }), { numRuns: 200 });
  });
});
