import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tls from 'node:tls';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import { resetClientTrust, trustCaFile } from '../ts/client/trust.js';
import type { IReq_Cloudly_Relay_GetClusterCorestoreLegacyResources } from '../ts/interfaces/requests/corestore.js';
import type { IIdentity } from '../ts/interfaces/data/user.js';
import { waitFor } from './helpers/cloudly.js';
import { installCertificate, makeTestCa, type ITestCa } from './helpers/certificates.js';
import {
  FailoverRelay, multiInstanceAdminPassword, startDevDatabase, startInstance, stopInstance, type IDevDatabaseProcess, type IInstanceProcess,
} from './helpers/multiinstance.js';

/**
 * Two instances over one database, both serving TLS (docs/tls.md, "Several instances"): a relay on
 * A over wss, an administrator's call on B forwarded to it over the instance link, which B opens
 * to A's https internal URL verifying A's certificate with the CA given as NODE_EXTRA_CA_CERTS.
 */

let workDir: string;
let ca: ITestCa;
let database: IDevDatabaseProcess;
let a: IInstanceProcess;
let b: IInstanceProcess;
let relay: FailoverRelay;
let identity: IIdentity;
let clusterId: string;
let relayCalls = 0;
const admins: CloudlyAdminClient[] = [];

const adminOf = (instanceArg: IInstanceProcess): CloudlyAdminClient => {
  const client = new CloudlyAdminClient(instanceArg.baseUrl);
  client.identity = identity;
  admins.push(client);
  return client;
};

const logLines = (instanceArg: IInstanceProcess, messageArg: string): number =>
  instanceArg.output().split('\n').filter((line) => line.includes(`"msg":"${messageArg}"`)).length;

describe('several instances over TLS', () => {
  before(async () => {
    workDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-mi-tls-'));
    ca = await makeTestCa('Cloudly Instances CA');
    const leaf = await ca.issue('localhost', ['localhost', '127.0.0.1']);
    const certFile = path.join(workDir, 'cert.pem');
    const keyFile = path.join(workDir, 'key.pem');
    await installCertificate(leaf, certFile, keyFile);
    trustCaFile(ca.certFile);
    database = await startDevDatabase(path.join(workDir, 'database'));
    const env = { CLOUDLY_TLS_CERT_FILE: certFile, CLOUDLY_TLS_KEY_FILE: keyFile, NODE_EXTRA_CA_CERTS: ca.certFile };
    a = await startInstance(database, 'a', env);
    b = await startInstance(database, 'b', env);
    identity = await new CloudlyAdminClient(a.baseUrl).login('admin', multiInstanceAdminPassword);
    const created = await adminOf(a).call('createCluster', { name: 'tls-linked' });
    clusterId = created.cluster.id;
    await adminOf(a).call('addClusterNode', { clusterId, name: 'n1', nodeId: 'n1' });
    relay = new FailoverRelay(clusterId, created.relayToken, () => [a.baseUrl], 0, (clientArg: CloudlyRelayClient) => {
      clientArg.addHandler<IReq_Cloudly_Relay_GetClusterCorestoreLegacyResources>('getClusterCorestoreLegacyResources', async ({ nodeId }) => {
        relayCalls++;
        return { reachable: true, nodeId, readAt: 1_700_000_000_000, services: [] };
      });
    });
    await relay.connect();
    await waitFor(async () => adminOf(a).call('getCorestoreLegacyResources', { clusterId, nodeId: 'n1' }).then(() => true, () => false),
      'the relay is elected on A', 15_000);
  });

  after(async () => {
    relay?.close();
    for (const client of admins) {
      client.close();
    }
    await Promise.all([a, b].filter(Boolean).map((instance) => stopInstance(instance)));
    await database?.stop();
    await ca?.remove();
    resetClientTrust();
    await fsp.rm(workDir, { recursive: true, force: true });
  });

  test('a call on B reaches the relay on A over a wss instance link that verifies A\'s certificate', async () => {
    assert.match(a.baseUrl, /^https:/);
    assert.match(b.baseUrl, /^https:/);
    const before = relayCalls;
    const answer = await adminOf(b).call('getCorestoreLegacyResources', { clusterId, nodeId: 'n1' });
    assert.equal(JSON.stringify(answer.inventory).includes('"n1"'), true, JSON.stringify(answer));
    assert.equal(relayCalls, before + 1, 'the call reached the relay on A');
    assert.equal(logLines(b, 'instance link opened'), 1, 'B opened its link to A');
    assert.equal(logLines(a, 'instance link accepted'), 1);
    assert.equal(logLines(b, 'instance link could not be opened; forwarding over HTTP'), 0);
    // A serves TLS on the link's port: a plain connection gets no HTTP answer there.
    const view = await new Promise<string | null>((resolve, reject) => {
      const socket = tls.connect({ host: '127.0.0.1', port: Number(new URL(a.baseUrl).port), ca: ca.certPem, servername: 'localhost' }, () => {
        resolve(socket.getProtocol());
        socket.end();
      });
      socket.once('error', reject);
    });
    assert.ok(view === 'TLSv1.3' || view === 'TLSv1.2');
  });
});
