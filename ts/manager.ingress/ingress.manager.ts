import { randomBytes, randomUUID } from 'node:crypto';
import type { Cloudly, IRelayHandlerContext } from '../classes.cloudly.js';
import { contractRefusal, refuse } from '../core/errors.js';
import { isAnyValue, isIdString, isString, requireRequestShape, type TFieldCheck } from '../core/validation.js';
import type { IRelaySession } from '../core/relaysessions.js';
import { clusterNodeDocumentId } from '../manager.cluster/clusternodes.js';
import { relayNotElectedReason } from '../manager.cluster/relayelection.js';
import {
  clusterIngressEnvironmentNames,
  clusterIngressProtocolOffer,
  type IClusterIngressPreparedSpec,
  type IClusterIngressRouteTable,
  validateClusterIngressRoutes,
} from '../interfaces/data/clusteringress.js';
import {
  computeClusterIngressDesignationDigest,
  type IClusterIngressDesignation,
  type IClusterIngressDesignationRequest,
  type IFleetCutoverIngressDesignation,
  snapshotClusterIngressDesignationRequest,
} from '../interfaces/data/clusteringressdesignation.js';
import { clusterRuntimePhases, type IClusterRuntimeReference, type TClusterRuntimePhase } from '../interfaces/data/clusterruntime.js';
import { validateRuntimeAssignmentStatus } from '../interfaces/data/runtimeassignment.js';
import type { ISecretVersionReference } from '../interfaces/data/secret.js';
import type { IService } from '../interfaces/data/service.js';
import { computeCanonicalJsonSha256Hex, sha256Hex } from '../interfaces/private/canonicaljson.js';
import { isCanonicalId, isCounter, isRecord, readExactDataRecord } from '../interfaces/private/dataproperties.js';
import { readOwnDataValue } from '../interfaces/private/ownproperties.js';
import type {
  IReq_Any_Cloudly_DesignateClusterIngress,
  IReq_Any_Cloudly_GetClusterIngressDesignation,
  IReq_Any_Cloudly_GetClusterRuntime,
  IReq_Any_Cloudly_SetClusterIngressRoutes,
  IReq_Cloudly_Relay_PushClusterIngressRouteTableChanged,
  IReq_Relay_Cloudly_GetClusterIngressRouteTable,
  IReq_Relay_Cloudly_RegisterClusterIngress,
  IReq_Relay_Cloudly_ReportClusterNodeRuntimeAssignments,
  IReq_Relay_Cloudly_ResolveClusterIngressBearer,
} from '../interfaces/requests/ingress.js';
import type { IIngressDependencies } from './dependencies.js';
import { failpoint } from '../core/failpoints.js';
import {
  clusterIngressRouteTableKind,
  clusterIngressSlotKind,
  type IClusterIngressRouteTableDocument,
  type IClusterIngressSlotDocument,
  type IStoredBearer,
  type IStoredDesignationAnswer,
  nodeRuntimeAssignmentsKind,
} from './documents.js';
import {
  type IClusterIngressJudgedGenerations,
  type IClusterIngressRegistrationFacts,
  judgeClusterIngressRegistration,
} from './judge.js';

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
      return [`${pathArg} must be an array of at most ${maximumReportedAssignments} assignments`];
    }
    return valueArg.flatMap((item, index) => validateRuntimeAssignmentStatus(item, `${pathArg}[${index}]`));
  },
};
/** How long Cloudly waits for a relay to take a route-table hint. */

const registrationRefusalText = 'The cluster ingress registration was refused.';

/** Where a bearer's ciphertext is stored: it decrypts there and nowhere else. */
export const ingressBearerContext = (clusterIdArg: string, secretVersionIdArg: string): string =>
  `CloudlyClusterIngressSlot/${clusterIdArg}/bearer/${secretVersionIdArg}`;
const protocolRefusalText = 'The protocol offer was refused.';

/** Stable, id-safe tag of a cluster id for names derived from it (ids may be up to 128 characters). */
const clusterTag = (clusterIdArg: string): string => sha256Hex(clusterIdArg).slice(0, 32);

const isSecretVersionReference: TFieldCheck = (valueArg, pathArg) => {
  const reference = readExactDataRecord(valueArg, ['secretId', 'secretVersionId']);
  return reference !== null && isCanonicalId(readOwnDataValue(reference, 'secretId'))
    && isCanonicalId(readOwnDataValue(reference, 'secretVersionId'))
    ? []
    : [`${pathArg} must be exactly { secretId, secretVersionId } with two ids`];
};

const isRevisionOrNull: TFieldCheck = (valueArg, pathArg) =>
  valueArg === null || isCounter(valueArg) ? [] : [`${pathArg} must be null or a non-negative integer`];

/**
 * Explains why a designation request does not snapshot, member by member; the snapshot itself
 * only says that it failed.
 */
const describeDesignationRequest = (valueArg: unknown, pathArg: string): string[] => {
  if (!isRecord(valueArg)) {
    return [`${pathArg} must be an object`];
  }
  const reasons: string[] = [];
  const members = ['mutationId', 'clusterId', 'ingressServiceId', 'currentRuntime', 'expectedSpecRevision', 'expectedDesignation'];
  for (const key of Object.keys(valueArg)) {
    if (!members.includes(key)) {
      reasons.push(`${pathArg}.${key} is not a member of a designation request`);
    }
  }
  for (const key of ['mutationId', 'clusterId', 'ingressServiceId']) {
    if (!isCanonicalId(readOwnDataValue(valueArg, key))) {
      reasons.push(`${pathArg}.${key} must be an id`);
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
    reasons.push(`${pathArg}.currentRuntime must be { id, phase: 'pallet', generation } of the named cluster`);
  }
  if (!isCounter(readOwnDataValue(valueArg, 'expectedSpecRevision'))) {
    reasons.push(`${pathArg}.expectedSpecRevision must be a non-negative integer`);
  }
  const expected = readOwnDataValue(valueArg, 'expectedDesignation');
  if (expected !== null) {
    const valid = isRecord(expected) && Object.keys(expected).length === 3
      && isCanonicalId(readOwnDataValue(expected, 'id'))
      && Number.isSafeInteger(readOwnDataValue(expected, 'generation'))
      && (readOwnDataValue(expected, 'generation') as number) >= 1
      && /^[0-9a-f]{64}$/.test(String(readOwnDataValue(expected, 'digest')));
    if (!valid) {
      reasons.push(`${pathArg}.expectedDesignation must be null or { id, generation, digest }`);
    }
  }
  return reasons.length > 0 ? reasons : [`${pathArg} must use the exact designation request schema`];
};

/** The service's spec with the three ingress environment names filled per placement node. */
export const prepareClusterIngressSpec = (
  serviceArg: IService,
  secretVersionArg: ISecretVersionReference,
  relayOriginArg: string,
): IClusterIngressPreparedSpec => ({
  serviceId: serviceArg.id,
  specRevision: serviceArg.specRevision,
  runtime: serviceArg.runtime,
  nodes: [...serviceArg.runtime.placement.nodeIds].sort().map((nodeId) => ({
    nodeId,
    environment: {
      [clusterIngressEnvironmentNames.bearer]: { secret: { ...secretVersionArg } },
      [clusterIngressEnvironmentNames.relayOrigin]: { value: relayOriginArg },
      [clusterIngressEnvironmentNames.nodeId]: { value: nodeId },
    },
  })),
});

export class IngressManager {
  private running = false;

  /**
   * `dependencies` is the manager's declared port to the cluster and service domains, wired by the
   * composition root (ts/classes.cloudly.ts); tests reach the races they need through failpoints.
   */
  constructor(private readonly cloudly: Cloudly, private readonly dependencies: IIngressDependencies) {

    cloudly.addAdminHandler<IReq_Any_Cloudly_DesignateClusterIngress>('designateClusterIngress', async (request, context) => {
      request = requireRequestShape(request, { required: { designation: isAnyValue } });
      let intent: IClusterIngressDesignationRequest;
      try {
        intent = snapshotClusterIngressDesignationRequest(request.designation);
      } catch {
        throw refuse('invalid-request', describeDesignationRequest(request.designation, 'request.designation'));
      }
      return this.designate(intent, context.identity.userId);
    });

    cloudly.addAdminHandler<IReq_Any_Cloudly_GetClusterIngressDesignation>('getClusterIngressDesignation', async (request) => {
      request = requireRequestShape(request, { required: { clusterId: isIdString } });
      await this.requireCluster(request.clusterId, 'request.clusterId');
      return { designation: await this.getDesignation(request.clusterId) };
    });

    cloudly.addAdminHandler<IReq_Any_Cloudly_GetClusterRuntime>('getClusterRuntime', async (request) => {
      request = requireRequestShape(request, { required: { clusterId: isIdString } });
      await this.requireCluster(request.clusterId, 'request.clusterId');
      return { runtime: await this.readClusterRuntime(request.clusterId) };
    });

    cloudly.addAdminHandler<IReq_Any_Cloudly_SetClusterIngressRoutes>('setClusterIngressRoutes', async (request) => {
      request = requireRequestShape(request, {
        required: {
          clusterId: isIdString,
          expectedRevision: isRevisionOrNull,
          routes: (valueArg, pathArg) => validateClusterIngressRoutes(valueArg, pathArg),
        },
      });
      await this.requireCluster(request.clusterId, 'request.clusterId');
      return { table: await this.setRoutes(request.clusterId, request.expectedRevision, request.routes) };
    });

    cloudly.addRelayHandler<IReq_Relay_Cloudly_RegisterClusterIngress>('registerClusterIngress', async (request, context) =>
      this.register(request, context));

    cloudly.addRelayHandler<IReq_Relay_Cloudly_GetClusterIngressRouteTable>('getClusterIngressRouteTable', async (request, context) => {
      request = requireRequestShape(request, { required: { knownRevision: isRevisionOrNull } });
      return { table: await this.getRouteTable(context.clusterId) };
    });

    cloudly.addRelayHandler<IReq_Relay_Cloudly_ReportClusterNodeRuntimeAssignments>(
      'reportClusterNodeRuntimeAssignments',
      async (request, context) => this.recordAssignments(request, context),
    );

    // The one answer that carries a bearer, sealed to the cluster's enrolled recipient: only to the
    // elected socket of the relay's own cluster, only for that cluster's current credential. The
    // relay's node opens it to fill the ingress workload's secret environment variable.
    cloudly.addRelayHandler<IReq_Relay_Cloudly_ResolveClusterIngressBearer>('resolveClusterIngressBearer', async (request, context) => {
      request = requireRequestShape(request, {
        required: { secretVersion: isSecretVersionReference },
        optional: { recipientId: isString(1, 64, /^x25519:[0-9a-f]{32}$/) },
      });
      await this.requireElected(context);
      const slot = await this.cloudly.store.get(clusterIngressSlotKind, context.clusterId);
      const bearer = slot?.kind === 'pallet' ? slot.bearer : null;
      if (
        !bearer
        || request.secretVersion.secretId !== bearer.secretId
        || request.secretVersion.secretVersionId !== bearer.secretVersionId
      ) {
        throw refuse('not-found', ['request.secretVersion is not the current ingress credential of this relay\'s cluster']);
      }
      const value = this.readBearer(context.clusterId, bearer);
      return {
        material: await this.cloudly.secretManager.sealToClusterRecipient(context.clusterId, request.recipientId, {
          clusterId: context.clusterId,
          nodeId: null,
          purpose: 'cluster-ingress-bearer',
          secretVersion: { secretId: bearer.secretId, secretVersionId: bearer.secretVersionId },
          version: slot!.designation!.credential.generation,
          enrollmentId: null,
        }, Buffer.from(value, 'utf8')),
      };
    });

    cloudly.relays.onSessionOpened((sessionArg) => this.hintNewSession(sessionArg));
  }

  public async start(): Promise<void> {
    await this.encryptClearBearers();
    this.running = true;
  }

  /** The bearer's value, decrypted; a stored bearer that fails authentication is refused (and logged without it). */
  private readBearer(clusterIdArg: string, bearerArg: IStoredBearer): string {
    if (bearerArg.encryptedValue) {
      return this.cloudly.secrets.decryptText(bearerArg.encryptedValue, ingressBearerContext(clusterIdArg, bearerArg.secretVersionId));
    }
    // Written by a version that kept it in clear and not yet encrypted by encryptClearBearers.
    return bearerArg.value ?? '';
  }

  /** Bearers an earlier version stored in clear are encrypted in place at start. */
  private async encryptClearBearers(): Promise<void> {
    const { store } = this.cloudly;
    const slots = await store.find(clusterIngressSlotKind, { 'bearer.value': { $exists: true } } as never);
    for (const slot of slots) {
      await store.mutate(clusterIngressSlotKind, slot.id, (current) => {
        const bearer = current?.bearer;
        if (!current || !bearer || bearer.value === undefined) {
          return { kind: 'keep' };
        }
        return {
          kind: 'write',
          change: { set: { bearer: {
            secretId: bearer.secretId,
            secretVersionId: bearer.secretVersionId,
            encryptedValue: this.cloudly.secrets.encrypt(bearer.value, ingressBearerContext(current.clusterId, bearer.secretVersionId)),
          } } },
        };
      });
    }
  }

  public async stop(): Promise<void> {
    this.running = false;
  }

  // --- designation ---------------------------------------------------------------------------

  private async requireCluster(clusterIdArg: string, pathArg: string): Promise<void> {
    if (!(await this.dependencies.clusterExists(clusterIdArg))) {
      throw refuse('not-found', [`${pathArg} names no cluster`]);
    }
  }

  /** The cluster's Pallet ingress designation, or null (also when it holds a fleet-cutover one). */
  public async getDesignation(clusterIdArg: string): Promise<IClusterIngressDesignation | null> {
    const slot = await this.cloudly.store.get(clusterIngressSlotKind, clusterIdArg);
    return slot?.kind === 'pallet' ? slot.designation : null;
  }

  private async designate(
    intentArg: IClusterIngressDesignationRequest,
    actorIdArg: string,
  ): Promise<IReq_Any_Cloudly_DesignateClusterIngress['response']> {
    const { store } = this.cloudly;
    const clusterId = intentArg.clusterId;
    const requestDigest = computeCanonicalJsonSha256Hex(intentArg);
    const replay = await this.findReplay(intentArg, requestDigest);
    if (replay) {
      return replay;
    }
    await this.requireCluster(clusterId, 'request.designation.clusterId');
    // The runtime is read from the slot the designation commits to, so a phase change that lands
    // before the write moves the slot's generation and the write below loses (`conflict`).
    const slot = await this.readSlot(clusterId);
    const runtime = slot.runtime;
    if (runtime.phase !== 'pallet' || runtime.generation !== intentArg.currentRuntime.generation) {
      throw refuse('conflict', [`request.designation.currentRuntime is not the cluster's current runtime `
        + `(${runtime.phase}, generation ${runtime.generation})`]);
    }
    // The service is another manager's document and cannot join this write. An update of it that
    // lands between this read and the write is harmless: it reads nothing of the slot, so the
    // outcome equals designating first and updating after, and the designation names the exact
    // revision it prepared.
    await failpoint('ingress.designation.beforeServiceRead');
    const service = await this.dependencies.getService(intentArg.ingressServiceId);
    if (!service || service.clusterId !== clusterId) {
      throw refuse('not-found', ['request.designation.ingressServiceId names no service of this cluster']);
    }
    if (service.specRevision !== intentArg.expectedSpecRevision) {
      throw refuse('conflict', [`request.designation.expectedSpecRevision is not the service's runtime spec revision `
        + `(${service.specRevision})`]);
    }
    const relayOrigin = await this.dependencies.getRelayOrigin(clusterId);
    if (relayOrigin === null) {
      throw refuse('unavailable', ['the cluster has no accepted relay registration, so its relay origin is unknown']);
    }
    if (slot.kind === 'fleet-cutover') {
      throw contractRefusal('The cluster holds a fleet-cutover ingress designation.', {
        code: 'conflict',
        retryable: false,
        reasons: ['the cluster holds a fleet-cutover ingress designation; a cluster holds one kind of designation only'],
      });
    }
    const current = slot.designation;
    const expected = intentArg.expectedDesignation;
    const matches = current === null
      ? expected === null
      : expected !== null && expected.id === current.id && expected.generation === current.generation
        && expected.digest === current.digest;
    if (!matches) {
      throw refuse('conflict', ['request.designation.expectedDesignation is not the cluster\'s current designation']);
    }

    const tag = clusterTag(clusterId);
    const secretVersion: ISecretVersionReference = {
      secretId: `ingress-bearer-${tag}`,
      secretVersionId: `ingress-bearer-${tag}-${randomUUID()}`,
    };
    const unsealed: IClusterIngressDesignation = {
      id: clusterId,
      generation: current ? current.generation + 1 : 1,
      previous: current ? { id: current.id, generation: current.generation, digest: current.digest } : null,
      clusterId,
      runtime: { id: clusterId, phase: 'pallet', generation: runtime.generation },
      ingressServiceId: service.id,
      preparedSpecRevision: service.specRevision,
      credential: {
        credentialId: `ingress-credential-${tag}`,
        generation: current ? current.credential.generation + 1 : 1,
        secretVersion,
      },
      actorId: actorIdArg,
      acceptedAt: Date.now(),
      digest: '0'.repeat(64),
    };
    const designation: IClusterIngressDesignation = {
      ...unsealed,
      digest: await computeClusterIngressDesignationDigest(unsealed),
    };
    const spec = prepareClusterIngressSpec(service, secretVersion, relayOrigin);
    const bearer: IStoredBearer = {
      ...secretVersion,
      encryptedValue: this.cloudly.secrets.encrypt(randomBytes(clusterIngressBearerBytes).toString('base64url'), ingressBearerContext(clusterId, secretVersion.secretVersionId)),
    };
    const answer: IStoredDesignationAnswer = { requestDigest, designation, spec };
    const mutation = { mutationId: intentArg.mutationId, answer };
    const stored = await store.swap(clusterIngressSlotKind, clusterId, slot.generation, {
      set: { kind: 'pallet', designation, bearer },
    }, { mutation });
    if (!stored) {
      // The same mutation may have won in a concurrent call: that one's answer is this one's too.
      const concurrent = await this.findReplay(intentArg, requestDigest);
      if (concurrent) {
        return concurrent;
      }
      throw refuse('conflict', ['the cluster\'s ingress designation or runtime changed while the request was decided']);
    }
    this.cloudly.logger.info({
      clusterId, designationGeneration: designation.generation, ingressServiceId: service.id,
      credentialGeneration: designation.credential.generation,
    }, 'cluster ingress designated');
    return { designation, spec, replayed: false };
  }

  private async findReplay(
    intentArg: IClusterIngressDesignationRequest,
    requestDigestArg: string,
  ): Promise<IReq_Any_Cloudly_DesignateClusterIngress['response'] | null> {
    const replay = await this.cloudly.store.findMutation(clusterIngressSlotKind, intentArg.mutationId);
    if (!replay) {
      return null;
    }
    const answer = replay.answer as IStoredDesignationAnswer;
    if (replay.doc.id !== intentArg.clusterId || answer.requestDigest !== requestDigestArg) {
      throw refuse('invalid-request', ['request.designation.mutationId was already used for a different request']);
    }
    return { designation: answer.designation, spec: answer.spec, replayed: true };
  }

  /**
   * Records a fleet-cutover ingress designation for a cluster that came from a Swarm fleet. The
   * fleet cutover (outside this project) is its only writer; no request reaches it. Null when the
   * cluster already holds a designation of either kind.
   */
  public async recordFleetCutoverIngressDesignation(
    clusterIdArg: string,
    ingressServiceIdArg: string,
  ): Promise<IFleetCutoverIngressDesignation | null> {
    const fleetCutover: IFleetCutoverIngressDesignation = {
      id: clusterIdArg, generation: 1, clusterId: clusterIdArg, ingressServiceId: ingressServiceIdArg, acceptedAt: Date.now(),
    };
    await this.readSlot(clusterIdArg);
    const { outcome } = await this.cloudly.store.mutate(clusterIngressSlotKind, clusterIdArg, (slotArg) =>
      (slotArg?.kind === 'none' ? { kind: 'write', change: { set: { kind: 'fleet-cutover' as const, fleetCutover } } } : { kind: 'keep' }));
    return outcome === 'written' ? fleetCutover : null;
  }

  // --- cluster runtime -----------------------------------------------------------------------

  /**
   * The cluster's slot, created on first read with an empty designation and a `pallet` runtime:
   * every cluster this Cloudly creates is born on Pallet.
   */
  private async readSlot(clusterIdArg: string): Promise<IClusterIngressSlotDocument> {
    const { store } = this.cloudly;
    const slot = await store.get(clusterIngressSlotKind, clusterIdArg)
      ?? await store.insert(clusterIngressSlotKind, {
        id: clusterIdArg,
        clusterId: clusterIdArg,
        kind: 'none',
        designation: null,
        fleetCutover: null,
        bearer: null,
        runtime: { phase: 'pallet', generation: 1 },
      })
      ?? await store.get(clusterIngressSlotKind, clusterIdArg);
    if (!slot) {
      throw new Error('cluster ingress slot vanished while it was created');
    }
    return slot;
  }

  /** The cluster's runtime reference. */
  public async readClusterRuntime(clusterIdArg: string): Promise<IClusterRuntimeReference> {
    const { runtime } = await this.readSlot(clusterIdArg);
    return { id: clusterIdArg, phase: runtime.phase, generation: runtime.generation };
  }

  /**
   * The cluster's runtime phase without creating its slot: a cluster with no slot yet was born on
   * Pallet and never moved. For readers that must not write (the service runtime verdict).
   */
  public async peekClusterRuntimePhase(clusterIdArg: string): Promise<TClusterRuntimePhase> {
    const slot = await this.cloudly.store.get(clusterIngressSlotKind, clusterIdArg);
    return slot?.runtime.phase ?? 'pallet';
  }

  /**
   * Moves the cluster's runtime to a phase (a fleet migration's step), compare-and-swap on the
   * runtime generation the caller read. Null when that generation is no longer current.
   */
  public async changeClusterRuntimePhase(
    clusterIdArg: string,
    expectedGenerationArg: number,
    phaseArg: TClusterRuntimePhase,
  ): Promise<IClusterRuntimeReference | null> {
    if (!(clusterRuntimePhases as readonly string[]).includes(phaseArg)) {
      return null;
    }
    await this.readSlot(clusterIdArg);
    const runtime = { phase: phaseArg, generation: expectedGenerationArg + 1 };
    // A lost swap may be a designation that moved the slot: mutate re-reads and compares the runtime again.
    const { outcome } = await this.cloudly.store.mutate(clusterIngressSlotKind, clusterIdArg, (slotArg) =>
      (slotArg?.runtime.generation === expectedGenerationArg ? { kind: 'write', change: { set: { runtime } } } : { kind: 'keep' }));
    return outcome === 'written' ? { id: clusterIdArg, ...runtime } : null;
  }

  // --- registration --------------------------------------------------------------------------

  private async readJudgedGenerations(clusterIdArg: string, nodeIdArg: string | null): Promise<IClusterIngressJudgedGenerations> {
    const [slot, nodeReport, nodeSessionId] = await Promise.all([
      this.cloudly.store.get(clusterIngressSlotKind, clusterIdArg),
      nodeIdArg ? this.cloudly.store.get(nodeRuntimeAssignmentsKind, clusterNodeDocumentId(clusterIdArg, nodeIdArg)) : null,
      nodeIdArg ? this.dependencies.getNodeSessionId(clusterIdArg, nodeIdArg) : null,
    ]);
    return {
      designation: slot?.kind === 'pallet' ? slot.designation?.generation ?? null : null,
      nodeReport: nodeReport?.generation ?? null,
      nodeSessionId: nodeSessionId ?? nodeReport?.sessionId ?? null,
    };
  }

  /** Gathers every fact the judge needs. The facts hold the bearer: they are never logged. */
  private async gatherRegistrationFacts(
    bodyArg: unknown,
    contextArg: IRelayHandlerContext,
  ): Promise<IClusterIngressRegistrationFacts> {
    const clusterId = contextArg.clusterId;
    const ready = this.running && this.cloudly.started;
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
    const { store } = this.cloudly;
    const [elected, slot, nodeReport, nodeSessionId, table] = await Promise.all([
      this.dependencies.isElectedRelaySession(contextArg.session),
      store.get(clusterIngressSlotKind, clusterId),
      nodeId ? store.get(nodeRuntimeAssignmentsKind, clusterNodeDocumentId(clusterId, nodeId)) : null,
      nodeId ? this.dependencies.getNodeSessionId(clusterId, nodeId) : null,
      store.get(clusterIngressRouteTableKind, clusterId),
    ]);
    const designation = slot?.kind === 'pallet' ? slot.designation : null;
    const service = designation ? await this.dependencies.getService(designation.ingressServiceId) : null;
    const bearer = slot?.bearer ?? null;
    const bearerIsCurrent = designation !== null && bearer !== null
      && bearer.secretId === designation.credential.secretVersion.secretId
      && bearer.secretVersionId === designation.credential.secretVersion.secretVersionId;
    // The node's current session is the one the service manager recorded for it; a node it has
    // no record of is judged by the session its own assignment report states.
    const currentSessionId = nodeSessionId ?? nodeReport?.sessionId ?? null;
    const observed: IClusterIngressJudgedGenerations = {
      designation: designation?.generation ?? null,
      nodeReport: nodeReport?.generation ?? null,
      nodeSessionId: currentSessionId,
    };
    return {
      ...facts,
      electedRelaySessionId: elected ? contextArg.session.id : null,
      designation,
      placementNodeIds: service && service.clusterId === clusterId ? service.runtime.placement.nodeIds : null,
      node: nodeReport && currentSessionId !== null
        ? { sessionId: currentSessionId, assignments: nodeReport.assignments }
        : null,
      currentBearer: bearerIsCurrent ? this.readBearer(clusterId, bearer) : null,
      routeTableRevision: table?.generation ?? null,
      observed,
      reread: observed,
    };
  }

  private async register(
    bodyArg: unknown,
    contextArg: IRelayHandlerContext,
  ): Promise<IReq_Relay_Cloudly_RegisterClusterIngress['response']> {
    const facts = await this.gatherRegistrationFacts(bodyArg, contextArg);
    await failpoint('ingress.registration.beforeReread');
    let verdict = judgeClusterIngressRegistration(facts);
    if (verdict.outcome === 'accepted') {
      // The facts came from several documents; judge again against a second read so a change
      // that raced the first one is answered as `conflict`, not accepted on stale facts.
      const reread = await this.readJudgedGenerations(contextArg.clusterId, (bodyArg as { nodeId: string }).nodeId);
      verdict = judgeClusterIngressRegistration({ ...facts, reread });
    }
    const nodeId = (facts.body as { nodeId?: unknown } | null)?.nodeId;
    const logged = { clusterId: contextArg.clusterId, nodeId: isCanonicalId(nodeId) ? nodeId : null };
    switch (verdict.outcome) {
      case 'accepted':
        this.cloudly.logger.info({ ...logged, revision: verdict.acceptance.revision }, 'cluster ingress registration accepted');
        return verdict.acceptance;
      case 'protocol-refused':
        this.cloudly.logger.info({ ...logged, reason: verdict.refusal.reason }, 'cluster ingress protocol refused');
        throw contractRefusal(protocolRefusalText, verdict.refusal);
      case 'refused':
        this.cloudly.logger.info({ ...logged, reason: verdict.refusal.reason }, 'cluster ingress registration refused');
        throw contractRefusal(registrationRefusalText, verdict.refusal);
    }
  }

  private async requireElected(contextArg: IRelayHandlerContext): Promise<void> {
    if (!(await this.dependencies.isElectedRelaySession(contextArg.session))) {
      throw refuse('unavailable', [relayNotElectedReason]);
    }
  }

  /** Replaces a node's runtime assignment report; only the cluster's elected relay may write it. */
  private async recordAssignments(
    requestArg: IReq_Relay_Cloudly_ReportClusterNodeRuntimeAssignments['request'],
    contextArg: IRelayHandlerContext,
  ): Promise<IReq_Relay_Cloudly_ReportClusterNodeRuntimeAssignments['response']> {
    requestArg = requireRequestShape(requestArg, { required: nodeAssignmentReportShape });
    await this.requireElected(contextArg);
    return { generation: await this.storeAssignments(contextArg.clusterId, requestArg) };
  }

  /**
   * Stores one node's assignment observation, replacing the last one whole: the one source of
   * truth the registration judge reads, written by `reportClusterNodeRuntimeAssignments` and by the
   * observed-state report's `nodes` member alike (docs/desired-state.md). The caller validated it.
   */
  public async storeAssignments(
    clusterIdArg: string,
    reportArg: IReq_Relay_Cloudly_ReportClusterNodeRuntimeAssignments['request'],
  ): Promise<number> {
    const { store } = this.cloudly;
    const id = clusterNodeDocumentId(clusterIdArg, reportArg.nodeId);
    const report = {
      clusterId: clusterIdArg,
      nodeId: reportArg.nodeId,
      sessionId: reportArg.sessionId,
      assignments: reportArg.assignments.map((assignment) => ({
        assignmentId: assignment.assignmentId,
        serviceId: assignment.serviceId,
        sessionId: assignment.sessionId,
        state: assignment.state,
        secretVersions: assignment.secretVersions.map((version) => ({
          secretId: version.secretId, secretVersionId: version.secretVersionId,
        })),
      })),
      reportedAt: Date.now(),
    };
    // A report replaces the last one whole; a write that lost to a concurrent report of the node
    // reads again and replaces that one, instead of answering conflict to the relay.
    const { doc } = await store.mutate(nodeRuntimeAssignmentsKind, id, (currentArg) => (currentArg
      ? { kind: 'write', change: { set: report } }
      : { kind: 'create', doc: { id, ...report } }));
    return doc!.generation;
  }

  // --- route table ---------------------------------------------------------------------------

  private toTable(docArg: IClusterIngressRouteTableDocument): IClusterIngressRouteTable {
    return { clusterId: docArg.clusterId, revision: docArg.generation, routes: docArg.routes };
  }

  /** The cluster's route table, or null when none was computed yet (never an empty stand-in). */
  public async getRouteTable(clusterIdArg: string): Promise<IClusterIngressRouteTable | null> {
    const doc = await this.cloudly.store.get(clusterIngressRouteTableKind, clusterIdArg);
    return doc ? this.toTable(doc) : null;
  }

  /** Replaces the routes, compare-and-swap on the revision the caller read, then hints the relay. */
  public async setRoutes(
    clusterIdArg: string,
    expectedRevisionArg: number | null,
    routesArg: IClusterIngressRouteTable['routes'],
  ): Promise<IClusterIngressRouteTable> {
    const { store } = this.cloudly;
    const routes = routesArg.map((route) => ({ hostname: route.hostname, serviceId: route.serviceId, port: route.port }));
    const computedAt = Date.now();
    const stored = expectedRevisionArg === null
      ? await store.insert(clusterIngressRouteTableKind, { id: clusterIdArg, clusterId: clusterIdArg, routes, computedAt })
      : await store.swap(clusterIngressRouteTableKind, clusterIdArg, expectedRevisionArg, { set: { routes, computedAt } });
    if (!stored) {
      throw refuse('conflict', ['request.expectedRevision is not the route table\'s current revision']);
    }
    const table = this.toTable(stored);
    void this.hintRelay(clusterIdArg, table.revision);
    return table;
  }

  /** Tells the cluster's relay a newer table exists. A lost hint costs nothing: the relay pulls. */
  private async hintRelay(clusterIdArg: string, revisionArg: number, sessionArg?: IRelaySession): Promise<void> {
    const hint: IReq_Cloudly_Relay_PushClusterIngressRouteTableChanged['request'] = { revision: revisionArg };
    try {
      if (sessionArg) {
        await this.cloudly.relays.callSession(sessionArg, 'pushClusterIngressRouteTableChanged', hint);
      } else {
        await this.cloudly.relays.call(clusterIdArg, 'pushClusterIngressRouteTableChanged', hint);
      }
    } catch (error) {
      const reasons = (error as { errorData?: { reasons?: unknown } }).errorData?.reasons;
      this.cloudly.logger.debug({ clusterId: clusterIdArg, revision: revisionArg, reasons }, 'route table hint not delivered');
    }
  }

  /** A relay that just connected may have missed hints: tell it the current revision once. */
  private async hintNewSession(sessionArg: IRelaySession): Promise<void> {
    if (!this.running) {
      return;
    }
    const doc = await this.cloudly.store.get(clusterIngressRouteTableKind, sessionArg.clusterId);
    if (doc) {
      await this.hintRelay(sessionArg.clusterId, doc.generation, sessionArg);
    }
  }
}

export type { IClusterIngressSlotDocument };
