import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  decideRouteCertificateFailed,
  decideRouteCertificateIssued,
  decideRouteCertificateWork,
  newRouteCertificate,
  toRouteCertificateStatus,
} from '../ts/manager.certificate/decide.js';
import type { IRouteCertificateDocument } from '../ts/manager.certificate/documents.js';
import { deriveClusterRoutes } from '../ts/manager.desiredstate/routes.js';
import { validateServiceWritableSpec } from '../ts/interfaces/data/service.js';

/** The route certificates' decisions (docs/tls.md, "Certificates for the fleet's routes"), as tables. */

const stored = (overridesArg: Partial<IRouteCertificateDocument> = {}): IRouteCertificateDocument => ({
  ...newRouteCertificate('c1/app.example.com', 'c1', 'app.example.com', 'svc-1'),
  generation: 1,
  ...overridesArg,
});

const issued = { certPem: 'CERT', key: { dataKeyId: 'k', nonce: 'n', ciphertext: 'c', tag: 't' } as unknown as IRouteCertificateDocument['key'], notBeforeMs: 0, notAfterMs: 90_000, fingerprint256: 'AA' };

test('a new opted-in hostname is pending, without certificate, and orders at once', () => {
  const doc = stored();
  assert.equal(doc.state, 'pending');
  assert.equal(doc.certPem, null);
  assert.deepEqual(decideRouteCertificateWork(doc, 1_000), { kind: 'order', why: 'no-certificate' });
  assert.equal(toRouteCertificateStatus(doc).state, 'pending');
  assert.equal(toRouteCertificateStatus(doc).notAfter, null);
});

test('renewal is due at two thirds of the lifetime, not before', () => {
  const doc = stored({ ...issued, state: 'valid', version: 1 });
  assert.deepEqual(decideRouteCertificateWork(doc, 59_999), { kind: 'wait', waitMs: 1 });
  assert.deepEqual(decideRouteCertificateWork(doc, 60_000), { kind: 'order', why: 'renewal-due' });
  assert.equal(toRouteCertificateStatus(doc).nextAttemptAt, new Date(60_000).toISOString());
});

test('a failure without a certificate is failed with the problem; the pause doubles; a failed renewal keeps valid', () => {
  const first = decideRouteCertificateFailed(stored(), { type: 'urn:ietf:params:acme:error:connection', detail: 'refused' }, 1_000, 100);
  assert.equal(first.kind, 'write');
  const set = (first as { change: { set: Partial<IRouteCertificateDocument> } }).change.set;
  assert.equal(set.state, 'failed');
  assert.deepEqual(set.problem, { type: 'urn:ietf:params:acme:error:connection', detail: 'refused', at: 1_000 });
  assert.equal(set.nextAttemptAt, 1_100);
  const second = decideRouteCertificateFailed(stored({ failures: 1 }), { type: 'x', detail: 'y' }, 1_000, 100);
  assert.equal((second as { change: { set: Partial<IRouteCertificateDocument> } }).change.set.nextAttemptAt, 1_200);
  assert.deepEqual(decideRouteCertificateWork(stored({ failures: 1, nextAttemptAt: 1_200 }), 1_000), { kind: 'wait', waitMs: 200 });
  const renewal = decideRouteCertificateFailed(stored({ ...issued, state: 'valid', version: 1 }), { type: 'x', detail: 'y' }, 70_000, 100);
  assert.equal((renewal as { change: { set: Partial<IRouteCertificateDocument> } }).change.set.state, 'valid');
  // Expired: failed, even though a certificate is held.
  const expired = decideRouteCertificateFailed(stored({ ...issued, state: 'valid', version: 1 }), { type: 'x', detail: 'y' }, 90_000, 100);
  assert.equal((expired as { change: { set: Partial<IRouteCertificateDocument> } }).change.set.state, 'failed');
});

test('an issuance is stored only on the version it was ordered for, and not for a route removed meanwhile', () => {
  const decision = decideRouteCertificateIssued(stored({ failures: 3, problem: { type: 'x', detail: 'y', at: 1 } }), { ...issued, version: 1 });
  assert.equal(decision.kind, 'write');
  assert.deepEqual((decision as { change: { set: Partial<IRouteCertificateDocument> } }).change.set.state, 'valid');
  assert.equal((decision as { change: { set: Partial<IRouteCertificateDocument> } }).change.set.problem, null);
  assert.deepEqual(decideRouteCertificateIssued(stored({ version: 1 }), { ...issued, version: 1 }), { kind: 'keep' });
  assert.deepEqual(decideRouteCertificateIssued(null, { ...issued, version: 1 }), { kind: 'keep' });
});

test('the opt-in is part of the route: validated, and carried into the route table', () => {
  const service = (certificateArg: unknown) => ({
    name: 'web', organizationId: 'org-1', clusterId: 'c1',
    runtime: { image: 'registry.example/web:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } },
    ports: [{ name: 'http', port: 8080, protocol: 'tcp' }],
    routes: [{ hostname: 'a.example', targetPort: 'http', certificate: certificateArg }],
    volumes: [],
  });
  assert.deepEqual(validateServiceWritableSpec(service('acme')), []);
  assert.deepEqual(validateServiceWritableSpec(service('manual')), ['service.routes[0].certificate must be "acme" when present']);
  const routes = deriveClusterRoutes([{ id: 's1', createdAt: 1, ports: [{ name: 'http', port: 8080, protocol: 'tcp' }], routes: [
    { hostname: 'a.example', targetPort: 'http', certificate: 'acme' }, { hostname: 'b.example', targetPort: 'http' },
  ] }]);
  assert.deepEqual(routes, [
    { hostname: 'a.example', serviceId: 's1', port: 8080, certificate: 'acme' },
    { hostname: 'b.example', serviceId: 's1', port: 8080 },
  ]);
});
