import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { methodMapFile, renderMethodMap } from '../scripts/method-map.js';
import type { TSame } from '../ts/interfaces/private/sametype.js';
import type { ICloudlyMethods, ICloudlyOutboundMethods } from '../ts/interfaces/requests/methodmap.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { IReq_Any_Cloudly_CreateCluster } from '../ts/interfaces/requests/admin.js';
import { startTestCloudly } from './helpers/cloudly.js';

test('the method map holds every contract of the contracts module (regenerate with scripts/method-map.ts)', () => {
  assert.equal(readFileSync(methodMapFile, 'utf8'), renderMethodMap());
});

test('a method name alone types a call of the admin client: request members checked, answer inferred', async () => {
  // The map entry is the contract itself (checked by the compiler through `npm run check`).
  const sameContract: ICloudlyMethods['createCluster'] extends IReq_Any_Cloudly_CreateCluster ? true : false = true;
  assert.equal(sameContract, true);
  const t = await startTestCloudly();
  try {
    const created = await t.caller.call('createCluster', { name: 'inferred' });
    const listed = await t.caller.call('getClusters', {});
    // Inferred answer types: `cluster.id` and `clusters` would not compile on an untyped answer.
    assert.ok(listed.clusters.some((cluster) => cluster.id === created.cluster.id));
    // @ts-expect-error a member the contract does not declare does not compile
    await t.caller.call('getClusters', { clusterName: 'x' }).catch(() => undefined);
  } finally {
    await t.stop();
  }
});

test('a method name alone types the relay client\'s calls and handlers', () => {
  const fired = (relayArg: CloudlyRelayClient) => relayArg.fire('reportRuntimeNodeSession', { nodeId: 'node-1', session: { id: 's', generation: 1 } });
  const sameFire: TSame<Awaited<ReturnType<typeof fired>>, ICloudlyMethods['reportRuntimeNodeSession']['response']> = true;
  // The handler's request is typed by the outbound method map: this compiles only if it is.
  const handled = (relayArg: CloudlyRelayClient) => relayArg.addHandler('pushClusterPlatformDesiredStateChanged', async (requestArg) => {
    const typed: ICloudlyOutboundMethods['pushClusterPlatformDesiredStateChanged']['request'] = requestArg;
    return { acknowledged: typed.revision >= 0 };
  });
  assert.deepEqual([sameFire, typeof handled], [true, 'function']);
});
