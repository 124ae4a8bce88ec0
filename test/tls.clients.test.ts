import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { X509Certificate } from 'node:crypto';
import { CloudlyRelayClient } from '../ts/client/relay.js';
import { clientTransportReasons, resetClientTrust, trustCaFile } from '../ts/client/trust.js';
import { readSimConfig } from '../ts/sim/config.js';
import { SimFleet } from '../ts/sim/fleet.js';
import { refusalOf, startTestCloudly, testAdminPassword, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { installCertificate, makeTestCa, type ITestCa } from './helpers/certificates.js';
import { createCli, type ICli } from './cli.fixture.js';

/**
 * The clients on the wire (docs/tls.md, "Clients"): the CLI, the relay client and the simulator
 * speak https/wss verified against the system's CAs and a CA file; none sends a password or token
 * in clear to a host other than this machine unless told to; `cloudly login` shows the certificate
 * of a private CA's server on first contact.
 */

/** Logins the server answered so far (its own metric, read in process). */
const loginsAnswered = async (tArg: ITestCloudly): Promise<number> => {
  const { text } = await tArg.cloudly.metrics.text();
  return [...text.matchAll(/^cloudly_calls_total\{method="adminLoginWithUsernameAndPassword",[^}]*\} (\d+)/gm)].reduce((sum, match) => sum + Number(match[1]), 0);
};

/** An address of this machine other machines could reach (not loopback), or null. */
const outwardAddress = (): string | null => {
  for (const entries of Object.values(os.networkInterfaces())) {
    for (const entry of entries ?? []) {
      if (entry.family === 'IPv4' && !entry.internal) {
        return entry.address;
      }
    }
  }
  return null;
};

describe('clients over TLS', () => {
  let ca: ITestCa;
  let tlsDir: string;
  let t: ITestCloudly;
  let cli: ICli;
  let fingerprint: string;

  before(async () => {
    ca = await makeTestCa('Cloudly Private CA');
    const leaf = await ca.issue('localhost', ['localhost', '127.0.0.1']);
    fingerprint = new X509Certificate(leaf.certPem).fingerprint256;
    tlsDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-tls-clients-'));
    await installCertificate(leaf, path.join(tlsDir, 'cert.pem'), path.join(tlsDir, 'key.pem'));
    trustCaFile(ca.certFile);
    t = await startTestCloudly({ tlsCertFile: path.join(tlsDir, 'cert.pem'), tlsKeyFile: path.join(tlsDir, 'key.pem') });
    cli = await createCli();
  });
  after(async () => {
    resetClientTrust();
    trustCaFile(ca.certFile);
    await t.stop();
    await cli.dispose();
    await ca.remove();
    await fsp.rm(tlsDir, { recursive: true, force: true });
  });

  test('cloudly login with --ca-file shows the private CA\'s certificate on first contact only; later commands verify with CLOUDLY_CA_FILE', async () => {
    const first = await cli.run(['login', '--url', t.baseUrl, '--ca-file', ca.certFile], `${testAdminPassword}\n`);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stderr, /presents a certificate from a private CA \("CN=Cloudly Private CA"/);
    assert.ok(first.stderr.includes(`SHA-256 fingerprint ${fingerprint}`), first.stderr);
    const again = await cli.run(['login', '--url', t.baseUrl, '--ca-file', ca.certFile], `${testAdminPassword}\n`);
    assert.equal(again.code, 0, again.stderr);
    assert.ok(!again.stderr.includes('fingerprint'), 'a known server is not shown again');
    const list = await cli.run(['clusters', 'list', '--url', t.baseUrl, '-o', 'json'], '', { env: { CLOUDLY_CA_FILE: ca.certFile } });
    assert.equal(list.code, 0, list.stderr);
    assert.ok(Array.isArray(JSON.parse(list.stdout).clusters));
  });

  test('a --ca-file that cannot be read is a usage error, and nothing is sent', async () => {
    const run = await cli.run(['login', '--url', t.baseUrl, '--ca-file', path.join(tlsDir, 'missing.pem')], `${testAdminPassword}\n`);
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, /--ca-file: .*missing\.pem cannot be read: ENOENT/);
  });

  test('cloudly login to a server nothing here trusts stops before the password is sent, showing the fingerprint', async () => {
    const other = await createCli();
    try {
      const before = await loginsAnswered(t);
      const refused = await other.run(['login', '--url', t.baseUrl], `${testAdminPassword}\n`);
      assert.equal(refused.code, 2, refused.stderr);
      assert.match(refused.stderr, /presents a certificate nothing here trusts/);
      assert.ok(refused.stderr.includes(fingerprint), refused.stderr);
      assert.equal(await loginsAnswered(t), before, 'no login reached the server');
    } finally {
      await other.dispose();
    }
  });

  test('the simulator\'s relays speak wss verified with --ca-file', async () => {
    const { cluster, relayToken } = await t.createCluster('tls-sim');
    // Only the simulator's own flag may make the CA trusted from here on.
    resetClientTrust();
    const lines: string[] = [];
    const { config } = readSimConfig(['--url', t.baseUrl, '--relay-token', relayToken, '--nodes', '1', '--ca-file', ca.certFile, '--reconnect-cap-ms', '1000'], {});
    const fleet = new SimFleet(config, (fieldsArg, messageArg) => { lines.push(`${messageArg} ${JSON.stringify(fieldsArg)}`); });
    try {
      await fleet.start();
      await waitFor(() => t.cloudly.relays.sessionsOf(cluster.id).length === 1, `the simulated relay connected over wss\n${lines.join('\n')}`);
      const registrations = await t.caller.call('getClusterRelayRegistrations', { clusterIds: [cluster.id] });
      assert.equal(registrations.registrations[0]?.connected, true);
    } finally {
      await fleet.stop();
    }
  });
});

describe('no password or token in clear to another machine', () => {
  let t: ITestCloudly;
  let url: string | null;
  before(async () => {
    const address = outwardAddress();
    // Plain HTTP on every address, as behind a proxy that terminates TLS.
    t = await startTestCloudly({ host: '0.0.0.0', allowPlainHttp: true });
    url = address ? `http://${address}:${t.cloudly.port}` : null;
  });
  after(async () => {
    await t.stop();
  });

  test('the CLI refuses to log in over plain http to a non-loopback host, and does with --insecure-plain-http', async (contextArg) => {
    if (!url) {
      contextArg.skip('this machine has no non-loopback IPv4 address');
      return;
    }
    const cli = await createCli();
    try {
      const before = await loginsAnswered(t);
      const refused = await cli.run(['login', '--url', url], `${testAdminPassword}\n`);
      assert.equal(refused.code, 1, refused.stderr);
      assert.match(refused.stderr, /^refused: invalid-request$/m);
      assert.ok(refused.stderr.includes(`  ${clientTransportReasons.plainHttpRefused}`), refused.stderr);
      assert.match(refused.stderr, /would cross the network in clear/);
      assert.equal(await loginsAnswered(t), before, 'the password never left');

      const allowed = await cli.run(['login', '--url', url, '--insecure-plain-http'], `${testAdminPassword}\n`);
      assert.equal(allowed.code, 0, allowed.stderr);
      assert.equal(await loginsAnswered(t), before + 1);
      // The next command is refused again: the permission is per invocation.
      const next = await cli.run(['clusters', 'list', '--url', url]);
      assert.equal(next.code, 1, next.stderr);
      assert.ok(next.stderr.includes(clientTransportReasons.plainHttpRefused));
    } finally {
      await cli.dispose();
    }
  });

  test('the relay client refuses to send its token over plain http to a non-loopback host', async (contextArg) => {
    if (!url) {
      contextArg.skip('this machine has no non-loopback IPv4 address');
      return;
    }
    const { cluster, relayToken } = await t.createCluster('plain-relay');
    // A CLI run in this process may have allowed plain http for itself; the relay client starts from none.
    resetClientTrust();
    const refusal = await refusalOf(() => CloudlyRelayClient.connect(url!, relayToken, { reconnect: false }));
    assert.equal(refusal.code, 'invalid-request');
    assert.deepEqual(refusal.reasons, [clientTransportReasons.plainHttpRefused]);
    assert.equal(t.cloudly.relays.sessionsOf(cluster.id).length, 0);
  });
});
