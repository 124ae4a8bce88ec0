import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { readSimConfig } from '../ts/sim/config.js';
import { SimFleet } from '../ts/sim/fleet.js';
import { routeCertificateKind, routeCertificateKeyContext } from '../ts/manager.certificate/documents.js';
import type { IServiceWritableSpec } from '../ts/interfaces/data/service.js';
import type { IRouteCertificateStatus } from '../ts/interfaces/data/routecertificate.js';
import { startTestCloudly, testAdminPassword, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { createCli, type ICli } from './cli.fixture.js';
import { pebbleAvailable, startPebble, type IPebble } from './helpers/pebble.js';

/**
 * Certificates for the fleet's routes against Let's Encrypt's test server `pebble` (docs/tls.md,
 * "Certificates for the fleet's routes"): a route opted in with `certificate: 'acme'` gets a
 * certificate ordered by HTTP-01, the challenge answered by the simulated relay on pebble's
 * validation port with the key authorization it reads over its relay socket; the certificate and
 * its key reach the simulated relay, the key sealed to its enrolled recipient, which opens it and
 * checks it against the certificate. A short lifetime forces a renewal; removing the route
 * forgets the certificate; a relay that does not answer the challenge leaves `failed` with
 * pebble's own problem.
 */

const available = pebbleAvailable();
if (!available) {
  process.stderr.write('warning: pebble is not installed (apt-get install pebble; .ci/run installs it): the route certificate tests are skipped\n');
}

/** pebble validates HTTP-01 against this name on this machine. */
const hostname = 'localhost';

const spec = (clusterIdArg: string, nameArg: string, optedInArg: boolean): IServiceWritableSpec => ({
  name: nameArg,
  organizationId: 'org-certs',
  clusterId: clusterIdArg,
  runtime: { image: 'registry.example/web:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } },
  ports: [{ name: 'http', port: 8080, protocol: 'tcp' }],
  routes: [{ hostname, targetPort: 'http', ...(optedInArg ? { certificate: 'acme' as const } : {}) }],
  volumes: [],
});

const simLog = () => {
  const lines: string[] = [];
  return { lines, log: (fieldsArg: Record<string, unknown>, messageArg: string) => { lines.push(`${messageArg} ${JSON.stringify(fieldsArg)}`); } };
};

/** One simulated relay for `relayTokenArg`, answering HTTP-01 on `acmeHttpPortArg` (0: not at all). */
const startSim = async (tArg: ITestCloudly, relayTokenArg: string, acmeHttpPortArg: number) => {
  const { lines, log } = simLog();
  const { config } = readSimConfig([
    '--url', tArg.baseUrl, '--relay-token', relayTokenArg, '--nodes', '1', '--acme-http-port', String(acmeHttpPortArg),
    '--reconnect-base-ms', '100', '--reconnect-cap-ms', '1000',
  ], {});
  const fleet = new SimFleet(config, log);
  await fleet.start();
  return { fleet, lines };
};

const certificatesOf = async (tArg: ITestCloudly, clusterIdArg: string): Promise<IRouteCertificateStatus[]> =>
  (await tArg.admin.call('getRouteCertificates', { clusterId: clusterIdArg })).certificates;

/** Every file under a directory, recursively. */
const filesUnder = async (dirArg: string): Promise<string[]> => {
  const entries = await fsp.readdir(dirArg, { withFileTypes: true, recursive: true });
  return entries.filter((entry) => entry.isFile()).map((entry) => path.join(entry.parentPath, entry.name));
};

describe('certificates for the fleet\'s routes, against pebble', { skip: !available && 'pebble is not installed' }, () => {
  let pebble: IPebble;
  let t: ITestCloudly;
  let cli: ICli;
  before(async () => {
    // 15 s certificates: renewal is due 10 s after issuance. No authorization is reused, so every
    // order is validated against the relay for real.
    pebble = await startPebble({ validitySeconds: 15, authorizationReuse: 0 });
    t = await startTestCloudly({ acmeDirectoryUrl: pebble.directoryUrl, acmeCaFile: pebble.listenerCaFile, acmeRetryMs: 300 });
    cli = await createCli();
    const login = await cli.run(['login', '--url', t.baseUrl, '--username', 'admin'], `${testAdminPassword}\n`);
    assert.equal(login.code, 0, login.stderr);
  });
  after(async () => {
    await cli?.dispose();
    await t?.stop();
    await pebble?.stop();
  });

  test('an opted-in route: pending, the relay answers the challenge, valid; the sealed key is opened by the relay and matches; renewed before expiry; forgotten when the route is removed; never in clear', async () => {
    const { cluster, relayToken } = await t.createCluster('certs-loop');
    const sim = await startSim(t, relayToken, pebble.httpPort);
    const simCluster = sim.fleet.clusters[0];
    try {
      await waitFor(async () => (await t.admin.call('getSecretRecipients', { clusterId: cluster.id })).current !== null, 'the simulated relay enrolled its recipient');
      // A route without the opt-in gets no certificate.
      const { service: plain } = await t.admin.call('createService', { service: spec(cluster.id, 'plain', false) });
      await waitFor(() => t.cloudly.reconciler.busyKeys === 0, 'the controllers are idle');
      assert.deepEqual(await certificatesOf(t, cluster.id), []);

      const { service } = await t.admin.call('updateService', { serviceId: plain.id, expectedGeneration: plain.generation, service: spec(cluster.id, 'plain', true) });
      await waitFor(async () => (await certificatesOf(t, cluster.id)).length === 1, 'a record for the opted-in hostname');
      const [first] = await certificatesOf(t, cluster.id);
      assert.equal(first.hostname, hostname);
      assert.equal(first.serviceId, service.id);
      assert.ok(first.state === 'pending' || first.state === 'valid', `a new record is pending until issued: ${first.state}`);

      await waitFor(async () => (await certificatesOf(t, cluster.id))[0]?.state === 'valid', 'the certificate is issued', 60_000).catch(async (error: Error) => {
        throw new Error(`${error.message}: ${JSON.stringify(await certificatesOf(t, cluster.id))}\n${sim.lines.join('\n')}`);
      });
      const [valid] = await certificatesOf(t, cluster.id);
      assert.ok(valid.notAfter !== null && Date.parse(valid.notAfter) > Date.now(), `valid until ${valid.notAfter}`);
      assert.equal(valid.problem, null);
      assert.ok(sim.fleet.counters.acmeChallengesAnswered >= 1, 'the relay answered the challenge with the key authorization it read from Cloudly');
      // The status as the overview and the CLI show it.
      const overview = await t.admin.call('getClusterOverview', { clusterId: cluster.id });
      assert.equal(overview.overview.certificates[0]?.hostname, hostname);
      const shown = await cli.run(['clusters', 'certificates', '--cluster', cluster.id]);
      assert.equal(shown.code, 0, shown.stderr);
      assert.match(shown.stdout, /^HOSTNAME\s+SERVICE\s+CERTIFICATE\s+PROBLEM\s+NEXT/m);
      assert.match(shown.stdout, /^localhost\s+\S+\s+valid until \d{4}-/m);

      // The relay opened the sealed key (bound to its cluster, the hostname and the issuance) and checked it against the certificate.
      await waitFor(() => simCluster.routeCertificates.get(hostname)?.fingerprint256 === valid.fingerprint256, 'the simulated relay holds the issued certificate', 30_000);
      const stored = (await t.cloudly.store.get(routeCertificateKind, `${cluster.id}/${hostname}`))!;
      // pebble's chain: the leaf is signed by the intermediate that follows it.
      const chain = stored.certPem!.split(/(?<=-----END CERTIFICATE-----)\s*/).filter((part) => part.includes('BEGIN CERTIFICATE')).map((part) => new X509Certificate(part));
      assert.ok(chain.length >= 2 && chain[0].verify(chain[1].publicKey), 'a chain issued by pebble');
      assert.ok(chain[0].checkHost(hostname), 'for the route\'s hostname');

      // Renewal: due at two thirds of the 15 s lifetime, a new issuance reaches the relay.
      const firstVersion = simCluster.routeCertificates.get(hostname)!.version;
      await waitFor(() => (simCluster.routeCertificates.get(hostname)?.version ?? 0) > firstVersion, 'a renewed certificate reaches the relay', 60_000);
      const renewed = (await t.cloudly.store.get(routeCertificateKind, `${cluster.id}/${hostname}`))!;
      assert.notEqual(renewed.fingerprint256, stored.fingerprint256);

      // The private key is never in clear: not in the stored document, the data directory, the log, answers or audit events.
      const keyPem = t.cloudly.secrets.decryptText(renewed.key!, routeCertificateKeyContext(renewed.id, renewed.version));
      const keyBody = keyPem.split('\n').filter((line) => line !== '' && !line.startsWith('-----')).join('');
      const markers = [Buffer.from('PRIVATE KEY'), Buffer.from(keyBody.slice(0, 40)), Buffer.from(keyBody, 'base64')];
      const audit = await t.admin.call('getAuditEvents', { limit: 500 });
      const answers = Buffer.from(JSON.stringify([
        await certificatesOf(t, cluster.id), await t.admin.call('getClusterOverview', { clusterId: cluster.id }), audit,
      ]));
      const logText = Buffer.from(t.logs.join('\n'));
      // What GET /admin/snapshot sends.
      const chunks: Buffer[] = [];
      await t.cloudly.database.exportSnapshot(async (chunkArg) => { chunks.push(chunkArg); }, () => undefined);
      const snapshot = Buffer.concat(chunks);
      assert.ok(snapshot.includes(Buffer.from('CloudlyRouteCertificate')), 'the snapshot holds the certificates');
      await waitFor(() => t.cloudly.reconciler.busyKeys === 0, 'the controllers are idle');
      const files = await Promise.all((await filesUnder(t.dataDir)).map(async (file) => ({ file, bytes: await fsp.readFile(file) })));
      assert.ok(files.some(({ bytes }) => bytes.includes('CloudlyRouteCertificate')), 'the certificates are in the data directory (their keys encrypted)');
      for (const marker of markers) {
        assert.equal(JSON.stringify(renewed).includes(marker.toString()), false, 'the stored document holds the key sealed only');
        assert.equal(answers.includes(marker), false, 'no answer or audit event carries the key');
        assert.equal(logText.includes(marker), false, 'the log never holds the key');
        assert.equal(snapshot.includes(marker), false, 'the snapshot holds the key sealed only');
        for (const { file, bytes } of files) {
          assert.equal(bytes.includes(marker), false, `the key was found in ${path.relative(t.dataDir, file)}`);
        }
      }

      // The route is removed: the certificate is forgotten (revoked at pebble) and the relay drops it.
      const current = await t.admin.call('getServiceById', { serviceId: service.id });
      await t.admin.call('updateService', { serviceId: service.id, expectedGeneration: current.service.generation, service: { ...spec(cluster.id, 'plain', false), routes: [] } });
      await waitFor(async () => (await certificatesOf(t, cluster.id)).length === 0, 'the certificate record is gone');
      assert.equal(await t.cloudly.store.get(routeCertificateKind, `${cluster.id}/${hostname}`), null);
      await waitFor(() => !simCluster.routeCertificates.has(hostname), 'the simulated relay dropped the certificate');
      assert.ok(t.logs.some((line) => line.includes('route certificate: the route is gone') && line.includes('"revoked":true')), 'the certificate was revoked');
      assert.equal(sim.fleet.counters.errors, 0, sim.lines.join('\n'));
    } finally {
      await sim.fleet.stop();
    }
  });

  test('a relay that does not answer the challenge: failed with pebble\'s problem, tried again after a pause', async () => {
    const { cluster, relayToken } = await t.createCluster('certs-dark');
    // Nobody listens on pebble's validation port: the simulator answers no challenge.
    const sim = await startSim(t, relayToken, 0);
    try {
      await t.admin.call('createService', { service: spec(cluster.id, 'dark', true) });
      await waitFor(async () => (await certificatesOf(t, cluster.id))[0]?.state === 'failed', 'the order failed', 60_000).catch(async (error: Error) => {
        throw new Error(`${error.message}: ${JSON.stringify(await certificatesOf(t, cluster.id))}`);
      });
      const [failed] = await certificatesOf(t, cluster.id);
      assert.equal(failed.problem?.type, 'urn:ietf:params:acme:error:connection', JSON.stringify(failed.problem));
      assert.match(failed.problem!.detail, /localhost/);
      assert.equal(failed.notAfter, null);
      assert.ok(failed.nextAttemptAt !== null, 'the next attempt is scheduled');
      const shown = await cli.run(['clusters', 'certificates', '--cluster', 'certs-dark', '-o', 'json']);
      assert.equal(shown.code, 0, shown.stderr);
      assert.equal(JSON.parse(shown.stdout).certificates[0].problem.type, 'urn:ietf:params:acme:error:connection');
      const table = await cli.run(['clusters', 'overview', '--cluster', 'certs-dark']);
      assert.match(table.stdout, /^localhost\s+\S+\s+failed\s+urn:ietf:params:acme:error:connection: /m);
      // The backoff runs: later orders fail again, counted.
      await waitFor(async () => ((await t.cloudly.store.get(routeCertificateKind, `${cluster.id}/${hostname}`))?.failures ?? 0) >= 2, 'a second order after the pause', 60_000);
      assert.equal(sim.fleet.clusters[0].routeCertificates.size, 0);
    } finally {
      await sim.fleet.stop();
    }
  });
});
