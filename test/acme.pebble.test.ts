import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tls from 'node:tls';
import { Writable } from 'node:stream';
import { Cloudly } from '../ts/classes.cloudly.js';
import { findFreePort } from '../ts/core/database.js';
import type { ICloudlyConfig } from '../ts/config.js';
import { randomBytes } from 'node:crypto';
import * as congodb from '@push.rocks/smartmongo/dist_ts/congodb/index.js';
import { acmeAccountKind, acmeCertificateKind, acmeLeaseKind } from '../ts/manager.acme/acme.manager.js';
import { waitFor } from './helpers/cloudly.js';
import { seedSigningKey } from './helpers/signingkeys.js';
import { pebbleAvailable, startPebble, type IPebble } from './helpers/pebble.js';

/**
 * Cloudly's own certificate by ACME against Let's Encrypt's test server `pebble` (docs/tls.md,
 * "ACME"): pebble validates the HTTP-01 challenge for real against Cloudly's responder, Cloudly
 * stores the certificate with its key sealed and serves it, and a client that trusts only pebble's
 * root verifies it. A short certificate lifetime forces a renewal; an ACME server that is down
 * leaves a named problem and backs off.
 */

interface IAcmeCloudly {
  cloudly: Cloudly;
  logs: string[];
  stop(): Promise<void>;
}

/** A Cloudly with ACME on; no administrator logs in over the wire (the placeholder is not trusted by anyone). */
const startAcmeCloudly = async (configArg: Partial<ICloudlyConfig>): Promise<IAcmeCloudly> => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-acme-'));
  await seedSigningKey(dataDir);
  const logs: string[] = [];
  const cloudly = new Cloudly({
    config: { port: 0, host: '127.0.0.1', mongoDbUrl: null, dataDir, logLevel: 'info', adminPassword: 'acme-test-admin-password', acmeCheckIntervalMs: 100, ...configArg },
    logDestination: new Writable({ write(chunkArg, _encodingArg, callbackArg) { logs.push(chunkArg.toString()); callbackArg(); } }),
  });
  await cloudly.start();
  return {
    cloudly,
    logs,
    async stop() {
      await cloudly.stop();
      await fsp.rm(dataDir, { recursive: true, force: true });
    },
  };
};

/** A handshake that trusts only `caArg`, for `localhost`: whether it verifies, and the certificate's fingerprint. */
const handshake = (portArg: number, caArg: string): Promise<{ authorized: boolean; fingerprint256: string; error: string | null }> =>
  new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port: portArg, ca: caArg, servername: 'localhost', rejectUnauthorized: false }, () => {
      resolve({ authorized: socket.authorized, fingerprint256: socket.getPeerX509Certificate()!.fingerprint256, error: socket.authorizationError ? String(socket.authorizationError) : null });
      socket.end();
    });
    socket.once('error', reject);
  });

const available = pebbleAvailable();
if (!available) {
  process.stderr.write('warning: pebble is not installed (apt-get install pebble; .ci/run installs it): the ACME tests are skipped\n');
}

describe('ACME for Cloudly\'s own name, against pebble', { skip: !available && 'pebble is not installed' }, () => {
  let pebble: IPebble;
  before(async () => {
    // 12 s certificates: renewal is due 8 s after issuance.
    pebble = await startPebble({ validitySeconds: 12 });
  });
  after(async () => {
    await pebble?.stop();
  });

  test('orders a certificate for localhost by HTTP-01, serves it to a client that trusts only pebble\'s root, keeps the keys sealed, and renews at two thirds of its lifetime', async () => {
    const t = await startAcmeCloudly({
      acmeDomains: ['localhost'],
      acmeDirectoryUrl: pebble.directoryUrl,
      acmeCaFile: pebble.listenerCaFile,
      acmeHttpPort: pebble.httpPort,
      acmeEmail: 'ops@example.com',
    });
    try {
      assert.match(t.cloudly.baseUrl, /^https:/);
      const root = await pebble.root();
      // Before the order is stored a placeholder is served, which pebble's root does not vouch for.
      await waitFor(async () => (await handshake(t.cloudly.port, root)).authorized, 'a certificate pebble issued is served', 60_000);
      const first = await handshake(t.cloudly.port, root);
      const stored = (await t.cloudly.store.get(acmeCertificateKind, 'cloudly'))!;
      assert.equal(first.fingerprint256, stored.fingerprint256);
      assert.deepEqual(stored.domains, ['localhost']);
      assert.ok(stored.notAfterMs - stored.notBeforeMs <= 13_000, 'pebble issued the short lifetime asked for');

      // The keys are sealed at rest: no PEM private key in either document, nor in the log.
      const account = (await t.cloudly.store.get(acmeAccountKind, 'cloudly'))!;
      for (const doc of [stored, account]) {
        assert.equal(typeof doc.key.ciphertext, 'string');
        assert.ok(!JSON.stringify(doc).includes('PRIVATE KEY'));
      }
      assert.equal(t.cloudly.secrets.decryptText(stored.key, 'CloudlyAcmeCertificate/cloudly/key').includes('PRIVATE KEY'), true);
      assert.ok(!t.logs.some((line) => line.includes('PRIVATE KEY')));
      // Nor in the control plane's snapshot (what GET /admin/snapshot sends).
      const chunks: Buffer[] = [];
      await t.cloudly.database.exportSnapshot(async (chunkArg) => { chunks.push(chunkArg); }, () => undefined);
      const snapshot = Buffer.concat(chunks);
      assert.ok(snapshot.includes(Buffer.from('CloudlyAcmeCertificate')), 'the snapshot holds the ACME documents');
      assert.ok(!snapshot.includes(Buffer.from('PRIVATE KEY')));

      const metrics = (await t.cloudly.metrics.text()).text;
      assert.equal(/^cloudly_tls_certificate_expiry_timestamp_seconds (\d+)/m.exec(metrics)?.[1], String(Math.floor(stored.notAfterMs / 1000)));
      const listener = t.cloudly.listenerStatus();
      assert.equal(listener.acme?.state, 'valid');
      assert.equal(listener.certificate?.fingerprint256, stored.fingerprint256);

      // Renewal: due at two thirds of the 12 s lifetime, a new certificate replaces it.
      await waitFor(async () => {
        const now = await handshake(t.cloudly.port, root);
        return now.authorized && now.fingerprint256 !== first.fingerprint256;
      }, 'a renewed certificate is served', 60_000);
      const renewed = (await t.cloudly.store.get(acmeCertificateKind, 'cloudly'))!;
      assert.ok(renewed.notBeforeMs >= stored.notBeforeMs);
      assert.ok(t.cloudly.acme!.orders.ok >= 2);
      // The account was registered once and kept.
      assert.equal((await t.cloudly.store.get(acmeAccountKind, 'cloudly'))!.generation <= 2, true);
    } finally {
      await t.stop();
    }
  });

  test('an ACME server that is down: a named problem, a growing pause between orders, and the certificate served stays', async () => {
    const closedPort = await findFreePort();
    const t = await startAcmeCloudly({
      acmeDomains: ['localhost'],
      acmeDirectoryUrl: `https://127.0.0.1:${closedPort}/dir`,
      acmeCaFile: pebble.listenerCaFile,
      acmeHttpPort: 0,
      acmeRetryMs: 200,
    });
    try {
      const served = t.cloudly.tls!.current.fingerprint256;
      await waitFor(() => t.cloudly.acme!.status.failures >= 2, 'two failed orders', 60_000).catch((error: Error) => {
        throw new Error(`${error.message}\n${t.logs.filter((line) => line.includes('ACME')).join('')}`);
      });
      const listener = t.cloudly.listenerStatus();
      assert.equal(listener.acme?.state === 'failed' || listener.acme?.state === 'ordering', true);
      const problem = t.cloudly.acme!.status.problem!;
      assert.equal(problem.type, 'directory-unreachable');
      assert.match(problem.detail, /ECONNREFUSED/);
      const { failures, nextAttemptAt, problem: { at } } = t.cloudly.acme!.status as { failures: number; nextAttemptAt: number; problem: { at: number } };
      assert.ok(nextAttemptAt - at >= 200 * 2 ** (failures - 1) - 50, `the pause doubles: failure ${failures} waits until ${nextAttemptAt - at} ms after it`);
      assert.equal(t.cloudly.tls!.current.fingerprint256, served, 'the placeholder is still served');
      assert.equal((await t.cloudly.store.get(acmeCertificateKind, 'cloudly')), null);
      assert.ok(t.logs.some((line) => line.includes('ACME: the order failed')));
      // No certificate from ACME yet: no expiry to alert on (0, as without TLS).
      assert.match((await t.cloudly.metrics.text()).text, /^cloudly_tls_certificate_expiry_timestamp_seconds 0$/m);
    } finally {
      await t.stop();
    }
  });

  test('several instances over one database: one orders, every one serves the result, and any answers the challenge', async () => {
    const longLived = await startPebble();
    const port = await findFreePort();
    const database = new congodb.CongoServer({ port, host: '127.0.0.1', storage: 'memory' });
    await database.start();
    const keyDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-acme-kek-'));
    const keyFile = path.join(keyDir, 'kek');
    await fsp.writeFile(keyFile, randomBytes(32).toString('hex'), { mode: 0o600 });
    const shared: Partial<ICloudlyConfig> = {
      mongoDbUrl: `mongodb://127.0.0.1:${port}/?serverMonitoringMode=poll&directConnection=true`,
      secretsKeyFile: keyFile,
      acmeDomains: ['localhost'],
      acmeDirectoryUrl: longLived.directoryUrl,
      acmeCaFile: longLived.listenerCaFile,
    };
    const instances: IAcmeCloudly[] = [];
    try {
      // Only the first answers on pebble's validation port; the other's responder is elsewhere, so
      // whichever instance orders, the challenge is answered from the shared database.
      instances.push(await startAcmeCloudly({ ...shared, acmeHttpPort: longLived.httpPort }));
      instances.push(await startAcmeCloudly({ ...shared, acmeHttpPort: 0 }));
      const root = await longLived.root();
      await waitFor(async () => {
        const views = await Promise.all(instances.map((instanceArg) => handshake(instanceArg.cloudly.port, root)));
        return views.every((viewArg) => viewArg.authorized) && views[0].fingerprint256 === views[1].fingerprint256;
      }, 'both instances serve one certificate pebble issued', 60_000);
      const stored = (await instances[0].cloudly.store.get(acmeCertificateKind, 'cloudly'))!;
      assert.equal(instances.reduce((sum, instanceArg) => sum + instanceArg.cloudly.acme!.orders.ok, 0), 1, 'exactly one order');
      const orderer = instances.find((instanceArg) => instanceArg.cloudly.acme!.orders.ok === 1)!;
      assert.equal(stored.orderedBy, orderer.cloudly.clusterManager.relayElection.instanceId);
      const lease = (await instances[0].cloudly.store.get(acmeLeaseKind, 'cloudly'))!;
      assert.equal(lease.holder, stored.orderedBy);
      assert.equal(lease.expiresAt, 0, 'released after the order');
      for (const instance of instances) {
        assert.equal(instance.cloudly.listenerStatus().certificate?.fingerprint256, stored.fingerprint256);
      }
    } finally {
      for (const instance of instances) {
        await instance.stop();
      }
      await database.stop();
      await longLived.stop();
      await fsp.rm(keyDir, { recursive: true, force: true });
    }
  });
});
