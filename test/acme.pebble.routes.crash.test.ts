import { test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate, createPrivateKey, createPublicKey } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { CloudlyRelayClient } from '../ts/client/relay.js';
import { readSimConfig } from '../ts/sim/config.js';
import { SimFleet } from '../ts/sim/fleet.js';
import { routeAcmeChallengeKind, routeCertificateKeyContext, routeCertificateKind } from '../ts/manager.certificate/documents.js';
import type { IServiceWritableSpec } from '../ts/interfaces/data/service.js';
import { refusalOf, startTestCloudly, testAdminPassword, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { cloudlyProcessEnv, killHard, startCloudlyProcess, type ICloudlyProcess } from './helpers/process.js';
import { pebbleAvailable, startPebble, type IPebble } from './helpers/pebble.js';

/**
 * kill -9 of the Cloudly process that is ordering a route certificate (docs/tls.md, "Certificates
 * for the fleet's routes"), against `pebble`: the process is killed while pebble validates the
 * HTTP-01 challenge (the order created, its challenge stored and served to the relay, no key made
 * yet). The restart on the same data directory finds no certificate half-stored and no private key
 * in clear, removes the challenge left behind, orders again and reaches `valid` with a key the
 * cluster's relay opens.
 */

const available = pebbleAvailable();
if (!available) {
  process.stderr.write('warning: pebble is not installed (apt-get install pebble; .ci/run installs it): the route certificate crash test is skipped\n');
}

const hostname = 'localhost';

const spec = (clusterIdArg: string): IServiceWritableSpec => ({
  name: 'crashed-order',
  organizationId: 'org-certs',
  clusterId: clusterIdArg,
  runtime: { image: 'registry.example/web:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } },
  ports: [{ name: 'http', port: 8080, protocol: 'tcp' }],
  routes: [{ hostname, targetPort: 'http', certificate: 'acme' }],
  volumes: [],
});

/**
 * Stands where the cluster's ingress would on pebble's validation port and never answers: the
 * order waits on validation, between its stored challenge and its certificate, for as long as
 * the test needs it to.
 */
const startValidationHold = async (portArg: number) => {
  const tokens: string[] = [];
  const server = http.createServer((requestArg) => {
    const match = /^\/\.well-known\/acme-challenge\/([A-Za-z0-9_-]+)$/.exec(requestArg.url ?? '');
    if (match) {
      tokens.push(match[1]);
    }
  });
  await new Promise<void>((resolve) => server.listen(portArg, '127.0.0.1', () => resolve()));
  return {
    tokens,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
};

/** Every file under a directory with its bytes. */
const filesUnder = async (dirArg: string): Promise<Array<{ file: string; bytes: Buffer }>> => {
  const entries = await fsp.readdir(dirArg, { withFileTypes: true, recursive: true });
  const files = entries.filter((entry) => entry.isFile()).map((entry) => path.join(entry.parentPath, entry.name));
  return Promise.all(files.map(async (file) => ({ file, bytes: await fsp.readFile(file) })));
};

const assertNotInDataDir = async (dirArg: string, markersArg: Buffer[], whenArg: string): Promise<void> => {
  for (const { file, bytes } of await filesUnder(dirArg)) {
    for (const marker of markersArg) {
      assert.equal(bytes.includes(marker), false, `${whenArg}: ${JSON.stringify(marker.toString().slice(0, 20))} found in ${path.relative(dirArg, file)}`);
    }
  }
};

/** No record holds a certificate without its key or a key without its certificate. */
const assertWholePairs = async (tArg: ITestCloudly, clusterIdArg: string): Promise<void> => {
  for (const doc of await tArg.cloudly.store.find(routeCertificateKind, { clusterId: clusterIdArg })) {
    assert.equal(doc.certPem === null, doc.key === null, `a half-stored certificate: ${JSON.stringify({ ...doc, key: doc.key ? 'sealed' : null })}`);
    assert.equal(doc.certPem === null, doc.fingerprint256 === null, 'the fingerprint is of the stored certificate');
  }
};

test('kill -9 of the process ordering a route certificate, while pebble validates: no half-stored certificate, no key in clear, the left-over challenge removed; the restart issues a certificate whose sealed key the relay opens', { skip: !available && 'pebble is not installed' }, async () => {
  const pebble: IPebble = await startPebble({ authorizationReuse: 0 });
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-certkill-'));
  let hold: Awaited<ReturnType<typeof startValidationHold>> | null = await startValidationHold(pebble.httpPort);
  let server: ICloudlyProcess | null = null;
  let relay: CloudlyRelayClient | null = null;
  let admin: CloudlyAdminClient | null = null;
  let t: ITestCloudly | null = null;
  let sim: SimFleet | null = null;
  try {
    server = await startCloudlyProcess(cloudlyProcessEnv(dataDir, {
      CLOUDLY_ADMIN_PASSWORD: testAdminPassword,
      CLOUDLY_ACME_DIRECTORY_URL: pebble.directoryUrl,
      CLOUDLY_ACME_CA_FILE: pebble.listenerCaFile,
      CLOUDLY_ACME_RETRY_MS: '300',
    }));
    admin = new CloudlyAdminClient(server.baseUrl);
    await admin.login('admin', testAdminPassword);
    const { cluster, relayToken } = await admin.call('createCluster', { name: 'certs-crash' });
    relay = await CloudlyRelayClient.connect(server.baseUrl, relayToken, { reconnect: false });
    // An unelected relay's read is refused `unavailable`; an elected one's of an unknown token `not-found`.
    await waitFor(async () => (await refusalOf(() => relay!.fire('getClusterAcmeChallenge', { token: 'tok_probe_0123456789abcdef' }))).code === 'not-found',
      'the relay is elected');

    await admin.call('createService', { service: spec(cluster.id) });
    await waitFor(() => hold!.tokens.length > 0, 'pebble asks the cluster\'s ingress for the challenge', 60_000).catch((error: Error) => {
      throw new Error(`${error.message}\n${server!.output()}`);
    });
    const [token] = hold.tokens;
    // The order is mid-way: its challenge is stored and served to the relay, pebble is validating.
    const served = await relay.fire('getClusterAcmeChallenge', { token });
    assert.ok(served.keyAuthorization.startsWith(`${token}.`), 'the challenge of the order in flight is stored and served');
    await killHard(server.child);
    relay.close();
    admin.close();
    await hold.close();
    hold = null;

    // The data directory as kill -9 left it: no private key in clear (the certificate's key is
    // made only after validation, the account key is sealed).
    await assertNotInDataDir(dataDir, [Buffer.from('PRIVATE KEY')], 'after kill -9');

    // The restart on the same data directory, with the relay that answers HTTP-01 on pebble's port.
    t = await startTestCloudly({ dataDir, acmeDirectoryUrl: pebble.directoryUrl, acmeCaFile: pebble.listenerCaFile, acmeRetryMs: 300 });
    const restarted = t;
    await assertWholePairs(restarted, cluster.id);
    await waitFor(async () => {
      await assertWholePairs(restarted, cluster.id);
      return (await restarted.cloudly.store.get(routeAcmeChallengeKind, token)) === null;
    }, 'the challenge the killed order left behind is removed');

    const { config } = readSimConfig([
      '--url', restarted.baseUrl, '--relay-token', relayToken, '--nodes', '1', '--acme-http-port', String(pebble.httpPort),
      '--reconnect-base-ms', '100', '--reconnect-cap-ms', '1000',
    ], {});
    const simLines: string[] = [];
    sim = new SimFleet(config, (fieldsArg, messageArg) => { simLines.push(`${messageArg} ${JSON.stringify(fieldsArg)}`); });
    await sim.start();
    const simCluster = sim.clusters[0];

    const id = `${cluster.id}/${hostname}`;
    await waitFor(async () => {
      await assertWholePairs(restarted, cluster.id);
      return (await restarted.cloudly.store.get(routeCertificateKind, id))?.state === 'valid';
    }, 'the certificate is issued after the restart', 90_000).catch(async (error: Error) => {
      throw new Error(`${error.message}: ${JSON.stringify((await restarted.caller.call('getRouteCertificates', { clusterId: cluster.id })).certificates)}\n${simLines.join('\n')}`);
    });
    const issued = (await restarted.cloudly.store.get(routeCertificateKind, id))!;
    // The relay opened the key sealed to its recipient and checked it against the certificate.
    await waitFor(() => simCluster.routeCertificates.get(hostname)?.fingerprint256 === issued.fingerprint256, 'the relay opened the issued certificate\'s sealed key', 60_000);
    const keyPem = restarted.cloudly.secrets.decryptText(issued.key!, routeCertificateKeyContext(issued.id, issued.version));
    const leaf = new X509Certificate(issued.certPem!);
    assert.equal(createPublicKey(createPrivateKey(keyPem)).export({ format: 'pem', type: 'spki' }), leaf.publicKey.export({ format: 'pem', type: 'spki' }), 'the stored key is the certificate\'s');

    // The new order's challenge is removed when it ends; nothing of either order is left.
    await waitFor(async () => (await restarted.cloudly.store.find(routeAcmeChallengeKind, { clusterId: cluster.id })).length === 0, 'no challenge is left');
    await waitFor(() => restarted.cloudly.reconciler.busyKeys === 0, 'the controllers are idle');
    const keyBody = keyPem.split('\n').filter((line) => line !== '' && !line.startsWith('-----')).join('');
    await assertNotInDataDir(dataDir, [Buffer.from('PRIVATE KEY'), Buffer.from(keyBody.slice(0, 40)), Buffer.from(keyBody, 'base64')], 'after the restart\'s issuance');
    assert.equal(sim.counters.errors, 0, simLines.join('\n'));
  } finally {
    await sim?.stop();
    relay?.close();
    admin?.close();
    if (server && server.child.exitCode === null && server.child.signalCode === null) {
      await killHard(server.child);
    }
    await hold?.close();
    await t?.stop();
    await pebble.stop();
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
});
