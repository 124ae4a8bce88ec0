import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCloudly, refusalOf, type ITestCloudly } from './helpers/cloudly.js';
import { contractRefusal, refuse } from '../ts/core/errors.js';
import {
  adminMutation,
  adminOrchestration,
  registerOperations,
  type IAdminHandlerContext,
  type IDeclaredOperation,
  type IOperationHost,
} from '../ts/core/operations.js';
import { defineDocumentKind, type DocumentStore, type IStoredDocument } from '../ts/core/store.js';
import { invalidField, isIdString, isNonNegativeInteger, sentenceOfProblem, type IFieldProblem } from '../ts/core/validation.js';
import { computeCanonicalJsonSha256Hex } from '../ts/interfaces/private/canonicaljson.js';
import { assertFieldProblems } from './helpers/refusals.js';

/**
 * The declared-operation pipeline itself (ts/core/operations.ts): replay by mutationId, the
 * contract's own refusal shapes, the typed parse, and the reason every orchestration must give.
 * The probe operations run on the real store of a real Cloudly; a host that keeps the handlers
 * calls them in process, as the guard would after it checked the identity.
 */

interface IProbe extends IStoredDocument {
  value: number;
}

interface IProbeRequest {
  id: string;
  value: number;
  expectedGeneration: number;
  mutationId: string;
}

interface IProbeRecord {
  value: number;
  requestSha256: string;
}

const probeKind = defineDocumentKind<IProbe>('CloudlyPipelineProbe');

type THandler = (requestArg: unknown, contextArg: IAdminHandlerContext) => Promise<unknown>;

/** A host that keeps what registerOperations hands it, over the given store. */
const keepingHost = (storeArg: DocumentStore): IOperationHost & { call(methodArg: string, requestArg: object): Promise<unknown> } => {
  const handlers = new Map<string, THandler>();
  const context = { identity: { userId: 'probe-admin', name: 'probe' }, transport: 'http', localData: {} } as unknown as IAdminHandlerContext;
  return {
    store: storeArg,
    addAdminHandler: (methodArg, fnArg) => { handlers.set(methodArg, fnArg); },
    addRelayHandler: () => undefined,
    call: (methodArg, requestArg) => handlers.get(methodArg)!(structuredClone(requestArg), context),
  };
};

const probeShape = { required: { id: isIdString, value: isNonNegativeInteger, expectedGeneration: isNonNegativeInteger, mutationId: isIdString } };

/** A compare-and-swap write of a probe, idempotent by its mutationId. */
const replayingProbe = (methodArg: string): IDeclaredOperation => adminMutation({
  method: methodArg,
  access: 'write',
  input: probeShape,
  replay: {
    kind: probeKind,
    mutationId: (request: IProbeRequest) => request.mutationId,
    path: 'request.mutationId',
    matches: ({ doc, answer }: { doc: IProbe; answer: unknown }, request: IProbeRequest) =>
      doc.id === request.id && (answer as IProbeRecord).requestSha256 === computeCanonicalJsonSha256Hex(request),
    replayed: (recorded: unknown) => ({ value: (recorded as IProbeRecord).value, replayed: true }),
  },
  target: (request: IProbeRequest) => ({ kind: probeKind, id: request.id }),
  decide: (current: IProbe | null, { request }: { request: IProbeRequest }) => {
    const record: IProbeRecord = { value: request.value, requestSha256: computeCanonicalJsonSha256Hex(request) };
    if ((current?.generation ?? 0) !== request.expectedGeneration) {
      return { kind: 'refuse', refusal: refuse('conflict', ['generation-mismatch']) };
    }
    return current
      ? { kind: 'write', change: { set: { value: request.value } }, record }
      : { kind: 'create', doc: { id: request.id, value: request.value }, record };
  },
  answer: ({ recorded }: { recorded?: unknown }) => ({ value: (recorded as IProbeRecord).value, replayed: false }),
} as never);

describe('the declared-operation pipeline', () => {
  let t: ITestCloudly;
  before(async () => { t = await startTestCloudly(); });
  after(async () => { await t.stop(); });

  test('every free-form orchestration says in one line why it is not a one-document mutation', (tc) => {
    const declared = [...t.cloudly.declaredOperations.values()];
    const orchestrations = declared.filter((declarationArg) => declarationArg.kind.endsWith('-orchestration'));
    tc.diagnostic(`${declared.length} declared operations, ${orchestrations.length} orchestrations:`);
    for (const orchestration of orchestrations) {
      tc.diagnostic(`  ${orchestration.method}: ${orchestration.why}`);
    }
    assert.ok(declared.length > 60, `${declared.length} declarations recorded`);
    assert.deepEqual(orchestrations.filter((declarationArg) => !declarationArg.why || declarationArg.why.includes('\n')).map((declarationArg) => declarationArg.method), []);
    // The one-document mutations that were orchestrations for want of replay and contract refusals.
    for (const method of ['setServiceVolumeInitialization', 'designateClusterIngress', 'changePassword']) {
      assert.equal(t.cloudly.declaredOperations.get(method)?.kind, 'admin-mutation', method);
    }
  });

  test('an orchestration that gives no reason stops the registration, naming the method and what to add', () => {
    const host = keepingHost(t.cloudly.store);
    const silent = adminOrchestration({ method: 'probeSilent', access: 'write', input: { required: {} }, run: async () => ({}) } as never);
    assert.throws(() => registerOperations(host, [silent]), /method probeSilent is a free-form admin-orchestration but says not why in one line: add why:/);
    const twoLines = adminOrchestration({ method: 'probeTwoLines', access: 'write', why: 'first\nsecond', input: { required: {} }, run: async () => ({}) } as never);
    assert.throws(() => registerOperations(host, [twoLines]), /method probeTwoLines/);
    const said = adminOrchestration({ method: 'probeSaid', access: 'write', why: 'two documents', input: { required: {} }, run: async () => ({}) } as never);
    registerOperations(host, [said]);
  });

  test('the same mutationId with the same request answers what was recorded; with another request it is refused by name', async () => {
    const host = keepingHost(t.cloudly.store);
    registerOperations(host, [replayingProbe('probeReplay')]);
    const request: IProbeRequest = { id: 'probe-replay', value: 7, expectedGeneration: 0, mutationId: 'm-replay-1' };
    assert.deepEqual(await host.call('probeReplay', request), { value: 7, replayed: false });
    assert.deepEqual(await host.call('probeReplay', request), { value: 7, replayed: true });
    assert.equal((await t.cloudly.store.get(probeKind, 'probe-replay'))?.generation, 1, 'a replay writes nothing');
    const reused = await refusalOf(() => host.call('probeReplay', { ...request, value: 8 }));
    assert.deepEqual(reused, {
      code: 'invalid-request', retryable: false, reasons: ['mutation-id-reused'],
      causes: [{ path: 'request.mutationId', message: 'was already used for a different request' }],
    });
    assert.equal((await t.cloudly.store.get(probeKind, 'probe-replay'))?.value, 7, 'the refused request changed nothing');
    // A refused decision records nothing: the id stays free for the request that succeeds.
    const stale = await refusalOf(() => host.call('probeReplay', { ...request, mutationId: 'm-replay-2', expectedGeneration: 5 }));
    assert.deepEqual(stale.reasons, ['generation-mismatch']);
    assert.deepEqual(await host.call('probeReplay', { ...request, mutationId: 'm-replay-2', value: 9, expectedGeneration: 1 }), { value: 9, replayed: false });
  });

  test('twenty concurrent calls under one mutationId: one write, every caller gets its answer, nineteen as replays', async () => {
    const host = keepingHost(t.cloudly.store);
    registerOperations(host, [replayingProbe('probeConcurrent')]);
    await host.call('probeConcurrent', { id: 'probe-concurrent', value: 1, expectedGeneration: 0, mutationId: 'm-concurrent-0' });
    const request: IProbeRequest = { id: 'probe-concurrent', value: 2, expectedGeneration: 1, mutationId: 'm-concurrent-1' };
    const answers = await Promise.all(Array.from({ length: 20 }, () => host.call('probeConcurrent', request))) as Array<{ value: number; replayed: boolean }>;
    assert.deepEqual(answers.map((answerArg) => answerArg.value), Array(20).fill(2));
    assert.equal(answers.filter((answerArg) => !answerArg.replayed).length, 1);
    assert.equal((await t.cloudly.store.get(probeKind, 'probe-concurrent'))?.generation, 2, 'exactly one write');
  });

  test('losing every compare-and-swap round is answered in the contract\'s shape; the decision\'s own refusals pass as they are', async () => {
    const { store } = t.cloudly;
    await store.insert(probeKind, { id: 'probe-busy', value: 0 });
    let decisions = 0;
    // Another writer lands between every read and its write (a real write on the same document).
    const busyStore = Object.create(store) as DocumentStore;
    busyStore.mutate = (kindArg, idArg, decideArg, optionsArg) => store.mutate(kindArg, idArg, async (currentArg) => {
      decisions++;
      const decision = await decideArg(currentArg);
      if (currentArg && decision.kind === 'write') {
        await store.swap(kindArg, idArg, currentArg.generation, { set: {} });
      }
      return decision;
    }, { ...optionsArg, rounds: 3 });
    const host = keepingHost(busyStore);
    registerOperations(host, [adminMutation({
      method: 'probeBusy',
      access: 'write',
      input: { required: { id: isIdString, value: isNonNegativeInteger, expectedGeneration: isNonNegativeInteger } },
      refusals: { conflict: () => contractRefusal('The probe kept changing.', { code: 'probe-kept-changing', retryable: true }) },
      target: (request: IProbeRequest) => ({ kind: probeKind, id: request.id }),
      decide: (current: IProbe | null, { request }: { request: IProbeRequest }) => (current && request.expectedGeneration <= current.generation
        ? { kind: 'write', change: { set: { value: request.value } } }
        : { kind: 'refuse', refusal: refuse('conflict', ['probe-ahead']) }),
      answer: ({ doc }: { doc: IProbe | null }) => ({ value: doc!.value }),
    } as never)]);
    assert.deepEqual(await refusalOf(() => host.call('probeBusy', { id: 'probe-busy', value: 5, expectedGeneration: 0 })), { code: 'probe-kept-changing', retryable: true });
    assert.equal(decisions, 3, 'every round was decided and lost');
    assert.notEqual((await store.get(probeKind, 'probe-busy'))?.value, 5);
    assert.deepEqual(await refusalOf(() => host.call('probeBusy', { id: 'probe-busy', value: 5, expectedGeneration: 99 })),
      { code: 'conflict', retryable: true, reasons: ['probe-ahead'] });
  });

  test('a parse reads the contract value once into the request every step sees; its and the checks\' reasons take the contract\'s shape', async () => {
    const host = keepingHost(t.cloudly.store);
    let parses = 0;
    const seen: unknown[] = [];
    registerOperations(host, [adminMutation({
      method: 'probeParsed',
      access: 'write',
      input: { required: { id: isIdString, value: isNonNegativeInteger, expectedGeneration: isNonNegativeInteger } },
      parse: (request: IProbeRequest) => {
        parses++;
        return request.value > 100 ? { problems: [invalidField('request.value', 'must be at most 100')] } : { request: { ...request, value: request.value * 2 } };
      },
      check: (request: IProbeRequest) => (request.value === 0 ? [invalidField('request.value', 'must not be 0')] : []),
      refusals: { invalid: (problems: IFieldProblem[]) => contractRefusal('The probe is invalid.', { code: 'probe-invalid', retryable: false, reasons: problems.map(sentenceOfProblem) }) },
      target: (request: IProbeRequest) => ({ kind: probeKind, id: request.id }),
      decide: (current: IProbe | null, { request }: { request: IProbeRequest }) => {
        seen.push(request.value);
        return current ? { kind: 'write', change: { set: { value: request.value } } } : { kind: 'create', doc: { id: request.id, value: request.value } };
      },
      answer: ({ doc }: { doc: IProbe | null }) => ({ value: doc!.value }),
    } as never)]);
    assert.deepEqual(await host.call('probeParsed', { id: 'probe-parsed', value: 21, expectedGeneration: 0 }), { value: 42 });
    assert.equal(parses, 1);
    assert.deepEqual(seen, [42]);
    assert.deepEqual(await refusalOf(() => host.call('probeParsed', { id: 'probe-parsed', value: 101, expectedGeneration: 0 })),
      { code: 'probe-invalid', retryable: false, reasons: ['request.value must be at most 100'] });
    assert.deepEqual(await refusalOf(() => host.call('probeParsed', { id: 'probe-parsed', value: 0, expectedGeneration: 0 })),
      { code: 'probe-invalid', retryable: false, reasons: ['request.value must not be 0'] });
    // The shape is still the catalogue's own refusal: the contract's shape is for its values.
    assertFieldProblems(await refusalOf(() => host.call('probeParsed', { id: 'probe-parsed', value: -1 })), [
      ['request.value', 'field-invalid', 'must be a non-negative integer'],
      ['request.expectedGeneration', 'field-required', 'is required'],
    ]);
    assert.deepEqual(seen, [42], 'no refused request reached the decision');
  });
});
