import { randomUUID } from 'node:crypto';
import { TypedResponseError } from '@api.global/typedrequest';
import type { Cloudly } from '../classes.cloudly.js';
import { contractRefusal, isRefusal, readCloudlyErrorData, refuse, refuseNamed } from '../core/errors.js';
import { defaultUpdateRounds, defineDocumentKind, type IMutateResult, type IStoredDocument } from '../core/store.js';
import { failpoint } from '../core/failpoints.js';
import { describedCheck, fieldProblem, fieldProblemReasons, integerSchema, invalidField, isAnyValue, isIdString, isNonNegativeInteger, problemsOfSentences, refuseFields, sentenceCheck, stringSchema, type TFieldCheck } from '../core/validation.js';
import { adminMutation, adminOrchestration, adminQuery, registerOperations, relayOrchestration } from '../core/operations.js';
import { decidePlatformBindingDeletion } from './decide.js';
import { canonicalizeJson } from '../interfaces/private/canonicaljson.js';
import { isSha256Hex, sha256HexPattern } from '../interfaces/private/dataproperties.js';
import {
  compareCorestoreLegacyResourceSelections,
  computeClusterCorestoreLegacyResourceInventorySha256,
  createCorestoreLegacyAdoptionErrorData,
  createCorestoreLegacyResourceAdoptionPlan,
  validateClusterCorestoreLegacyResourceInventory,
  validateCorestoreLegacyResourceSelections,
  type ICorestoreLegacyResourceSelection,
  type TClusterCorestoreLegacyResourceInventory,
  type TCorestoreLegacyAdoptionErrorCode,
} from '../interfaces/data/corestorelegacy.js';
import {
  isPlatformBindingStatus,
  validatePlatformBindingStatusReason,
  validatePlatformBindingUpsert,
  type IPlatformBinding,
  type IPlatformBindingUpsert,
  type TPlatformBindingStatus,
  type TPlatformBindingStatusReason,
} from '../interfaces/data/platformbinding.js';
import type { IReq_Any_Cloudly_AdoptCorestoreLegacyResources } from '../interfaces/requests/corestore.js';
import { decideCorestoreLegacyAdoption, derivePlatformBindingId } from './adoption.js';
import type { ICorestoreDirectory } from './directory.js';
import { requireValidRelayAnswer } from '../core/relaycalls.js';
import { nextCursorMember, pageOf, pageShape } from '../core/pagination.js';

/**
 * Platform bindings and the adoption of Corestore legacy resources.
 *
 * Creating bindings is the one change here that spans documents: an adoption creates several at
 * once and no reader may see some of them without the others. Every creation therefore commits by
 * one compare-and-swap on a single ledger document that records the whole operation (each binding,
 * with its id). Afterwards the bindings are inserted idempotently under those ids and the ledger is
 * cleared ("rolled forward"); whoever finds a pending operation (the adopter, any reader, start-up)
 * finishes it first. Because every creation passes through the ledger's generation, a decision
 * read at generation g and committed at g saw every binding that exists, so two racing adoptions
 * cannot both create the same binding.
 */

export const platformBindingKind = defineDocumentKind<IPlatformBinding>('CloudlyPlatformBinding');

/** One committed creation of bindings, as the ledger records it until it is applied. */
export interface IPlatformBindingCreationOperation {
  operationId: string;
  kind: 'adoption' | 'upsert';
  committedAt: number;
  /** Every binding the operation creates, with its final id and content. */
  bindings: IPlatformBinding[];
}

export interface IPlatformBindingCreationLedger extends IStoredDocument {
  pending: IPlatformBindingCreationOperation | null;
  lastAppliedOperationId: string | null;
}

type TBindingFilter = { serviceId?: string | { $in: string[] }; id?: string };

/** Whether a binding matches one of the filters `readBindings` is asked with. */
const matchesBindingFilter = (bindingArg: IPlatformBinding, filterArg: TBindingFilter): boolean => {
  if (filterArg.id !== undefined && bindingArg.id !== filterArg.id) {
    return false;
  }
  const serviceFilter = filterArg.serviceId;
  if (serviceFilter === undefined) {
    return true;
  }
  return typeof serviceFilter === 'string' ? bindingArg.serviceId === serviceFilter : serviceFilter.$in.includes(bindingArg.serviceId);
};

export const platformBindingCreationLedgerKind =
  defineDocumentKind<IPlatformBindingCreationLedger>('CloudlyPlatformBindingCreationLedger');
const ledgerId = 'platform-binding-creations';

/**
 * The rounds of a ledger write, and of a consistent read of bindings: twice the store's one
 * budget, because every creation of a binding in this Cloudly, for any service, moves the same
 * single ledger document, so its writers contend far more than those of one service's document.
 */
const ledgerRounds = 2 * defaultUpdateRounds;

const isSha256Field: TFieldCheck = describedCheck(stringSchema(64, 64, sha256HexPattern), (valueArg, pathArg) =>
  isSha256Hex(valueArg) ? [] : [invalidField(pathArg, `must be a lowercase hex sha256`)]);

const isExpectedGeneration: TFieldCheck = describedCheck({ anyOf: [{ type: 'null' }, integerSchema(1)] }, (valueArg, pathArg) =>
  valueArg === null || (Number.isSafeInteger(valueArg) && (valueArg as number) >= 1)
    ? []
    : [invalidField(pathArg, `must be null (create) or the positive generation the caller read`)]);

const adoptionRefusal = (codeArg: TCorestoreLegacyAdoptionErrorCode, textArg: string): TypedResponseError =>
  contractRefusal(textArg, createCorestoreLegacyAdoptionErrorData(codeArg));

/** Bindings in the plan's order: by service, then capability. */
const compareBindings = compareCorestoreLegacyResourceSelections;

type TReachableInventory = Extract<TClusterCorestoreLegacyResourceInventory, { reachable: true }>;

export class CorestoreManager {
  /**
   * `directory` is the manager's declared port to the cluster and service domains (where nodes
   * and services are looked up); the composition root (ts/classes.cloudly.ts) wires it.
   */
  constructor(private readonly cloudly: Cloudly, private readonly directory: ICorestoreDirectory) {
    registerOperations(cloudly, [
      adminQuery({
        method: 'getCorestoreLegacyResources',
        access: 'read',
        input: { required: { clusterId: isIdString, nodeId: isIdString } },
        run: async (request) => {
          await this.requireNodeOfCluster(request.clusterId, request.nodeId);
          const inventory = await this.readInventory(request.clusterId, request.nodeId);
          return { inventory, inventorySha256: computeClusterCorestoreLegacyResourceInventorySha256(inventory) };
        },
      }),
      adminOrchestration({
        method: 'adoptCorestoreLegacyResources',
        why: 'reads the node\'s legacy inventory through the relay, then creates every adopting binding through the creation ledger',
        access: 'write',
        input: {
          required: {
            clusterId: isIdString,
            nodeId: isIdString,
            expectedInventorySha256: isSha256Field,
            resources: sentenceCheck(validateCorestoreLegacyResourceSelections),
          },
        },
        run: async (request, context) => {
          const answer = await this.adopt(request.clusterId, request.nodeId, request.expectedInventorySha256, request.resources);
          this.cloudly.logger.info(
            { clusterId: request.clusterId, nodeId: request.nodeId, actor: context.identity.userId, bindings: answer.platformBindings.length },
            'corestore legacy resources adopted',
          );
          return answer;
        },
      }),
      // Through the creation ledger (several documents, rolled forward after a crash): an orchestration.
      adminOrchestration({
        method: 'upsertPlatformBinding',
        why: 'a creation goes through the creation ledger (the ledger and the binding, rolled forward after a crash)',
        access: 'write',
        input: {
          required: {
            platformBinding: sentenceCheck(validatePlatformBindingUpsert),
            expectedGeneration: isExpectedGeneration,
          },
        },
        run: async (request) => ({ platformBinding: await this.upsert(request.platformBinding, request.expectedGeneration) }),
      }),
      adminQuery({
        method: 'getPlatformBindings',
        access: 'read',
        input: { required: {}, optional: { serviceId: isIdString, ...pageShape('getPlatformBindings') } },
        run: async (request) => {
          const bindings = await this.readBindings(request.serviceId === undefined ? {} : { serviceId: request.serviceId });
          const page = pageOf('getPlatformBindings', bindings.sort(compareBindings), (bindingArg) => bindingArg.id, request);
          return { platformBindings: page.items, ...nextCursorMember(page) };
        },
      }),
      adminMutation({
        method: 'deletePlatformBinding',
        access: 'write',
        input: { required: { platformBindingId: isIdString, expectedGeneration: isNonNegativeInteger } },
        // A creation still pending in the ledger is applied first, so the binding removed here is never created again by it.
        facts: () => this.rollForward(),
        target: (request) => ({ kind: platformBindingKind, id: request.platformBindingId }),
        decide: (current, { request }) => decidePlatformBindingDeletion(current, request.platformBindingId, request.expectedGeneration),
        // The binding as it was when its removal committed.
        answer: ({ previous }) => ({ platformBinding: previous! }),
        after: (_outcome, { request }, context) => {
          this.cloudly.logger.info({ platformBindingId: request.platformBindingId, actor: context.identity.userId }, 'platform binding deleted');
        },
      }),
      relayOrchestration({
        method: 'updatePlatformBindingStatus',
        why: 'rolls the binding creation ledger forward first (several documents), then decides on the binding with its service\'s cluster',
        access: 'relay',
        input: { required: { platformBindingId: isIdString, status: isAnyValue }, optional: { statusReason: isAnyValue } },
        check: (request) => {
          const problems = problemsOfSentences(validatePlatformBindingStatusReason(request.status, request.statusReason, 'request'), 'request');
          return problems.length === 0 && !isPlatformBindingStatus(request.status)
            ? [fieldProblem('request.status', fieldProblemReasons.notSupported, 'is not a platform binding status')]
            : problems;
        },
        run: async (request, context) => ({
          platformBinding: await this.updateStatus(context.clusterId, request.platformBindingId, request.status, request.statusReason ?? null),
        }),
      }),
    ]);
  }

  /** Finishes a creation that was committed but not applied before the last stop. */
  public async start(): Promise<void> {
    const ledger = (await this.rollForward()).doc!;
    if (ledger.lastAppliedOperationId) {
      this.cloudly.logger.info({ operationId: ledger.lastAppliedOperationId }, 'platform binding creations are applied');
    }
  }

  // ---- reads other managers may use ----

  /** Every binding matching the filter; a committed creation whole (readBindings). */
  public async getPlatformBindings(filterArg: { serviceId?: string } = {}): Promise<IPlatformBinding[]> {
    return (await this.readBindings(filterArg)).sort(compareBindings);
  }

  /** The bindings of the listed services, in one read (the reconciler judges a cluster's services at once). */
  public async getPlatformBindingsOfServices(serviceIdsArg: string[]): Promise<IPlatformBinding[]> {
    return this.readBindings({ serviceId: { $in: serviceIdsArg } });
  }

  /** True while a binding of the service reports `legacy-adoption-pending` (runtime status waits on it). */
  public async isLegacyAdoptionPending(serviceIdArg: string): Promise<boolean> {
    const bindings = await this.readBindings({ serviceId: serviceIdArg });
    return bindings.some((binding) => binding.statusReason === 'legacy-adoption-pending');
  }

  // ---- the ledger ----

  /** Inserts an operation's bindings; each id is inserted once, so any number of callers may do it. */
  private async applyCreation(operationArg: IPlatformBindingCreationOperation): Promise<void> {
    await failpoint('corestore.beforeApplyCreation');
    for (const binding of operationArg.bindings) {
      await this.cloudly.store.insert(platformBindingKind, binding);
    }
  }

  /**
   * Applies the pending creation, if any, and returns the ledger with nothing pending (created
   * empty on first use). Safe to run from any number of callers at once: each insert happens once
   * per id, and clearing is decided on the ledger as read.
   */
  private async rollForward(): Promise<IMutateResult<IPlatformBindingCreationLedger>> {
    return this.cloudly.store.mutate(platformBindingCreationLedgerKind, ledgerId, async (ledgerArg) => {
      if (!ledgerArg) {
        return { kind: 'create', doc: { id: ledgerId, pending: null, lastAppliedOperationId: null } };
      }
      if (!ledgerArg.pending) {
        return { kind: 'keep' };
      }
      await this.applyCreation(ledgerArg.pending);
      return { kind: 'write', change: { set: { pending: null, lastAppliedOperationId: ledgerArg.pending.operationId } } };
    }, { rounds: ledgerRounds });
  }

  /**
   * Reads bindings so that a creation is seen whole or not at all, without writing: the read is
   * accepted only when the ledger did not move during it, and the bindings of a creation still
   * pending there (committed, not all inserted yet) are answered as the creation states them, so
   * a creation is seen whole from its commit on. (They used to be left out until it was applied,
   * which let a verdict judged between the last insert and the ledger's clearing miss them: the
   * ledger is no input of the verdict, so nothing judged it again.) The creation's own caller, or
   * the binding ledger controller after a crash, inserts them (./bindingledger.controller.ts).
   */
  private async readBindings(filterArg: TBindingFilter): Promise<IPlatformBinding[]> {
    for (let attempt = 0; attempt < ledgerRounds; attempt++) {
      const before = await this.cloudly.store.get(platformBindingCreationLedgerKind, ledgerId);
      const bindings = await this.cloudly.store.find(platformBindingKind, filterArg);
      const after = await this.cloudly.store.get(platformBindingCreationLedgerKind, ledgerId);
      if ((after?.generation ?? 0) === (before?.generation ?? 0)) {
        // A committed creation is read whole at once: the bindings it has not inserted yet are
        // added as the creation states them (inserting never changes one, and it is always applied).
        const found = new Set(bindings.map((bindingArg) => bindingArg.id));
        const pending = (after?.pending?.bindings ?? []).filter((bindingArg) => !found.has(bindingArg.id) && matchesBindingFilter(bindingArg, filterArg));
        return pending.length === 0 ? bindings : [...bindings, ...pending];
      }
    }
    throw refuseNamed('unavailable', 'kept-changing', 'platform bindings are being created too fast to read consistently; try again');
  }

  /** Applies a committed creation that is still pending (the binding ledger controller's step); says whether there was one. */
  public async applyPendingCreation(): Promise<boolean> {
    const { outcome } = await this.rollForward();
    return outcome !== 'kept';
  }

  private async readBinding(bindingIdArg: string): Promise<IPlatformBinding | null> {
    return (await this.readBindings({ id: bindingIdArg }))[0] ?? null;
  }

  /**
   * Commits one creation: `decideArg` runs on the ledger state it is given, and its bindings are
   * committed only if the ledger has not moved since. A creation still pending there is applied
   * first, so the decision's plain reads see every binding that exists, and the new operation
   * replaces it in the same write. Returns the decision's result once the creation is applied.
   */
  private async commitCreation<TResult>(
    kindArg: IPlatformBindingCreationOperation['kind'],
    decideArg: () => Promise<{ toCreate: IPlatformBinding[]; result: TResult }>,
  ): Promise<TResult> {
    // What the last decision concluded; the decider runs again on every lost race.
    let decided: { result: TResult; operation: IPlatformBindingCreationOperation | null } | null = null;
    await this.cloudly.store.mutate(platformBindingCreationLedgerKind, ledgerId, async (ledgerArg) => {
      const applied = ledgerArg?.pending ?? null;
      if (applied) {
        await this.applyCreation(applied);
      }
      const decision = await decideArg();
      const operation: IPlatformBindingCreationOperation | null = decision.toCreate.length === 0 ? null : {
        operationId: `op-${randomUUID()}`,
        kind: kindArg,
        committedAt: Date.now(),
        bindings: decision.toCreate,
      };
      decided = { result: decision.result, operation };
      const lastAppliedOperationId = applied?.operationId ?? ledgerArg?.lastAppliedOperationId ?? null;
      if (!ledgerArg) {
        return operation ? { kind: 'create', doc: { id: ledgerId, pending: operation, lastAppliedOperationId } } : { kind: 'keep' };
      }
      if (!operation) {
        return applied ? { kind: 'write', change: { set: { pending: null, lastAppliedOperationId } } } : { kind: 'keep' };
      }
      return { kind: 'write', change: { set: { pending: operation, lastAppliedOperationId } } };
    }, { rounds: ledgerRounds });
    const { result, operation } = decided!;
    if (operation) {
      // A process that dies here has committed the creation and not applied it: start-up does.
      await failpoint('corestore.afterCreationCommit');
      await this.rollForward();
    }
    return result;
  }

  // ---- nodes, services and inventories ----

  /** The selected services that Cloudly knows on this cluster; one on another cluster is absent here. */
  private async findServiceIdsOfCluster(clusterIdArg: string, serviceIdsArg: string[]): Promise<Set<string>> {
    const services = await this.directory.findServices(serviceIdsArg);
    return new Set([...services.values()].filter((service) => service.clusterId === clusterIdArg).map((service) => service.id));
  }

  private async requireNodeOfCluster(clusterIdArg: string, nodeIdArg: string): Promise<void> {
    await this.cloudly.clusterManager.requireCluster(clusterIdArg);
    if (!(await this.directory.hasNode(clusterIdArg, nodeIdArg))) {
      throw refuseNamed('not-found', 'node-not-found', `node ${nodeIdArg} is not a node of cluster ${clusterIdArg}`);
    }
  }

  /**
   * Asks the cluster's relay for one node's inventory and checks the answer. A relay that cannot
   * be reached or refuses is `unavailable` by the one relay-call mapping (relaycalls.ts); an answer
   * that does not match the contract is `unavailable` `relay-answer-invalid`, naming each member.
   */
  private async readInventory(clusterIdArg: string, nodeIdArg: string): Promise<TClusterCorestoreLegacyResourceInventory> {
    const answer = await this.cloudly.relays.ask(clusterIdArg, 'getClusterCorestoreLegacyResources', { nodeId: nodeIdArg });
    const reasons = validateClusterCorestoreLegacyResourceInventory(answer, 'answer');
    const inventory = answer as TClusterCorestoreLegacyResourceInventory;
    if (reasons.length === 0 && inventory.nodeId !== nodeIdArg) {
      reasons.push(`answer.nodeId names node ${inventory.nodeId}, not ${nodeIdArg}`);
    }
    requireValidRelayAnswer(reasons);
    return inventory;
  }

  // ---- adoption ----

  private async adopt(
    clusterIdArg: string,
    nodeIdArg: string,
    expectedInventorySha256Arg: string,
    selectionsArg: ICorestoreLegacyResourceSelection[],
  ): Promise<IReq_Any_Cloudly_AdoptCorestoreLegacyResources['response']> {
    await this.requireNodeOfCluster(clusterIdArg, nodeIdArg);
    let inventory: TClusterCorestoreLegacyResourceInventory;
    try {
      inventory = await this.readInventory(clusterIdArg, nodeIdArg);
    } catch (error) {
      const reasons = isRefusal(error) ? readCloudlyErrorData(error.errorData)?.reasons ?? [] : [];
      throw adoptionRefusal('legacy-inventory-unreachable', `The inventory of node ${nodeIdArg} could not be read (${reasons.join(', ') || 'relay failed'}).`);
    }
    if (inventory.reachable !== true) {
      throw adoptionRefusal('legacy-inventory-unreachable', `The relay could not reach the Corestore of node ${nodeIdArg} (${inventory.errorCode}).`);
    }
    const reachable: TReachableInventory = inventory;
    const inventorySha256 = computeClusterCorestoreLegacyResourceInventorySha256(reachable)!;
    if (inventorySha256 !== expectedInventorySha256Arg) {
      throw adoptionRefusal('legacy-inventory-changed', `The inventory of node ${nodeIdArg} changed since it was read; read it again.`);
    }
    const bindingIds = selectionsArg.map((selection) => derivePlatformBindingId(selection.serviceId, selection.capability));
    const platformBindings = await this.commitCreation('adoption', async () => {
      // The ledger has nothing pending here, so plain reads see every binding that exists.
      const existing = await this.cloudly.store.find(platformBindingKind, { id: { $in: bindingIds } });
      const decision = decideCorestoreLegacyAdoption({
        nodeId: nodeIdArg,
        inventory: reachable,
        inventorySha256,
        selections: selectionsArg,
        knownServiceIds: await this.findServiceIdsOfCluster(clusterIdArg, selectionsArg.map((selection) => selection.serviceId)),
        existingBindings: new Map(existing.map((binding) => [binding.id, binding])),
      });
      if (decision.kind === 'refused') {
        const named = decision.details
          .filter((detail) => detail.code === decision.code)
          .map((detail) => `${detail.serviceId}/${detail.capability}`);
        throw adoptionRefusal(decision.code, `The adoption was refused (${decision.code}: ${named.join(', ')}).`);
      }
      return { toCreate: decision.toCreate, result: decision.bindings };
    });
    return { platformBindings, plan: createCorestoreLegacyResourceAdoptionPlan(platformBindings) };
  }

  // ---- upsert and status ----

  private async upsert(upsertArg: IPlatformBindingUpsert, expectedGenerationArg: number | null): Promise<IPlatformBinding> {
    const service = (await this.directory.findServices([upsertArg.serviceId])).get(upsertArg.serviceId);
    if (!service) {
      throw refuseNamed('not-found', 'service-not-found', `service ${upsertArg.serviceId} does not exist`);
    }
    if (upsertArg.nodeId !== null && !(await this.directory.hasNode(service.clusterId, upsertArg.nodeId))) {
      throw refuseNamed('not-found', 'node-not-found', `node ${upsertArg.nodeId} is not a node of the service's cluster ${service.clusterId}`);
    }
    const bindingId = derivePlatformBindingId(upsertArg.serviceId, upsertArg.capability);
    if (expectedGenerationArg === null) {
      return this.commitCreation('upsert', async () => {
        if (await this.cloudly.store.get(platformBindingKind, bindingId)) {
          throw refuseNamed('conflict', 'platform-binding-exists', `service ${upsertArg.serviceId} already has a ${upsertArg.capability} binding; update it with its generation`);
        }
        const binding: IPlatformBinding = {
          id: bindingId,
          serviceId: upsertArg.serviceId,
          capability: upsertArg.capability,
          enabled: upsertArg.enabled,
          nodeId: upsertArg.nodeId,
          status: 'pending',
          statusReason: null,
          generation: 1,
        };
        if (upsertArg.objectstorageRetention !== undefined) {
          binding.objectstorageRetention = { intent: { ...upsertArg.objectstorageRetention.intent } };
        }
        return { toCreate: [binding], result: binding };
      });
    }
    const current = await this.readBinding(bindingId);
    if (!current) {
      throw refuseNamed('not-found', 'platform-binding-not-found', `service ${upsertArg.serviceId} has no ${upsertArg.capability} binding`);
    }
    if (current.generation !== expectedGenerationArg) {
      throw refuseNamed('conflict', 'generation-mismatch', `${expectedGenerationArg} is not the binding's generation ${current.generation}`, 'request.expectedGeneration');
    }
    const adoption = current.corestoreLegacyAdoption;
    if (adoption) {
      // An adopting binding is what Corestore's plan authorizes: its node and retention are fixed.
      const reasons: string[] = [];
      if (upsertArg.nodeId !== adoption.nodeId) {
        reasons.push(`request.platformBinding.nodeId must stay ${adoption.nodeId}: the binding adopts a legacy resource there`);
      }
      const sameRetention = canonicalizeJson(upsertArg.objectstorageRetention ?? null) === canonicalizeJson(current.objectstorageRetention ?? null);
      if (!sameRetention) {
        reasons.push('request.platformBinding.objectstorageRetention must stay as adopted from the legacy bucket');
      }
      if (reasons.length > 0) {
        throw refuseFields(problemsOfSentences(reasons, 'request'));
      }
    }
    const set: Partial<IPlatformBinding> = { enabled: upsertArg.enabled, nodeId: upsertArg.nodeId };
    const unset: Array<'objectstorageRetention'> = [];
    if (upsertArg.objectstorageRetention !== undefined) {
      set.objectstorageRetention = { intent: { ...upsertArg.objectstorageRetention.intent } };
    } else if (current.objectstorageRetention !== undefined) {
      unset.push('objectstorageRetention');
    }
    const next = await this.cloudly.store.swap(platformBindingKind, bindingId, expectedGenerationArg, { set, unset });
    if (!next) {
      throw refuseNamed('conflict', 'generation-mismatch', 'the binding changed since it was read', 'request.expectedGeneration');
    }
    return next;
  }

  private async updateStatus(
    clusterIdArg: string,
    bindingIdArg: string,
    statusArg: TPlatformBindingStatus,
    statusReasonArg: TPlatformBindingStatusReason | null,
  ): Promise<IPlatformBinding> {
    // Any creation committed so far is applied first, so a binding that exists is found by id.
    await this.rollForward();
    const { doc } = await this.cloudly.store.mutate(platformBindingKind, bindingIdArg, async (currentArg) => {
      if (!currentArg) {
        return { kind: 'refuse', refusal: refuseNamed('not-found', 'platform-binding-not-found', `platform binding ${bindingIdArg} does not exist`) };
      }
      // A binding's node lives in its service's cluster; only that cluster's relay reports on it.
      const service = (await this.directory.findServices([currentArg.serviceId])).get(currentArg.serviceId);
      if (currentArg.nodeId === null || !service || service.clusterId !== clusterIdArg) {
        return { kind: 'refuse', refusal: refuseNamed('forbidden', 'platform-binding-not-on-cluster', `platform binding ${bindingIdArg} is not placed on a node of this relay's cluster`) };
      }
      if (currentArg.status === statusArg && currentArg.statusReason === statusReasonArg) {
        return { kind: 'keep' };
      }
      return { kind: 'write', change: { set: { status: statusArg, statusReason: statusReasonArg } } };
    });
    return doc!;
  }
}
