import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as https from 'node:https';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tls from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { Cloudly } from '../ts/classes.cloudly.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { trustCaFile } from '../ts/client/trust.js';
import { TlsMaterialError, tlsRefusalReasons } from '../ts/core/tls.js';
import { dashboardHstsHeader } from '../ts/core/dashboard.js';
import { startTestCloudly, testAdminPassword, testAdminUsername, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { installCertificate, makeTestCa, type ITestCa, type ITestCertificate } from './helpers/certificates.js';

/**
 * TLS on Cloudly's one listener (docs/tls.md): HTTP, the dashboard and both sockets on one port,
 * verified by clients that trust a test CA; certificates reloaded from replaced files and on
 * SIGHUP without dropping a socket; bad pairs refused at start and at reload.
 */

interface IPeerView {
  fingerprint256: string;
  protocol: string | null;
}

/** A fresh TLS connection's view of the server (so never a resumed session's old certificate). */
const peerOf = (portArg: number, caArg: string): Promise<IPeerView> => new Promise((resolve, reject) => {
  const socket = tls.connect({ host: '127.0.0.1', port: portArg, ca: caArg, servername: 'localhost' }, () => {
    const view = { fingerprint256: socket.getPeerX509Certificate()!.fingerprint256, protocol: socket.getProtocol() };
    socket.end();
    resolve(view);
  });
  socket.once('error', reject);
});

/** A GET over https verified against `caArg` (null: the system's CAs only). */
const httpsGet = (urlArg: string, caArg: string | null): Promise<{ status: number; headers: Record<string, unknown>; body: string }> =>
  new Promise((resolve, reject) => {
    https.get(urlArg, { ...(caArg ? { ca: caArg } : {}), agent: false }, (response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => { body += chunk.toString(); });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body }));
    }).once('error', reject);
  });

const fingerprintOf = (certificateArg: ITestCertificate): string => new X509Certificate(certificateArg.certPem).fingerprint256;

describe('TLS on every listener', () => {
  let ca: ITestCa;
  let first: ITestCertificate;
  let second: ITestCertificate;
  let tlsDir: string;
  let t: ITestCloudly;
  const certFile = () => path.join(tlsDir, 'cert.pem');
  const keyFile = () => path.join(tlsDir, 'key.pem');

  before(async () => {
    ca = await makeTestCa();
    first = await ca.issue('localhost', ['localhost', '127.0.0.1']);
    second = await ca.issue('localhost', ['localhost', '127.0.0.1']);
    tlsDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-tls-'));
    await installCertificate(first, certFile(), keyFile());
    // The test's clients (the admin and relay clients of the helper) verify against the test CA.
    trustCaFile(ca.certFile);
    t = await startTestCloudly({ tlsCertFile: certFile(), tlsKeyFile: keyFile(), tlsReloadPollMs: 50 });
  });
  after(async () => {
    await t.stop();
    await ca.remove();
    await fsp.rm(tlsDir, { recursive: true, force: true });
  });

  test('HTTP, the dashboard and both sockets answer on one TLS port, to a client that verifies against the CA', async () => {
    assert.match(t.baseUrl, /^https:\/\/127\.0\.0\.1:\d+$/);
    // The helper logged in over https with the verifying client; an admin socket over wss:
    const admin = new CloudlyAdminClient(t.baseUrl);
    await admin.login(testAdminUsername, testAdminPassword);
    await admin.connectSocket();
    assert.equal(admin.socketOpen, true);
    assert.ok(Array.isArray((await admin.call('getClusters', {})).clusters));
    admin.close();
    // A relay socket over wss, which Cloudly calls.
    const { cluster, relayToken } = await t.createCluster('tls-relay');
    const relay = await t.connectRelay(relayToken);
    relay.addHandler<{ method: 'testTlsEcho'; request: object; response: { over: string } }>('testTlsEcho', async () => ({ over: 'wss' }));
    await waitFor(() => t.cloudly.relays.sessionsOf(cluster.id).length === 1, 'the relay session is open');
    assert.equal((await t.cloudly.relays.call<{ over: string }>(cluster.id, 'testTlsEcho', {})).over, 'wss');
    relay.close();

    const ready = await httpsGet(`${t.baseUrl}/readyz`, ca.certPem);
    assert.equal(ready.status, 200);
    const listener = (JSON.parse(ready.body) as { listener: { tls: boolean; plainHttpExposed: boolean; certificate: { fingerprint256: string } } }).listener;
    assert.equal(listener.tls, true);
    assert.equal(listener.plainHttpExposed, false);
    assert.equal(listener.certificate.fingerprint256, fingerprintOf(first));

    const dashboard = await httpsGet(`${t.baseUrl}/dashboard/`, ca.certPem);
    assert.equal(dashboard.headers['strict-transport-security'], dashboardHstsHeader);
    const metrics = await httpsGet(`${t.baseUrl}/metrics`, ca.certPem);
    assert.match(metrics.body, /^cloudly_tls_certificate_expiry_timestamp_seconds \d+/m);
    assert.match(metrics.body, /^cloudly_listener_plain_http_exposed 0/m);
    // The API's answers carry no HSTS (only the dashboard is a browser's).
    const livez = await httpsGet(`${t.baseUrl}/livez`, ca.certPem);
    assert.equal(livez.headers['strict-transport-security'], undefined);
  });

  test('a request over TLS settles its connection with the pending-connection guard (no headers timeout for a served connection)', async () => {
    const agent = new https.Agent({ keepAlive: true, ca: ca.certPem });
    try {
      const answer = await new Promise<number>((resolve, reject) => {
        https.get(`${t.baseUrl}/livez`, { agent }, (response) => {
          response.resume();
          response.on('end', () => resolve(response.statusCode ?? 0));
        }).once('error', reject);
      });
      assert.equal(answer, 200);
      // The guard counted the TCP connection at accept and the request arrived on the TLS socket
      // wrapped around it: the two must be matched, or the kept-alive connection stays pending and is
      // ended at the headers timeout.
      assert.equal(t.cloudly.metrics.pendingConnections(), 0);
    } finally {
      agent.destroy();
    }
  });

  test('a client without the CA is refused by its own verification; TLS older than 1.2 is not spoken', async () => {
    await assert.rejects(httpsGet(`${t.baseUrl}/livez`, null), (errorArg: NodeJS.ErrnoException) =>
      ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY'].includes(errorArg.code ?? ''));
    const view = await peerOf(t.cloudly.port, ca.certPem);
    assert.ok(view.protocol === 'TLSv1.2' || view.protocol === 'TLSv1.3', `negotiated ${view.protocol}`);
    await assert.rejects(new Promise((resolve, reject) => {
      const socket = tls.connect({
        host: '127.0.0.1', port: t.cloudly.port, ca: ca.certPem, servername: 'localhost',
        minVersion: 'TLSv1', maxVersion: 'TLSv1.1', ciphers: 'DEFAULT@SECLEVEL=0',
      }, () => {
        socket.end();
        resolve(socket.getProtocol());
      });
      socket.once('error', reject);
    }));
  });

  test('replacing the files reloads the certificate: a live relay socket keeps answering, new connections see the new one', async () => {
    await installCertificate(first, certFile(), keyFile());
    await waitFor(async () => (await peerOf(t.cloudly.port, ca.certPem)).fingerprint256 === fingerprintOf(first), 'the first certificate served');
    const { cluster, relayToken } = await t.createCluster('tls-reload');
    const relay = await t.connectRelay(relayToken);
    let answered = 0;
    relay.addHandler<{ method: 'testTlsCount'; request: object; response: { answered: number } }>('testTlsCount', async () => ({ answered: ++answered }));
    await waitFor(() => t.cloudly.relays.sessionsOf(cluster.id).length === 1, 'the relay session is open');
    assert.equal((await t.cloudly.relays.call<{ answered: number }>(cluster.id, 'testTlsCount', {})).answered, 1);
    const reloadsBefore = t.cloudly.tls!.reloads.ok;

    await installCertificate(second, certFile(), keyFile());
    await waitFor(async () => (await peerOf(t.cloudly.port, ca.certPem)).fingerprint256 === fingerprintOf(second), 'new connections see the second certificate');
    assert.ok(t.cloudly.tls!.reloads.ok > reloadsBefore);
    // The socket opened before the reload is the same one and still answers, both ways.
    assert.equal(relay.isOpen, true);
    assert.equal(relay.connectionCount, 1);
    assert.equal((await t.cloudly.relays.call<{ answered: number }>(cluster.id, 'testTlsCount', {})).answered, 2);
    const ready = await httpsGet(`${t.baseUrl}/readyz`, ca.certPem);
    assert.equal((JSON.parse(ready.body) as { listener: { certificate: { fingerprint256: string } } }).listener.certificate.fingerprint256, fingerprintOf(second));
    relay.close();
  });

  test('a reload with a key that does not match is refused: the certificate already served stays', async () => {
    await installCertificate(second, certFile(), keyFile());
    await waitFor(async () => (await peerOf(t.cloudly.port, ca.certPem)).fingerprint256 === fingerprintOf(second), 'the second certificate served');
    const refusedBefore = t.cloudly.tls!.reloads.refused;
    await installCertificate({ certPem: first.certPem, keyPem: second.keyPem }, certFile(), keyFile());
    await waitFor(() => t.cloudly.tls!.reloads.refused > refusedBefore, 'the mismatched pair refused');
    assert.equal((await peerOf(t.cloudly.port, ca.certPem)).fingerprint256, fingerprintOf(second));
    assert.ok(t.logs.some((line) => line.includes(tlsRefusalReasons.keyMismatch) && line.includes('the one already served stays')));
    const metrics = await httpsGet(`${t.baseUrl}/metrics`, ca.certPem);
    assert.match(metrics.body, /^cloudly_tls_reloads_total\{outcome="refused"\} [1-9]/m);
    // No private key reaches the log.
    assert.ok(!t.logs.some((line) => line.includes('PRIVATE KEY')));
  });

  test('SIGHUP reloads the files (here polled only once an hour)', async () => {
    const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-tls-hup-'));
    const hupCert = path.join(dir, 'cert.pem');
    const hupKey = path.join(dir, 'key.pem');
    await installCertificate(first, hupCert, hupKey);
    const other = await startTestCloudly({ tlsCertFile: hupCert, tlsKeyFile: hupKey, tlsReloadPollMs: 3_600_000 });
    try {
      assert.equal((await peerOf(other.cloudly.port, ca.certPem)).fingerprint256, fingerprintOf(first));
      await installCertificate(second, hupCert, hupKey);
      process.kill(process.pid, 'SIGHUP');
      await waitFor(async () => (await peerOf(other.cloudly.port, ca.certPem)).fingerprint256 === fingerprintOf(second), 'the second certificate served after SIGHUP');
      assert.ok(other.logs.some((line) => line.includes('"trigger":"SIGHUP"') && line.includes('TLS certificate reloaded')));
    } finally {
      await other.stop();
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });
});

describe('a certificate that cannot be served stops the start', () => {
  let ca: ITestCa;
  let dir: string;
  before(async () => {
    ca = await makeTestCa();
    trustCaFile(ca.certFile);
    dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-tls-bad-'));
  });
  after(async () => {
    await ca.remove();
    await fsp.rm(dir, { recursive: true, force: true });
  });

  const refusedStart = async (pairArg: { certPem: string; keyPem: string }, nameArg: string): Promise<TlsMaterialError> => {
    const certFile = path.join(dir, `${nameArg}.pem`);
    const keyFile = path.join(dir, `${nameArg}.key`);
    await installCertificate(pairArg, certFile, keyFile);
    const cloudly = new Cloudly({ config: { port: 0, host: '127.0.0.1', dataDir: path.join(dir, `${nameArg}-data`), mongoDbUrl: null, tlsCertFile: certFile, tlsKeyFile: keyFile, logLevel: 'silent' } });
    let refused: unknown = null;
    try {
      await cloudly.start();
    } catch (error) {
      refused = error;
    }
    await cloudly.stop().catch(() => undefined);
    assert.ok(refused instanceof TlsMaterialError, `start refused with a TlsMaterialError, got ${String(refused)}`);
    return refused;
  };

  test('a key that does not belong to the certificate', async () => {
    const [one, two] = [await ca.issue('localhost', ['localhost']), await ca.issue('localhost', ['localhost'])];
    const refused = await refusedStart({ certPem: one.certPem, keyPem: two.keyPem }, 'mismatch');
    assert.equal(refused.reason, tlsRefusalReasons.keyMismatch);
    assert.match(refused.message, /does not belong to the certificate "CN=localhost"/);
  });

  test('an expired certificate', async () => {
    const expired = await ca.issue('localhost', ['localhost'], { startDate: new Date(Date.now() - 10 * 24 * 3600_000), endDate: new Date(Date.now() - 24 * 3600_000) });
    const refused = await refusedStart(expired, 'expired');
    assert.equal(refused.reason, tlsRefusalReasons.expired);
    assert.match(refused.message, /^the certificate expired on \d{4}-/);
  });

  test('a chain whose next certificate did not sign the one before', async () => {
    const stranger = await makeTestCa('Another CA');
    try {
      const leaf = await ca.issue('localhost', ['localhost']);
      const refused = await refusedStart({ certPem: `${leaf.certPem}${stranger.certPem}`, keyPem: leaf.keyPem }, 'chain');
      assert.equal(refused.reason, tlsRefusalReasons.chainInvalid);
      assert.match(refused.message, /not signed by the next certificate in the file \("CN=Another CA"\)/);
    } finally {
      await stranger.remove();
    }
  });

  test('a certificate with its CA as chain is served', async () => {
    const leaf = await ca.issue('localhost', ['localhost', '127.0.0.1']);
    const certFile = path.join(dir, 'chained.pem');
    const keyFile = path.join(dir, 'chained.key');
    await installCertificate({ certPem: `${leaf.certPem}${ca.certPem}`, keyPem: leaf.keyPem }, certFile, keyFile);
    const served = await startTestCloudly({ tlsCertFile: certFile, tlsKeyFile: keyFile });
    try {
      assert.equal((await peerOf(served.cloudly.port, ca.certPem)).fingerprint256, fingerprintOf(leaf));
    } finally {
      await served.stop();
    }
  });
});

describe('plain HTTP on an address other machines reach', () => {
  const listenerOf = async (baseUrlArg: string): Promise<{ plainHttpExposed: boolean; tls: boolean }> =>
    ((await (await fetch(`${baseUrlArg}/readyz`)).json()) as { listener: { plainHttpExposed: boolean; tls: boolean } }).listener;
  const exposedGauge = async (baseUrlArg: string): Promise<string | undefined> =>
    /^cloudly_listener_plain_http_exposed (\d)/m.exec(await (await fetch(`${baseUrlArg}/metrics`)).text())?.[1];

  test('is warned about at start and shown on /readyz and /metrics', async () => {
    const t = await startTestCloudly({ host: '0.0.0.0' });
    try {
      assert.ok(t.logs.some((line) => line.includes('"level":40') && line.includes('listening in plain HTTP on an address other machines reach')));
      assert.deepEqual(await listenerOf(t.baseUrl), { tls: false, plainHttpExposed: true });
      assert.equal(await exposedGauge(t.baseUrl), '1');
    } finally {
      await t.stop();
    }
  });

  test('is not, with CLOUDLY_ALLOW_PLAIN_HTTP (a proxy in front terminates TLS), nor on loopback', async () => {
    for (const config of [{ host: '0.0.0.0', allowPlainHttp: true }, { host: '127.0.0.1' }]) {
      const t = await startTestCloudly(config);
      try {
        assert.ok(!t.logs.some((line) => line.includes('listening in plain HTTP')), JSON.stringify(config));
        assert.equal((await listenerOf(t.baseUrl)).plainHttpExposed, false);
        assert.equal(await exposedGauge(t.baseUrl), '0');
      } finally {
        await t.stop();
      }
    }
  });
});
