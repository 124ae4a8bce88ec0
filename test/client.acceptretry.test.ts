import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as http from 'node:http';
import * as net from 'node:net';
import { startTestCloudly, testAdminPassword, testAdminUsername, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { CloudlyTransportError } from '../ts/client/transport.js';

/**
 * A connection Cloudly refuses at accept (too many waiting from one address) is answered 503 with
 * a Retry-After before any of the request is read. The admin client sends the request again after
 * the advised wait (ts/client/transport.ts), so an administrator's call made during a storm lands
 * once there is room instead of failing; when there is never room, the refusal reaches the caller
 * with its retryAfterMs.
 */

const refusalsOf = async (tArg: ITestCloudly): Promise<number> => {
  const metric = await tArg.cloudly.metrics.connectionRefusals.get();
  return metric.values.filter((valueArg) => valueArg.labels.reason === 'pending-per-address').reduce((sumArg, valueArg) => sumArg + valueArg.value, 0);
};

/** Fills the address's one place with a connection that sent half a request. */
const holdThePlace = async (portArg: number): Promise<net.Socket> => {
  const holder = net.connect({ host: '127.0.0.1', port: portArg });
  await new Promise<void>((resolve, reject) => holder.once('connect', resolve).once('error', reject));
  holder.write('POST /typedrequest HTTP/1.1\r\nHost: cloudly\r\n');
  return holder;
};

/**
 * A Cloudly that takes one pending connection per address, a logged-in client whose next call
 * must open a new connection (as a call during a storm would), and that one place held by a
 * connection from the client's address; `bodyArg` gets them with the refusal count before the call.
 */
const withThePlaceHeld = async (
  bodyArg: (worldArg: { t: ITestCloudly; client: CloudlyAdminClient; holder: net.Socket; refusalsBefore: number }) => Promise<void>,
): Promise<void> => {
  const t = await startTestCloudly({ pendingConnectionsPerAddress: 1, headersTimeoutMs: 60_000, logLevel: 'silent' });
  let holder: net.Socket | null = null;
  try {
    const client = new CloudlyAdminClient(t.cloudly.baseUrl);
    await client.login(testAdminUsername, testAdminPassword);
    http.globalAgent.destroy();
    holder = await holdThePlace(Number(new URL(t.cloudly.baseUrl).port));
    await waitFor(() => t.cloudly.metrics.pendingConnections() === 1, 'the holder is pending');
    await bodyArg({ t, client, holder, refusalsBefore: await refusalsOf(t) });
  } finally {
    holder?.destroy();
    await t.stop();
  }
};

test('an administrator\'s call refused at accept is sent again after the advised wait and lands once there is room', async () => {
  await withThePlaceHeld(async ({ t, client, holder, refusalsBefore }) => {
    const call = client.call('getClusters', {});
    await waitFor(async () => await refusalsOf(t) > refusalsBefore, 'the call was refused at accept');
    holder.destroy();
    const answer = await call;
    assert.ok(Array.isArray(answer.clusters), 'the call was answered after its retry');
  });
});

test('when there is never room, the refusal reaches the caller with its Retry-After, after the client\'s retries', async () => {
  await withThePlaceHeld(async ({ t, client, refusalsBefore }) => {
    const error = await client.call('getClusters', {}).then(() => null, (errorArg: unknown) => errorArg);
    assert.ok(error instanceof CloudlyTransportError, `a transport error, got ${String(error)}`);
    assert.equal(error.status, 503);
    assert.ok(error.retryAfterMs !== null && error.retryAfterMs >= 1000, `retryAfterMs from the answer, got ${error.retryAfterMs}`);
    assert.equal(await refusalsOf(t) - refusalsBefore, 4, 'the first attempt and three retries were each refused');
  });
});
