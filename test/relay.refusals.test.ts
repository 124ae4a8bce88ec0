import { after, before, describe, test } from 'node:test';
import { followOperation, outcomeOf } from '../ts/client/operations.js';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import { TypedResponseError } from '@api.global/typedrequest';
import { refusalOf, startTestCloudly, type ITestCloudly } from './helpers/cloudly.js';
import { causeSentencesOf } from './helpers/refusals.js';
import { addClusterWorld } from './backup.fixture.js';
import {
  cloudlyToRelayCalls,
  defaultRelayCallTimeouts,
  maximumRelayErrorReasonLength,
  maximumRelayErrorReasons,
  relayCallRefusal,
  type IRelayCallTimeouts,
} from '../ts/core/relaycalls.js';
import { PeerUnavailableError } from '../ts/core/envelopepeer.js';
import { readConfig } from '../ts/config.js';
import { serviceBackupKind } from '../ts/manager.backup/backup.manager.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { ITypedContract } from '../ts/interfaces/requests/admin.js';

/**
 * One mapping for every Cloudly → relay call: no answer, the relay's own refusal and an answer
 * that breaks the contract each reach the administrator as `unavailable` with a named reason;
 * the relay's code and reasons travel apart in `relayError`. And one table of timeouts.
 */

type TAnyRelayHandler = ITypedContract<string, unknown, unknown>;

/** Every Cloudly → relay method the contracts module declares (its types are the only place). */
const contractCloudlyToRelayMethods = async (): Promise<string[]> => {
  const methods: string[] = [];
  for (const file of await fsp.readdir('ts/interfaces/requests')) {
    const text = await fsp.readFile(`ts/interfaces/requests/${file}`, 'utf8');
    for (const match of text.matchAll(/export type IReq_(Cloudly_Relay|Cloudly_Coreflow|Controller_Pallet)_\w+ = ITypedContract<\s*'(\w+)'/g)) {
      methods.push(match[2]);
    }
  }
  return methods.sort();
};

describe('the timeout table of Cloudly → relay calls', () => {
  test('names every Cloudly → relay method of the contracts module, and nothing else', async () => {
    assert.deepEqual(Object.keys(cloudlyToRelayCalls).sort(), await contractCloudlyToRelayMethods());
  });

  test('classes come from the configuration; defaults are the documented ones', () => {
    const config = readConfig({});
    assert.deepEqual(
      { ordinary: config.relayCallTimeoutMs, archive: config.relayArchiveCallTimeoutMs, backup: config.relayBackupCallTimeoutMs },
      { ordinary: 15_000, archive: 300_000, backup: 900_000 },
    );
    assert.equal(defaultRelayCallTimeouts.hint, 5_000);
    assert.deepEqual(readConfig({ CLOUDLY_RELAY_BACKUP_CALL_TIMEOUT_MS: '60000' }).relayBackupCallTimeoutMs, 60_000);
  });
});

describe('the one refusal mapping (pure)', () => {
  const cases: Array<[string, unknown, Record<string, unknown>]> = [
    ['no socket', new PeerUnavailableError('not-open', 'm'), { code: 'unavailable', retryable: true, reasons: ['relay-not-connected'] }],
    ['timeout', new PeerUnavailableError('timeout', 'm'), { code: 'unavailable', retryable: true, reasons: ['relay-timeout'] }],
    ['socket dropped', new PeerUnavailableError('disconnected', 'm'), { code: 'unavailable', retryable: true, reasons: ['relay-disconnected'] }],
    ['relay refused', new TypedResponseError('no', { code: 'invalid-request', retryable: false, reasons: ['request.nodeId is unknown here'] }),
      { code: 'unavailable', retryable: false, reasons: ['relay-refused'], relayError: { code: 'invalid-request', retryable: false, reasons: ['request.nodeId is unknown here'] } }],
    ['relay refused without data', new TypedResponseError('no', null),
      { code: 'unavailable', retryable: true, reasons: ['relay-refused'], relayError: { code: null, reasons: [] } }],
    ['answer unreadable', Object.assign(new Error('x'), { name: 'PeerAnswerMalformedError', reasons: ['answer frame exceeds 4194304 bytes'] }),
      { code: 'unavailable', retryable: true, reasons: ['relay-answer-invalid'], causes: [{ path: 'answer', message: 'frame exceeds 4194304 bytes' }] }],
    ['anything else', new Error('boom'), { code: 'unavailable', retryable: true, reasons: ['relay-failed'] }],
  ];
  for (const [name, error, expected] of cases) {
    test(name, () => {
      assert.deepEqual(relayCallRefusal(error).errorData, expected);
    });
  }

  test('a relay cannot flood the caller: reasons are cut in number and length', () => {
    const data = relayCallRefusal(new TypedResponseError('no', {
      code: 'x'.repeat(500), reasons: Array.from({ length: 200 }, () => 'r'.repeat(10_000)),
    })).errorData as { relayError: { code: string; reasons: string[] } };
    assert.equal(data.relayError.reasons.length, maximumRelayErrorReasons);
    assert.ok(data.relayError.reasons.every((reason) => reason.length <= maximumRelayErrorReasonLength + 1));
    assert.ok(data.relayError.code.length <= 65);
  });
});

describe('refusals and answers through the administrator\'s calls', () => {
  let t: ITestCloudly;
  let world: Awaited<ReturnType<typeof addClusterWorld>>;
  let relay: CloudlyRelayClient;
  /** What the relay does next for each method. */
  const behaviour = new Map<string, () => Promise<unknown>>();
  let configuredTimeouts: IRelayCallTimeouts;

  before(async () => {
    t = await startTestCloudly({ relayCallTimeoutMs: 150, relayArchiveCallTimeoutMs: 200, relayBackupCallTimeoutMs: 250, relayAnswerLimitBytes: 64 * 1024, bodyLimitBytes: 64 * 1024 });
    // The short configured timeouts are for the timeout test; every other test here waits for an
    // answer, which a loaded machine (files run in parallel) can hold back past 150 ms.
    configuredTimeouts = {
      hint: t.cloudly.relays.timeoutOf('pushClusterIngressRouteTableChanged'),
      ordinary: t.cloudly.relays.timeoutOf('getClusterCorestoreLegacyResources'),
      archive: t.cloudly.relays.timeoutOf('pruneClusterNodeArchive'),
      backup: t.cloudly.relays.timeoutOf('backupClusterService'),
    };
    t.cloudly.relays.setCallTimeouts({ ...defaultRelayCallTimeouts });
    world = await addClusterWorld(t, 'refusals');
    relay = world.relay;
    for (const method of ['backupClusterService', 'restoreClusterService', 'pruneClusterNodeArchive', 'getClusterCorestoreLegacyResources']) {
      relay.addHandler<TAnyRelayHandler>(method, async () => {
        const next = behaviour.get(method);
        if (!next) {
          throw new TypedResponseError('not set up', { code: 'internal', retryable: false });
        }
        return next();
      });
    }
  });
  after(async () => { await t.stop(); });

  const refuseWith = (dataArg: unknown) => async () => { throw new TypedResponseError('refused by the relay', dataArg); };
  const never = () => new Promise(() => undefined);

  /** A backup answers its operation at once; its refusal is the one the operation recorded. */
  const backup = (backupIdArg: string) => async () => {
    const { operation } = await t.caller.call('createServiceBackup', {
      clusterId: world.clusterId, nodeId: world.nodeId, serviceId: world.service.id, backupId: backupIdArg,
    });
    return outcomeOf(await followOperation(t.admin, operation!.operationId, { timeoutMs: 20_000 }));
  };
  const prune = () => t.caller.call('adminPruneClusterNodeArchive', {
    clusterId: world.clusterId, nodeId: world.nodeId, retention: { keepLast: 1 },
  });
  const inventory = () => t.caller.call('getCorestoreLegacyResources', {
    clusterId: world.clusterId, nodeId: world.nodeId,
  });

  test('the relay\'s own invalid-request is never the administrator\'s: backup and inventory read the same', async () => {
    const relayData = { code: 'invalid-request', retryable: false, reasons: ['request.service.volumes[0] is not on this node'] };
    behaviour.set('backupClusterService', refuseWith(relayData));
    behaviour.set('getClusterCorestoreLegacyResources', refuseWith(relayData));
    const expected = { code: 'unavailable', retryable: false, reasons: ['relay-refused'], relayError: relayData };
    assert.deepEqual(await refusalOf(backup('backup-refused')), expected);
    assert.deepEqual(await refusalOf(inventory), expected);
    const stored = await t.cloudly.store.get(serviceBackupKind, 'backup-refused');
    assert.equal(stored?.state, 'failed');
    assert.equal(stored?.failureReason, 'relay-refused');
  });

  test('answers that break the contract name the member that failed', async () => {
    /** The refusal's reasons, and each cause as its path and sentence. */
    const flawsOf = async (callArg: () => Promise<unknown>) => {
      const refusal = await refusalOf(callArg);
      return { reasons: refusal.reasons, causes: causeSentencesOf(refusal) };
    };
    behaviour.set('backupClusterService', async () => ({}));
    assert.deepEqual(await flawsOf(backup('backup-empty-answer')),
      { reasons: ['relay-answer-invalid'], causes: ['answer.snapshots must be an array of snapshots'] });
    behaviour.set('backupClusterService', async () => ({ snapshots: [{ type: 'database', snapshotId: 's1', resourceName: 'db', createdAt: 1, sizeBytes: -1 }] }));
    assert.deepEqual(await flawsOf(backup('backup-bad-snapshot')),
      { reasons: ['relay-answer-invalid'], causes: ['answer.snapshots[0].databaseName must be a string', 'answer.snapshots[0].sizeBytes must be a non-negative integer'] });
    behaviour.set('pruneClusterNodeArchive', async () => ({ found: 'yes' }));
    assert.deepEqual(await flawsOf(prune), { reasons: ['relay-answer-invalid'], causes: ['answer.found must be a boolean'] });
    behaviour.set('getClusterCorestoreLegacyResources', async () => ({ nodeId: world.nodeId }));
    const inventoryFlaws = await flawsOf(inventory);
    assert.deepEqual(inventoryFlaws.reasons, ['relay-answer-invalid']);
    assert.ok(inventoryFlaws.causes.length > 0 && inventoryFlaws.causes.every((cause) => cause.startsWith('answer')), inventoryFlaws.causes.join(' | '));
  });

  test('each timeout class ends its calls as relay-timeout (short configured timeouts)', async (context) => {
    t.cloudly.relays.setCallTimeouts(configuredTimeouts);
    context.after(() => t.cloudly.relays.setCallTimeouts({ ...defaultRelayCallTimeouts }));
    behaviour.set('getClusterCorestoreLegacyResources', never);
    behaviour.set('pruneClusterNodeArchive', never);
    behaviour.set('backupClusterService', never);
    assert.deepEqual((await refusalOf(inventory)).reasons, ['relay-timeout']);
    assert.deepEqual((await refusalOf(prune)).reasons, ['relay-timeout']);
    assert.deepEqual((await refusalOf(backup('backup-timeout'))).reasons, ['relay-timeout']);
    assert.equal(t.cloudly.relays.timeoutOf('getClusterCorestoreLegacyResources'), 150);
    assert.equal(t.cloudly.relays.timeoutOf('coreflowGetIsolatedRestoreStatus'), 150);
    assert.equal(t.cloudly.relays.timeoutOf('pruneClusterNodeArchive'), 200);
    assert.equal(t.cloudly.relays.timeoutOf('stageIsolatedRestoreArchive'), 200);
    assert.equal(t.cloudly.relays.timeoutOf('backupClusterService'), 250);
    assert.equal(t.cloudly.relays.timeoutOf('restoreClusterService'), 250);
    assert.equal(t.cloudly.relays.timeoutOf('pushClusterIngressRouteTableChanged'), 5_000);
  });

  test('an answer larger than the relay-answer limit is relay-answer-invalid, and the socket stays', async () => {
    const limit = Math.max(t.cloudly.config.bodyLimitBytes, t.cloudly.config.relayAnswerLimitBytes);
    behaviour.set('getClusterCorestoreLegacyResources', async () => ({
      reachable: false, nodeId: world.nodeId, readAt: 1, errorCode: 'CORESTORE_UNREACHABLE', padding: 'x'.repeat(limit + 1024),
    }));
    assert.deepEqual((await refusalOf(inventory)).reasons, ['relay-answer-invalid', 'frame-too-large']);
    behaviour.set('getClusterCorestoreLegacyResources', async () => ({ reachable: false, nodeId: world.nodeId, readAt: 1, errorCode: 'CORESTORE_UNREACHABLE' }));
    assert.equal((await inventory()).inventory.reachable, false);
    assert.equal(relay.isOpen, true);
  });

  test('a restore refused by the relay says so the same way', async () => {
    behaviour.set('backupClusterService', async () => ({ snapshots: [{ type: 'volume', snapshotId: 's1', resourceName: 'data', mountPath: '/data', createdAt: 1, sizeBytes: 0 }] }));
    await backup('backup-for-restore')();
    behaviour.set('restoreClusterService', refuseWith({ code: 'conflict', retryable: true, reasons: ['node is busy'] }));
    const data = await refusalOf(async () => {
      const { operation } = await t.caller.call('restoreServiceBackup', { backupId: 'backup-for-restore' });
      return outcomeOf(await followOperation(t.admin, operation.operationId, { timeoutMs: 20_000 }));
    });
    assert.deepEqual(data, { code: 'unavailable', retryable: true, reasons: ['relay-refused'], relayError: { code: 'conflict', retryable: true, reasons: ['node is busy'] } });
  });
});
