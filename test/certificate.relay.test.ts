import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { IServiceWritableSpec } from '../ts/interfaces/data/service.js';
import { routeAcmeChallengeKind, routeCertificateKind } from '../ts/manager.certificate/documents.js';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { connectElectedRelay } from './ingress.fixture.js';

/**
 * The route certificates' methods and controller without an ACME server that answers (the order
 * side runs against pebble in test/acme.pebble.routes.test.ts): the opt-in reaching a record by
 * itself, a directory nobody listens on named in the status, the relay's challenge read answering
 * only its own cluster's tokens, and the refusals.
 */

let t: ITestCloudly;
let alpha: { clusterId: string; relay: CloudlyRelayClient };
let beta: { clusterId: string; relay: CloudlyRelayClient };

const spec = (clusterIdArg: string, certificateArg?: unknown): IServiceWritableSpec => ({
  name: 'web',
  organizationId: 'org-1',
  clusterId: clusterIdArg,
  runtime: { image: 'registry.example/web:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } },
  ports: [{ name: 'http', port: 8080, protocol: 'tcp' }],
  routes: [{ hostname: 'web.example.com', targetPort: 'http', ...(certificateArg === undefined ? {} : { certificate: certificateArg }) }] as IServiceWritableSpec['routes'],
  volumes: [],
});

before(async () => {
  // Nobody listens on port 1: every order fails at once, with a named problem.
  t = await startTestCloudly({ acmeDirectoryUrl: 'https://127.0.0.1:1/directory', acmeRetryMs: 60_000 });
  const connect = async (nameArg: string) => {
    const { cluster, relayToken } = await t.createCluster(nameArg);
    return { clusterId: cluster.id, relay: await connectElectedRelay(t, cluster.id, relayToken) };
  };
  alpha = await connect('certs-alpha');
  beta = await connect('certs-beta');
});

after(async () => {
  alpha?.relay.close();
  beta?.relay.close();
  await t?.stop();
});

test('an opt-in reaches a certificate record without anyone reading; an ACME directory that is down is named in the status; dropping the opt-in forgets it', async () => {
  const { service } = await t.caller.call('createService', { service: spec(alpha.clusterId, 'acme') });
  await waitFor(async () => (await t.cloudly.store.get(routeCertificateKind, `${alpha.clusterId}/web.example.com`))?.state === 'failed', 'the controller ordered and stored the failure');
  const { certificates } = await t.caller.call('getRouteCertificates', { clusterId: alpha.clusterId });
  assert.equal(certificates.length, 1);
  assert.equal(certificates[0].hostname, 'web.example.com');
  assert.equal(certificates[0].serviceId, service.id);
  assert.equal(certificates[0].state, 'failed');
  assert.equal(certificates[0].notAfter, null);
  assert.equal(certificates[0].problem?.type, 'directory-unreachable');
  assert.match(certificates[0].problem!.detail, /ECONNREFUSED/);
  assert.ok(Date.parse(certificates[0].nextAttemptAt!) > Date.now(), 'the next attempt waits the pause');
  const overview = await t.caller.call('getClusterOverview', { clusterId: alpha.clusterId });
  assert.deepEqual(overview.overview.certificates, certificates);
  // Nothing is issued: the relay gets no certificate, and no recipient is needed for none.
  assert.deepEqual(await alpha.relay.fire('getClusterRouteCertificates', {}), { certificates: [] });

  const current = await t.caller.call('getServiceById', { serviceId: service.id });
  await t.caller.call('updateService', { serviceId: service.id, expectedGeneration: current.service.generation, service: spec(alpha.clusterId) });
  await waitFor(async () => (await t.caller.call('getRouteCertificates', { clusterId: alpha.clusterId })).certificates.length === 0, 'the record is forgotten');
});

test('a route\'s certificate opt-in other than "acme" is refused by path, nothing stored', async () => {
  const refusal = await refusalOf(() => t.caller.call('createService', { service: spec(beta.clusterId, 'manual') }));
  assert.deepEqual(refusal, {
    code: 'invalid-request', retryable: false, reasons: ['field-invalid'],
    causes: [{ path: 'request.service.routes[0].certificate', reason: 'field-invalid', message: 'must be "acme" when present' }],
  });
  assert.deepEqual((await t.caller.call('getServices', { clusterId: beta.clusterId })).services, []);
});

test('the relay reads a challenge of its own cluster only; an unknown token and another cluster\'s are not-found alike', async () => {
  const token = 'tok_0123456789abcdefABCDEF';
  // What the controller stores while an order waits for validation.
  await t.cloudly.store.insert(routeAcmeChallengeKind, {
    id: token, clusterId: beta.clusterId, hostname: 'web.example.com', keyAuthorization: `${token}.thumbprint`, expiresAt: Date.now() + 60_000,
  });
  assert.deepEqual(await beta.relay.fire('getClusterAcmeChallenge', { token }), { keyAuthorization: `${token}.thumbprint` });
  for (const [relay, asked] of [[alpha.relay, token], [beta.relay, 'tok_unknown_0123456789']] as const) {
    const refusal = await refusalOf(() => relay.fire('getClusterAcmeChallenge', { token: asked }));
    assert.equal(refusal.code, 'not-found');
    assert.deepEqual(refusal.reasons, ['acme-challenge-not-found']);
  }
  const malformed = await refusalOf(() => beta.relay.fire('getClusterAcmeChallenge', { token: '../etc/passwd' }));
  assert.equal(malformed.code, 'invalid-request');

  // One an order left behind when its process died: past its expiry it is not served. The
  // controller's next run over the cluster removes every challenge of no order this process is
  // running, expired or not (test/acme.pebble.routes.crash.test.ts kills a real order).
  const stale = 'tok_stale_0123456789abcdef';
  await t.cloudly.store.insert(routeAcmeChallengeKind, {
    id: stale, clusterId: beta.clusterId, hostname: 'web.example.com', keyAuthorization: `${stale}.thumbprint`, expiresAt: Date.now() - 1,
  });
  assert.deepEqual((await refusalOf(() => beta.relay.fire('getClusterAcmeChallenge', { token: stale }))).reasons, ['acme-challenge-not-found']);
  t.cloudly.reconciler.enqueue('route-certificates', beta.clusterId, { kind: 'test', id: stale });
  await waitFor(async () => (await t.cloudly.store.get(routeAcmeChallengeKind, stale)) === null, 'the expired challenge is removed');
  await waitFor(async () => (await t.cloudly.store.get(routeAcmeChallengeKind, token)) === null, 'the unexpired one of no running order is removed too');
});

test('administrators: an unknown cluster is not-found; the relay methods are refused to them', async () => {
  const unknown = await refusalOf(() => t.caller.call('getRouteCertificates', { clusterId: 'cluster-none' }));
  assert.equal(unknown.code, 'not-found');
  const forbidden = await refusalOf(() => t.caller.call('getClusterRouteCertificates' as 'getRouteCertificates', {} as { clusterId: string }));
  assert.equal(forbidden.code, 'forbidden');
});
