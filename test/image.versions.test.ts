import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { refusalOf, waitFor } from './helpers/cloudly.js';
import { addClusterWorld, chunked, collect, sha256Of, startBackupWorld, type IBackupWorld } from './backup.fixture.js';
import { pullImageVersion, pushImageVersion } from '../ts/client/relayimages.js';
import { StreamAbortedError } from '../ts/core/streams.js';
import { FilesystemBlobStore } from '../ts/core/blobstore.js';
import { imageVersionKind } from '../ts/manager.image/image.manager.js';
import { imageVersionNameOf } from '../ts/interfaces/data/imageversion.js';
import type { IClusterOverviewService } from '../ts/interfaces/requests/overview.js';
import type { TUntypedContract } from '../ts/client/admin.js';
import { assertFieldProblems } from './helpers/refusals.js';

let world: IBackupWorld;

before(async () => {
  world = await startBackupWorld();
});
after(async () => {
  await world.t.stop();
});

const blobStore = (): FilesystemBlobStore => world.t.cloudly.backupManager.blobStore as FilesystemBlobStore;
const abortReason = (errorArg: unknown): string | null => (errorArg instanceof StreamAbortedError ? errorArg.reason : null);
const heldRecord = (digestArg: string) => world.t.cloudly.store.get(imageVersionKind, `${world.service.id}/${digestArg}`);

const push = (bytesArg: Buffer, declaredArg: { digest?: string; byteLength?: number } = {}, sourceArg: AsyncIterable<Buffer> = chunked(bytesArg)) =>
  pushImageVersion(world.relay, {
    serviceId: world.service.id,
    digest: declaredArg.digest ?? sha256Of(bytesArg),
    byteLength: declaredArg.byteLength ?? bytesArg.byteLength,
  }, sourceArg);

test('a pushed image version is stored durably, receipted exactly, listed for its service and pulled back byte for byte', async () => {
  const bytes = randomBytes(2 * 1024 * 1024 + 5);
  const digest = sha256Of(bytes);
  const pushed = await push(bytes);
  assert.equal(pushed.outcome, 'stored');
  const receipt = pushed.outcome === 'stored' ? pushed.receipt : null;
  assert.deepEqual(receipt, { serviceId: world.service.id, digest, byteLength: bytes.byteLength, storedAt: receipt!.storedAt });
  // The receipt came after the record and the bytes: both are there the moment it arrives.
  assert.equal((await heldRecord(digest))?.byteLength, bytes.byteLength);
  assert.deepEqual(await blobStore().stat(`images/${world.service.id}/${digest}`), {
    key: `images/${world.service.id}/${digest}`, byteLength: bytes.byteLength, sha256: digest, storedAt: receipt!.storedAt,
  });

  const { imageVersions } = await world.t.caller.call('getServiceImageVersions', { serviceId: world.service.id });
  assert.deepEqual(imageVersions, [{
    serviceId: world.service.id, digest, name: imageVersionNameOf(digest), format: 'image-tar-v1',
    byteLength: bytes.byteLength, storedAt: receipt!.storedAt, pushedByClusterId: world.clusterId,
  }]);

  const pulled = await pullImageVersion(world.relay, { serviceId: world.service.id, digest });
  assert.equal(pulled.imageVersion.digest, digest);
  assert.ok((await collect(pulled.bytes)).equals(bytes));
});

test('a version pushed again is answered as held, and nothing is sent', async () => {
  const bytes = randomBytes(64 * 1024);
  await push(bytes);
  let yielded = 0;
  async function* counted(): AsyncIterable<Buffer> {
    yielded += 1;
    yield bytes;
  }
  const again = await push(bytes, {}, counted());
  assert.equal(again.outcome, 'held');
  assert.equal(again.outcome === 'held' ? again.imageVersion.digest : null, sha256Of(bytes));
  assert.equal(yielded, 0);
});

for (const [label, declare, reason] of [
  ['a digest the bytes do not hash to', (bytesArg: Buffer) => ({ digest: sha256Of(Buffer.concat([bytesArg, Buffer.from('x')])) }), 'image-version-blob-sha256-mismatch'],
  ['a stream cut short of its declared length', (bytesArg: Buffer) => ({ byteLength: bytesArg.byteLength + 1 }), 'image-version-blob-too-short'],
  ['a stream longer than its declared length', (bytesArg: Buffer) => ({ byteLength: bytesArg.byteLength - 1 }), 'image-version-blob-too-long'],
] as const) {
  test(`${label} stores nothing: the relay learns why, no record, no bytes, no temporary file`, async () => {
    const bytes = randomBytes(512 * 1024);
    const declared = declare(bytes);
    const digest = 'digest' in declared ? declared.digest : sha256Of(bytes);
    const error = await push(bytes, declared).then(() => null, (errorArg: unknown) => errorArg);
    assert.equal(abortReason(error), reason);
    assert.equal(await heldRecord(digest), null);
    assert.equal(await blobStore().stat(`images/${world.service.id}/${digest}`), null);
    await waitFor(async () => (await blobStore().listTemporaryFiles()).length === 0, 'temporary file removed');
    const { imageVersions } = await world.t.caller.call('getServiceImageVersions', { serviceId: world.service.id });
    assert.ok(!imageVersions.some((version) => version.digest === digest));
  });
}

test('a relay dropped mid-push leaves nothing held', async () => {
  const bytes = randomBytes(4 * 1024 * 1024);
  async function* halfThenDrop(): AsyncIterable<Buffer> {
    yield bytes.subarray(0, 1024 * 1024);
    world.relay.terminate();
    yield bytes.subarray(1024 * 1024);
  }
  const error = await push(bytes, {}, halfThenDrop()).then(() => null, (errorArg: unknown) => errorArg);
  assert.equal(abortReason(error), 'stream-peer-disconnected');
  await waitFor(async () => (await blobStore().listTemporaryFiles()).length === 0, 'temporary file removed');
  assert.equal(await heldRecord(sha256Of(bytes)), null);
  world.relay = await world.t.connectRelay(world.relayToken);
  await waitFor(() => world.t.cloudly.relays.activeSession(world.clusterId) !== null, 'relay elected');
});

test('a second push of a version while the first is still streaming is refused conflict; the first completes', async () => {
  const bytes = randomBytes(1024 * 1024);
  let release!: () => void;
  const gate = new Promise<void>((resolve) => { release = resolve; });
  let firstChunkSent!: () => void;
  const started = new Promise<void>((resolve) => { firstChunkSent = resolve; });
  async function* gated(): AsyncIterable<Buffer> {
    yield bytes.subarray(0, 1024);
    firstChunkSent();
    await gate;
    yield bytes.subarray(1024);
  }
  const first = push(bytes, {}, gated());
  await started;
  const second = await refusalOf(() => push(bytes));
  assert.deepEqual([second.code, second.reasons], ['conflict', ['image-version-push-in-progress']]);
  release();
  assert.equal((await first).outcome, 'stored');
});

test('a bad push is refused with every reason before any byte moves', async () => {
  const refusal = await refusalOf(() => world.relay.fire<TUntypedContract>('pushImageVersion', {
    serviceId: world.service.id, digest: 'ABC', byteLength: 0,
    image: { kind: 'cloudly-byte-stream', streamId: 'nope', direction: 'receive' },
  }));
  assert.equal(refusal.code, 'invalid-request');
  assertFieldProblems(refusal, [
    ['request.digest', 'field-invalid', 'must be 64 lowercase hex digits (the sha256 of the tar stream)'],
    ['request.byteLength', 'field-invalid', `must be an integer from 1 to ${64 * 1024 * 1024 * 1024}`],
    ['request.image.streamId', 'field-invalid', 'must be 32 lowercase hex digits'],
    ['request.image.direction', 'field-invalid', 'must be send'],
  ]);
});

test('a relay of another cluster can neither push nor pull the images of this cluster\'s service', async () => {
  const bytes = randomBytes(32 * 1024);
  await push(bytes);
  const other = await addClusterWorld(world.t, 'beta');
  const pushRefusal = await refusalOf(() => pushImageVersion(other.relay, { serviceId: world.service.id, digest: sha256Of(bytes), byteLength: bytes.byteLength }, chunked(bytes)));
  assert.deepEqual([pushRefusal.code, pushRefusal.reasons], ['forbidden', ['service-not-on-relay-cluster']]);
  const pullRefusal = await refusalOf(() => pullImageVersion(other.relay, { serviceId: world.service.id, digest: sha256Of(bytes) }));
  assert.deepEqual([pullRefusal.code, pullRefusal.reasons], ['forbidden', ['service-not-on-relay-cluster']]);
  const missing = await refusalOf(() => pullImageVersion(world.relay, { serviceId: world.service.id, digest: sha256Of(Buffer.from('never pushed')) }));
  assert.deepEqual([missing.code, missing.reasons], ['not-found', ['image-version-not-held']]);
  await other.relay.close();
});

test('image versions are listed a page at a time, each exactly once, in the whole list\'s order (oldest stored first)', async () => {
  const { imageVersions: all } = await world.t.caller.call('getServiceImageVersions', { serviceId: world.service.id });
  assert.ok(all.length >= 3);
  const seen: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await world.t.caller.call('getServiceImageVersions', { serviceId: world.service.id, limit: 2, ...(cursor ? { cursor } : {}) });
    assert.ok(page.imageVersions.length <= 2);
    seen.push(...page.imageVersions.map((version) => version.digest));
    cursor = page.nextCursor;
  } while (cursor);
  assert.deepEqual(seen, all.map((version) => version.digest));
  const unknown = await refusalOf(() => world.t.caller.call('getServiceImageVersions', { serviceId: 'svc-nobody' }));
  assert.deepEqual([unknown.code, unknown.reasons], ['not-found', ['service-not-found']]);
});

/** The verdict the cluster page shows for a service: a read of stored state. */
const verdictOf = async (serviceIdArg: string): Promise<string> => {
  const { overview } = await world.t.caller.call('getClusterOverview', { clusterId: world.clusterId }) as { overview: { services: IClusterOverviewService[] } };
  const status = overview.services.find((entry) => entry.service.id === serviceIdArg)?.runtimeStatus;
  return status ? `${status.state}/${status.reason}` : 'unjudged';
};

test('a service naming an image version Cloudly does not hold is refused image-plan-missing until the version is pushed', async () => {
  const bytes = randomBytes(256 * 1024);
  const digest = sha256Of(bytes);
  const { service } = await world.t.caller.call('createService', {
    service: {
      name: 'pushed-image', organizationId: 'org-1', clusterId: world.clusterId,
      runtime: { image: imageVersionNameOf(digest), replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } },
      volumes: [],
    },
  });
  await waitFor(async () => (await verdictOf(service.id)) === 'refused/image-plan-missing', 'image-plan-missing on the cluster page', 10_000);
  const pushed = await pushImageVersion(world.relay, { serviceId: service.id, digest, byteLength: bytes.byteLength }, chunked(bytes));
  assert.equal(pushed.outcome, 'stored');
  // Storing the version is an input of the verdict: the reconciler judges again without being asked.
  await waitFor(async () => (await verdictOf(service.id)) === 'converging/null', 'converging once the version is held', 10_000);
  // A registry image is the runtime's business: never refused for its plan.
  assert.notEqual(await verdictOf(world.service.id), 'refused/image-plan-missing');
});
