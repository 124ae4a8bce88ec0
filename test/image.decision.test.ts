import { test } from 'node:test';
import assert from 'node:assert/strict';
import { imageVersionNameOf, parseServiceImageName } from '../ts/interfaces/data/imageversion.js';
import { judgeServiceImagePlan, judgeServiceRuntime, type IServiceRuntimeFacts } from '../ts/manager.service/runtimestatus.js';
import { decideImageVersionRecord, judgeRelayImageAccess } from '../ts/manager.image/decide.js';
import type { IService } from '../ts/interfaces/data/service.js';

const digest = 'a'.repeat(64);

test('a runtime image names a pushed version only with the cloudly:sha256: prefix; anything else is a registry image', () => {
  assert.deepEqual(parseServiceImageName(imageVersionNameOf(digest)), { kind: 'image-version', digest });
  for (const reference of ['nginx', 'registry.example:5000/app:1', `app@sha256:${digest}`, 'cloudly/app:1']) {
    assert.deepEqual(parseServiceImageName(reference), { kind: 'registry', reference });
  }
  // A malformed digest after the prefix is still a pushed version: one Cloudly can never hold.
  assert.deepEqual(parseServiceImageName('cloudly:sha256:XYZ'), { kind: 'image-version', digest: 'XYZ' });
});

test('the image plan: registry images are not judged, a pushed version is held or missing', () => {
  const held = (digestArg: string) => digestArg === digest;
  assert.equal(judgeServiceImagePlan({ runtime: { image: 'nginx:1' } }, held), 'registry');
  assert.equal(judgeServiceImagePlan({ runtime: { image: imageVersionNameOf(digest) } }, held), 'held');
  assert.equal(judgeServiceImagePlan({ runtime: { image: imageVersionNameOf('b'.repeat(64)) } }, held), 'missing');
});

const service: IService = {
  id: 'svc-1', name: 's', organizationId: 'org-1', clusterId: 'c-1', generation: 1, specRevision: 1,
  runtime: { image: imageVersionNameOf(digest), replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } },
  ports: [], routes: [], volumes: [], environment: {}, secrets: {}, readiness: null, networkPolicy: null, createdAt: 1, updatedAt: 1,
};
const facts = (overridesArg: Partial<IServiceRuntimeFacts>): IServiceRuntimeFacts => ({
  service, claimMarkers: [], clusterExists: true, claims: [], bindings: { bindingsPending: false, legacyAdoptionPending: false }, ...overridesArg,
});

test('image-plan-missing refuses a service whose named version is not held, after cluster-runtime-missing and before no-eligible-node', () => {
  assert.deepEqual(judgeServiceRuntime(facts({ imageVersionHeld: false })), { state: 'refused', reason: 'image-plan-missing' });
  assert.deepEqual(judgeServiceRuntime(facts({ imageVersionHeld: true })), { state: 'converging', reason: null });
  assert.deepEqual(judgeServiceRuntime(facts({})), { state: 'converging', reason: null });
  assert.deepEqual(judgeServiceRuntime(facts({ imageVersionHeld: false, clusterExists: false })), { state: 'refused', reason: 'cluster-runtime-missing' });
  const pinned = { ...service, runtime: { ...service.runtime, placement: { nodeIds: ['gone'] } } };
  assert.deepEqual(judgeServiceRuntime(facts({ service: pinned, imageVersionHeld: false, clusterNodeIds: new Set(['n-1']) })), { state: 'refused', reason: 'image-plan-missing' });
});

test('only a relay of the cluster that runs the service may move its images', () => {
  assert.equal(judgeRelayImageAccess(service, 'c-1'), null);
  assert.deepEqual((judgeRelayImageAccess(service, 'c-2') as { errorData: unknown }).errorData, { code: 'forbidden', retryable: false, reasons: ['service-not-on-relay-cluster'] });
  assert.deepEqual((judgeRelayImageAccess(null, 'c-1') as { errorData: unknown }).errorData, { code: 'not-found', retryable: false, reasons: ['service-not-found'] });
});

test('an image version is recorded once: a second record of the same version keeps the first', () => {
  const record = { id: `svc-1/${digest}`, serviceId: 'svc-1', digest, byteLength: 3, storedAt: 5, blobKey: `images/svc-1/${digest}`, pushedByClusterId: 'c-1' };
  assert.deepEqual(decideImageVersionRecord(null, record), { kind: 'create', doc: record });
  assert.deepEqual(decideImageVersionRecord({ ...record, generation: 1 }, { ...record, storedAt: 9 }), { kind: 'keep' });
});
