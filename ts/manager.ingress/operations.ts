import { randomBytes, randomUUID } from 'node:crypto';
import { contractRefusal, mutationIdReusedRefusal, refuse, refuseNamed } from '../core/errors.js';
import type { TCloudlyLogger } from '../core/logger.js';
import {
  adminMutation,
  adminQuery,
  relayMutation,
  relayQuery,
  type IDeclaredOperation,
  type IRelayHandlerContext,
  type TRecordedDecision,
} from '../core/operations.js';
import type { DocumentStore } from '../core/store.js';
import type { IEncryptedSecretValue } from '../core/secretbox.js';
import { failpoint } from '../core/failpoints.js';
import { describedCheck, fieldProblem, fieldProblemReasons, integerSchema, invalidField, isAnyValue, isIdString, isString, problemsOfSentences, type IFieldProblem, type TFieldCheck } from '../core/validation.js';
import { clusterNodeDocumentId } from '../manager.cluster/clusternodes.js';
import { relayNotElectedReason } from '../manager.cluster/relayelection.js';
import {
  clusterIngressProtocolOffer,
  type IClusterIngressRouteTable,
} from '../interfaces/data/clusteringress.js';
import {
  type IClusterIngressDesignation,
  type IClusterIngressDesignationRequest,
  snapshotClusterIngressDesignationRequest,
} from '../interfaces/data/clusteringressdesignation.js';
import type { IClusterRuntimeReference } from '../interfaces/data/clusterruntime.js';
import { validateRuntimeAssignmentStatus } from '../interfaces/data/runtimeassignment.js';
import type { ISealedSecret, ISealedSecretBinding } from '../interfaces/data/secret.js';
import { computeCanonicalJsonSha256Hex } from '../interfaces/private/canonicaljson.js';
import { isCanonicalId, isCounter, isRecord, readExactDataRecord } from '../interfaces/private/dataproperties.js';
import { readOwnDataValue } from '../interfaces/private/ownproperties.js';
import type { IIngressDependencies } from './dependencies.js';
import {
  clusterIngressRouteTableKind,
  clusterIngressSlotKind,
  type IClusterIngressRouteTableDocument,
  type IClusterIngressSlotDocument,
  type IStoredBearer,
  type IStoredDesignationAnswer,
  nodeRuntimeAssignmentsKind,
} from './documents.js';
import { clusterIngressTag, emptyClusterIngressSlot, decideAssignmentReport, decideDesignation, decideDesignationCommit, type IDesignationFacts } from './decide.js';
import type { IService } from '../interfaces/data/service.js';
import { type IClusterIngressJudgedGenerations, type IClusterIngressRegistrationFacts, judgeClusterIngressRegistration } from './judge.js';

/**
 * The ingress domain's methods as declared operations (ts/core/operations.ts runs them): the
 * designation, the cluster runtime, the route table, node assignment reports, the registration
 * judge and the bearer. Pure decisions are in ./decide.ts and ./judge.ts; what the domain needs
 * from elsewhere comes through `IIngressPorts`.
 */

/** Bytes of randomness in a generated ingress bearer (256 bits). */
export const clusterIngressBearerBytes = 32;
/** Most assignments one node report may state. Project's own limit. */
export const maximumReportedAssignments = 256;

/** The shape of one node's assignment report, for `reportClusterNodeRuntimeAssignments` and the observed-state report's `nodes`. */
export const nodeAssignmentReportShape: Record<'nodeId' | 'sessionId' | 'assignments', TFieldCheck> = {
  nodeId: isIdString,
  sessionId: isIdString,
  assignments: (valueArg, pathArg) => {
    if (!Array.isArray(valueArg) || valueArg.length > maximumReportedAssignments) {
      const reason = Array.isArray(valueArg) ? fieldProblemReasons.tooMany : fieldProblemReasons.invalid;
      return [fieldProblem(pathArg, reason, `must be an array of at most ${maximumReportedAssignments} assignments`)];
    }
    return valueArg.flatMap((item, index) => problemsOfSentences(validateRuntimeAssignmentStatus(item, `${pathArg}[${index}]`), `${pathArg}[${index}]`));
  },
};

const registrationRefusalText = 'The cluster ingress registration was refused.';
const protocolRefusalText = 'The protocol offer was refused.';

const isSecretVersionReference: TFieldCheck = (valueArg, pathArg) => {
  const reference = readExactDataRecord(valueArg, ['secretId', 'secretVersionId']);
  return reference !== null && isCanonicalId(readOwnDataValue(reference, 'secretId'))
    && isCanonicalId(readOwnDataValue(reference, 'secretVersionId'))
    ? []
    : [invalidField(pathArg, `must be exactly { secretId, secretVersionId } with two ids`)];
};

const isRevisionOrNull: TFieldCheck = describedCheck({ anyOf: [{ type: 'null' }, integerSchema(0)] }, (valueArg, pathArg) =>
  valueArg === null || isCounter(valueArg) ? [] : [invalidField(pathArg, `must be null or a non-negative integer`)]);

/**
 * Explains why a designation request does not snapshot, member by member; the snapshot itself
 * only says that it failed.
 */
const describeDesignationRequest = (valueArg: unknown, pathArg: string): IFieldProblem[] => {
  if (!isRecord(valueArg)) {
    return [invalidField(pathArg, `must be an object`)];
  }
  const reasons: IFieldProblem[] = [];
  const members = ['mutationId', 'clusterId', 'ingressServiceId', 'currentRuntime', 'expectedSpecRevision', 'expectedDesignation'];
  for (const key of Object.keys(valueArg)) {
    if (!members.includes(key)) {
      reasons.push(fieldProblem(`${pathArg}.${key}`, fieldProblemReasons.unknown, `is not a member of a designation request`));
    }
  }
  for (const key of ['mutationId', 'clusterId', 'ingressServiceId']) {
    if (!isCanonicalId(readOwnDataValue(valueArg, key))) {
      reasons.push(invalidField(`${pathArg}.${key}`, `must be an id`));
    }
  }
  const runtime = readOwnDataValue(valueArg, 'currentRuntime');
  if (
    !isRecord(runtime) || Object.keys(runtime).length !== 3
    || readOwnDataValue(runtime, 'id') !== readOwnDataValue(valueArg, 'clusterId')
    || readOwnDataValue(runtime, 'phase') !== 'pallet'
    || !Number.isSafeInteger(readOwnDataValue(runtime, 'generation'))
    || (readOwnDataValue(runtime, 'generation') as number) < 1
  ) {
    reasons.push(invalidField(`${pathArg}.currentRuntime`, `must be { id, phase: 'pallet', generation } of the named cluster`));
  }
  if (!isCounter(readOwnDataValue(valueArg, 'expectedSpecRevision'))) {
    reasons.push(invalidField(`${pathArg}.expectedSpecRevision`, `must be a non-negative integer`));
  }
  const expected = readOwnDataValue(valueArg, 'expectedDesignation');
  if (expected !== null) {
    const valid = isRecord(expected) && Object.keys(expected).length === 3
      && isCanonicalId(readOwnDataValue(expected, 'id'))
      && Number.isSafeInteger(readOwnDataValue(expected, 'generation'))
      && (readOwnDataValue(expected, 'generation') as number) >= 1
      && /^[0-9a-f]{64}$/.test(String(readOwnDataValue(expected, 'digest')));
    if (!valid) {
      reasons.push(invalidField(`${pathArg}.expectedDesignation`, `must be null or { id, generation, digest }`));
    }
  }
  return reasons.length > 0 ? reasons : [invalidField(pathArg, `must use the exact designation request schema`)];
};

/** The snapshot of a designation request, or every problem that keeps it from being one. */
const readDesignationRequest = (valueArg: unknown): { intent: IClusterIngressDesignationRequest } | { problems: IFieldProblem[] } => {
  try {
    return { intent: snapshotClusterIngressDesignationRequest(valueArg) };
  } catch {
    return { problems: describeDesignationRequest(valueArg, 'request.designation') };
  }
};

/** Where a bearer's ciphertext is stored: it decrypts there and nowhere else. */
export const ingressBearerContext = (clusterIdArg: string, secretVersionIdArg: string): string =>
  `CloudlyClusterIngressSlot/${clusterIdArg}/bearer/${secretVersionIdArg}`;

export const toRouteTable = (docArg: IClusterIngressRouteTableDocument): IClusterIngressRouteTable =>
  ({ clusterId: docArg.clusterId, revision: docArg.generation, routes: docArg.routes });

/** False for a table an administrator wrote with the retired `setClusterIngressRoutes` (routes without targets). */
export const isComputedRouteTable = (docArg: IClusterIngressRouteTableDocument): boolean =>
  docArg.routes.every((route) => Array.isArray((route as { targets?: unknown }).targets));

/** What the ingress operations need, wired by the manager from the composition root's parts. */
export interface IIngressPorts {
  store: DocumentStore;
  logger: TCloudlyLogger;
  /** The cluster and service domains' facts (./dependencies.ts). */
  needs: IIngressDependencies;
  /** Whether the domain runs and Cloudly serves: registrations are judged only then. */
  isReady(): boolean;
  /** The cluster's slot, created on first read. */
  readSlot(clusterIdArg: string): Promise<IClusterIngressSlotDocument>;
  /** Encrypts a bearer where it is stored (the slot, under its secret version). */
  encryptBearer(clusterIdArg: string, secretVersionIdArg: string, valueArg: string): IEncryptedSecretValue;
  /** The stored bearer's value; one that fails authentication is refused. */
  readBearer(clusterIdArg: string, bearerArg: IStoredBearer): string;
  /** Seals a value to the cluster's enrolled secret recipient (the secret domain). */
  sealToClusterRecipient(clusterIdArg: string, recipientIdArg: string | undefined, bindingArg: ISealedSecretBinding, valueArg: Uint8Array): Promise<ISealedSecret>;
}

const requireCluster = async (portsArg: IIngressPorts, clusterIdArg: string, pathArg: string): Promise<void> => {
  if (!(await portsArg.needs.clusterExists(clusterIdArg))) {
    throw refuseNamed('not-found', 'cluster-not-found', 'names no cluster', pathArg);
  }
};

/** A relay's report naming a node its cluster does not have (another cluster's, or none at all). */
const nodeOutsideCluster = () => refuseNamed('not-found', 'node-not-found', 'names no node of this relay\'s cluster', 'request.nodeId');

const requireElected = async (portsArg: IIngressPorts, contextArg: IRelayHandlerContext): Promise<void> => {
  if (!(await portsArg.needs.isElectedRelaySession(contextArg.session))) {
    throw refuse('unavailable', [relayNotElectedReason]);
  }
};

/** The cluster's Pallet ingress designation, or null (also when it holds a fleet-cutover one). */
export const readClusterIngressDesignation = async (storeArg: DocumentStore, clusterIdArg: string): Promise<IClusterIngressDesignation | null> => {
  const slot = await storeArg.get(clusterIngressSlotKind, clusterIdArg);
  return slot?.kind === 'pallet' ? slot.designation : null;
};

export const readClusterRuntimeReference = async (portsArg: Pick<IIngressPorts, 'readSlot'>, clusterIdArg: string): Promise<IClusterRuntimeReference> => {
  const { runtime } = await portsArg.readSlot(clusterIdArg);
  return { id: clusterIdArg, phase: runtime.phase, generation: runtime.generation };
};

/**
 * The cluster's runtime reference as stored, writing nothing: a cluster whose slot was never
 * created was born on Pallet at runtime generation 1, exactly what creating the slot would store.
 */
export const peekClusterRuntimeReference = async (storeArg: DocumentStore, clusterIdArg: string): Promise<IClusterRuntimeReference> => {
  const { runtime } = await storeArg.get(clusterIngressSlotKind, clusterIdArg) ?? emptyClusterIngressSlot(clusterIdArg);
  return { id: clusterIdArg, phase: runtime.phase, generation: runtime.generation };
};

// --- designation: replay → facts → pure decision → one write on the slot read ------------------

/** What a designation is decided on besides the request: read and minted once, before the write. */
interface IDesignationCallFacts {
  /** The cluster's slot as read before the service; the write commits only on this read. */
  slot: IClusterIngressSlotDocument | null;
  service: IService | null;
  relayOrigin: string | null;
  minted: IDesignationFacts['minted'];
  actorId: string;
}

const gatherDesignationFacts = async (
  portsArg: IIngressPorts,
  intentArg: IClusterIngressDesignationRequest,
  actorIdArg: string,
): Promise<IDesignationCallFacts> => {
  const clusterId = intentArg.clusterId;
  await requireCluster(portsArg, clusterId, 'request.designation.clusterId');
  // The runtime is read from the slot the designation commits to, so a phase change that lands
  // before the write moves the slot's generation and the write loses (`conflict`).
  const slot = await portsArg.store.get(clusterIngressSlotKind, clusterId);
  // The service is another domain's document and cannot join this write. An update of it that
  // lands between this read and the write is harmless: it reads nothing of the slot, so the
  // outcome equals designating first and updating after, and the designation names the exact
  // revision it prepared.
  await failpoint('ingress.designation.beforeServiceRead');
  const service = await portsArg.needs.getService(intentArg.ingressServiceId);
  const relayOrigin = await portsArg.needs.getRelayOrigin(clusterId);
  // This call's own randomness: the decision is a pure function of it.
  const tag = clusterIngressTag(clusterId);
  const secretVersion = { secretId: `ingress-bearer-${tag}`, secretVersionId: `ingress-bearer-${tag}-${randomUUID()}` };
  const bearerValue = randomBytes(clusterIngressBearerBytes).toString('base64url');
  return {
    slot,
    service,
    relayOrigin,
    minted: { secretVersion, bearer: { ...secretVersion, encryptedValue: portsArg.encryptBearer(clusterId, secretVersion.secretVersionId, bearerValue) } },
    actorId: actorIdArg,
  };
};

/** The designation's decision on the slot as it stands, with the answer a replay repeats. */
const decideDesignationWrite = (
  currentArg: IClusterIngressSlotDocument | null,
  intentArg: IClusterIngressDesignationRequest,
  factsArg: IDesignationCallFacts,
  nowArg: number,
): TRecordedDecision<IClusterIngressSlotDocument> => {
  const { decision, answer } = decideDesignation({
    ...factsArg, intent: intentArg, requestDigest: computeCanonicalJsonSha256Hex(intentArg), now: nowArg,
  });
  const committed = decision.kind === 'refuse' ? decision : decideDesignationCommit(currentArg, factsArg.slot, decision);
  return committed.kind === 'refuse' ? committed : { ...committed, record: answer };
};

// --- registration: facts → pure judge → re-read → judge again -----------------------------------

/** The generation of whichever designation the slot holds (Pallet or fleet-cutover), null for none. */
const heldDesignationGeneration = (slotArg: IClusterIngressSlotDocument | null): number | null => {
  if (slotArg?.kind === 'pallet') {
    return slotArg.designation?.generation ?? null;
  }
  return slotArg?.kind === 'fleet-cutover' ? slotArg.fleetCutover?.generation ?? null : null;
};

const readJudgedGenerations = async (
  portsArg: IIngressPorts,
  clusterIdArg: string,
  nodeIdArg: string | null,
): Promise<IClusterIngressJudgedGenerations> => {
  const [slot, nodeReport, nodeSessionId] = await Promise.all([
    portsArg.store.get(clusterIngressSlotKind, clusterIdArg),
    nodeIdArg ? portsArg.store.get(nodeRuntimeAssignmentsKind, clusterNodeDocumentId(clusterIdArg, nodeIdArg)) : null,
    nodeIdArg ? portsArg.needs.getNodeSessionId(clusterIdArg, nodeIdArg) : null,
  ]);
  return {
    designation: heldDesignationGeneration(slot),
    nodeReport: nodeReport?.generation ?? null,
    nodeSessionId: nodeSessionId ?? nodeReport?.sessionId ?? null,
  };
};

/** Gathers every fact the judge needs. The facts hold the bearer: they are never logged. */
const gatherRegistrationFacts = async (
  portsArg: IIngressPorts,
  bodyArg: unknown,
  contextArg: IRelayHandlerContext,
): Promise<IClusterIngressRegistrationFacts> => {
  const clusterId = contextArg.clusterId;
  const ready = portsArg.isReady();
  const nodeIdValue = isRecord(bodyArg) ? readOwnDataValue(bodyArg, 'nodeId') : undefined;
  const nodeId = isCanonicalId(nodeIdValue) ? nodeIdValue : null;
  const empty: IClusterIngressJudgedGenerations = { designation: null, nodeReport: null, nodeSessionId: null };
  const facts: IClusterIngressRegistrationFacts = {
    ownOffer: clusterIngressProtocolOffer,
    body: bodyArg,
    ready,
    relaySessionId: contextArg.session.id,
    electedRelaySessionId: null,
    designation: null,
    placementNodeIds: null,
    node: null,
    currentBearer: null,
    routeTableRevision: null,
    observed: empty,
    reread: empty,
  };
  if (!ready) {
    return facts;
  }
  const { store } = portsArg;
  const [elected, slot, nodeReport, nodeSessionId, table] = await Promise.all([
    portsArg.needs.isElectedRelaySession(contextArg.session),
    store.get(clusterIngressSlotKind, clusterId),
    nodeId ? store.get(nodeRuntimeAssignmentsKind, clusterNodeDocumentId(clusterId, nodeId)) : null,
    nodeId ? portsArg.needs.getNodeSessionId(clusterId, nodeId) : null,
    store.get(clusterIngressRouteTableKind, clusterId),
  ]);
  const designation = slot?.kind === 'pallet' ? slot.designation : null;
  // A cluster that came from a Swarm fleet holds a fleet-cutover designation instead: a designation
  // all the same (spec 001:392), judged by the same facts (its service, its credential).
  const fleetCutover = slot?.kind === 'fleet-cutover' ? slot.fleetCutover : null;
  const ingressServiceId = designation?.ingressServiceId ?? fleetCutover?.ingressServiceId ?? null;
  const credentialVersion = designation?.credential.secretVersion ?? fleetCutover?.credential?.secretVersion ?? null;
  const service = ingressServiceId ? await portsArg.needs.getService(ingressServiceId) : null;
  const bearer = slot?.bearer ?? null;
  const bearerIsCurrent = credentialVersion !== null && bearer !== null
    && bearer.secretId === credentialVersion.secretId
    && bearer.secretVersionId === credentialVersion.secretVersionId;
  // The node's current session is the one the service domain recorded for it; a node it has
  // no record of is judged by the session its own assignment report states.
  const currentSessionId = nodeSessionId ?? nodeReport?.sessionId ?? null;
  const observed: IClusterIngressJudgedGenerations = {
    designation: heldDesignationGeneration(slot),
    nodeReport: nodeReport?.generation ?? null,
    nodeSessionId: currentSessionId,
  };
  return {
    ...facts,
    electedRelaySessionId: elected ? contextArg.session.id : null,
    designation,
    fleetCutover,
    placementNodeIds: service && service.clusterId === clusterId ? service.runtime.placement.nodeIds : null,
    node: nodeReport && currentSessionId !== null
      ? { sessionId: currentSessionId, assignments: nodeReport.assignments }
      : null,
    currentBearer: bearerIsCurrent ? portsArg.readBearer(clusterId, bearer) : null,
    // A table a retired administrator write left (routes without targets) is no computed table.
    routeTableRevision: table && isComputedRouteTable(table) ? table.generation : null,
    observed,
    reread: observed,
  };
};

export const ingressOperations = (portsArg: IIngressPorts): IDeclaredOperation[] => [
  adminMutation({
    method: 'designateClusterIngress',
    access: 'write',
    input: { required: { designation: isAnyValue } },
    // The designation request is a contract value, read whole once into the typed request.
    parse: (request) => {
      const read = readDesignationRequest(request.designation);
      return 'problems' in read ? read : { request: { designation: read.intent } };
    },
    // One document, but an idempotent one: a repeated mutationId answers the recorded answer
    // (before the decision, and after a lost race to a concurrent call of the same mutation); the
    // answer is recorded in the committing write itself.
    replay: {
      kind: clusterIngressSlotKind,
      mutationId: (request) => request.designation.mutationId,
      path: 'request.designation.mutationId',
      matches: ({ doc, answer }, request) => doc.id === request.designation.clusterId
        && (answer as IStoredDesignationAnswer).requestDigest === computeCanonicalJsonSha256Hex(request.designation),
      replayed: (recorded) => {
        const { designation, spec } = recorded as IStoredDesignationAnswer;
        return { designation, spec, replayed: true };
      },
    },
    facts: (request, context) => gatherDesignationFacts(portsArg, request.designation, context.identity.userId),
    target: (request) => ({ kind: clusterIngressSlotKind, id: request.designation.clusterId }),
    decide: (current, { request, facts, now }) => decideDesignationWrite(current, request.designation, facts, now),
    answer: ({ recorded }) => {
      const { designation, spec } = recorded as IStoredDesignationAnswer;
      return { designation, spec, replayed: false };
    },
    after: ({ recorded }, { request }) => {
      const { designation } = recorded as IStoredDesignationAnswer;
      portsArg.logger.info({
        clusterId: request.designation.clusterId, designationGeneration: designation.generation, ingressServiceId: designation.ingressServiceId,
        credentialGeneration: designation.credential.generation,
      }, 'cluster ingress designated');
    },
  }),

  adminQuery({
    method: 'getClusterIngressDesignation',
    access: 'read',
    input: { required: { clusterId: isIdString } },
    async run(request) {
      await requireCluster(portsArg, request.clusterId, 'request.clusterId');
      return { designation: await readClusterIngressDesignation(portsArg.store, request.clusterId) };
    },
  }),

  adminQuery({
    method: 'getClusterRuntime',
    access: 'read',
    input: { required: { clusterId: isIdString } },
    // A read writes nothing: a cluster without a slot yet answers what its slot will start as.
    async run(request) {
      await requireCluster(portsArg, request.clusterId, 'request.clusterId');
      return { runtime: await peekClusterRuntimeReference(portsArg.store, request.clusterId) };
    },
  }),

  relayQuery({
    method: 'registerClusterIngress',
    access: 'relay',
    // The body is the registration contract's value: its judge reads it whole and refuses it in
    // the contract's own terms (protocol first), never as `invalid-request`.
    input: 'judged',
    async run(request, context) {
      const facts = await gatherRegistrationFacts(portsArg, request, context);
      await failpoint('ingress.registration.beforeReread');
      let verdict = judgeClusterIngressRegistration(facts);
      if (verdict.outcome === 'accepted') {
        // The facts came from several documents; judge again against a second read so a change
        // that raced the first one is answered as `conflict`, not accepted on stale facts.
        const reread = await readJudgedGenerations(portsArg, context.clusterId, request.nodeId);
        verdict = judgeClusterIngressRegistration({ ...facts, reread });
      }
      const nodeId = isRecord(request) ? readOwnDataValue(request, 'nodeId') : undefined;
      const logged = { clusterId: context.clusterId, nodeId: isCanonicalId(nodeId) ? nodeId : null };
      switch (verdict.outcome) {
        case 'accepted':
          portsArg.logger.info({ ...logged, revision: verdict.acceptance.revision }, 'cluster ingress registration accepted');
          return verdict.acceptance;
        case 'protocol-refused':
          portsArg.logger.info({ ...logged, reason: verdict.refusal.reason }, 'cluster ingress protocol refused');
          throw contractRefusal(protocolRefusalText, verdict.refusal);
        case 'refused':
          portsArg.logger.info({ ...logged, reason: verdict.refusal.reason }, 'cluster ingress registration refused');
          throw contractRefusal(registrationRefusalText, verdict.refusal);
      }
    },
  }),

  relayQuery({
    method: 'getClusterIngressRouteTable',
    access: 'relay',
    input: { required: { knownRevision: isRevisionOrNull } },
    // A pure read of the one table the desired-state computation keeps (docs/api/ingress.md):
    // `null` until Cloudly computed one for the cluster. A stored table from before routes carried
    // targets is not answered as if it had them: it is `null` until the first computation.
    async run(_request, context) {
      const doc = await portsArg.store.get(clusterIngressRouteTableKind, context.clusterId);
      return { table: doc && isComputedRouteTable(doc) ? toRouteTable(doc) : null };
    },
  }),

  relayMutation({
    method: 'reportClusterNodeRuntimeAssignments',
    access: 'relay',
    input: { required: nodeAssignmentReportShape },
    // Only the cluster's elected relay writes its nodes' reports, and only of its cluster's nodes.
    async facts(request, context) {
      await requireElected(portsArg, context);
      if (!(await portsArg.needs.nodeExists(context.clusterId, request.nodeId))) {
        throw nodeOutsideCluster();
      }
      return { clusterId: context.clusterId };
    },
    target: (request, facts) => ({ kind: nodeRuntimeAssignmentsKind, id: clusterNodeDocumentId(facts.clusterId, request.nodeId) }),
    decide: (current, { request, facts, now }) =>
      decideAssignmentReport(current, clusterNodeDocumentId(facts.clusterId, request.nodeId), facts.clusterId, request, now),
    answer: ({ doc }) => ({ generation: doc!.generation }),
  }),

  // The one answer that carries a bearer, sealed to the cluster's enrolled recipient: only to the
  // elected socket of the relay's own cluster, only for that cluster's current credential. The
  // relay's node opens it to fill the ingress workload's secret environment variable.
  relayQuery({
    method: 'resolveClusterIngressBearer',
    access: 'relay',
    input: {
      required: { secretVersion: isSecretVersionReference },
      optional: { recipientId: isString(1, 64, /^x25519:[0-9a-f]{32}$/) },
    },
    async run(request, context) {
      await requireElected(portsArg, context);
      const slot = await portsArg.store.get(clusterIngressSlotKind, context.clusterId);
      // The bearer of either kind of designation (a fleet-cutover one's is minted when it is recorded).
      const credentialGeneration = slot?.kind === 'pallet'
        ? slot.designation?.credential.generation ?? null
        : slot?.kind === 'fleet-cutover' ? slot.fleetCutover?.credential?.generation ?? null : null;
      const bearer = credentialGeneration !== null ? slot!.bearer : null;
      if (
        !bearer
        || request.secretVersion.secretId !== bearer.secretId
        || request.secretVersion.secretVersionId !== bearer.secretVersionId
      ) {
        throw refuseNamed('not-found', 'ingress-credential-not-current', 'is not the current ingress credential of this relay\'s cluster', 'request.secretVersion');
      }
      const value = portsArg.readBearer(context.clusterId, bearer);
      return {
        material: await portsArg.sealToClusterRecipient(context.clusterId, request.recipientId, {
          clusterId: context.clusterId,
          nodeId: null,
          purpose: 'cluster-ingress-bearer',
          secretVersion: { secretId: bearer.secretId, secretVersionId: bearer.secretVersionId },
          version: credentialGeneration!,
          enrollmentId: null,
        }, Buffer.from(value, 'utf8')),
      };
    },
  }),
];
