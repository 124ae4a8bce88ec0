import type { TypedResponseError } from '@api.global/typedrequest';
import { mutationIdReusedRefusal } from './errors.js';
import { currentOperation } from './operationcontext.js';
import type { IVerifiedIdentity } from './auth.js';
import type { IRelaySession } from './relaysessions.js';
import type { TCloudlyLogger } from './logger.js';
import { isLostEveryRound, type DocumentStore, type IDocumentKind, type IMutateResult, type IMutationAnswer, type IStoredDocument, type TDecision } from './store.js';
import { refuseFields, requireRequestShape, shapeSchema, type IFieldProblem, type IRequestShape, type TCheckSchema } from './validation.js';
import { isMethodAccess, missingAccessMessage, type TAdminAccess } from './access.js';
import type { ICloudlyMethods, TCloudlyMethod } from '../interfaces/requests/methodmap.js';

/**
 * Operations as values (the shape of Kubernetes' generic registry and of tRPC procedures): a
 * domain declares each method it serves as a value, and one pipeline, written here once, runs
 * every one of them:
 *
 *   guard (identity or relay socket, by the host) → shape (every reason, one `invalid-request`)
 *   → parse (a contract value read whole) → cross-field checks → replay by `mutationId` → facts
 *   (reads through the domain's ports) → `store.mutate` on the one target document with the pure
 *   `decide` (recording the answer a replay repeats in the same write) → answer → `after`.
 *
 * A contract that answers in its own error data says so in `refusals`: `invalid` for the reasons
 * of the parse and the checks, `conflict` for a mutation that lost every compare-and-swap round
 * (the decision's own refusals pass as they are).
 *
 * Dry-run and the audit log need nothing from a domain: the host's admin guard runs the operation
 * in a dry-run context in which `store.mutate` decides without writing, and every committed write
 * carries its audit stamp (ts/core/store.ts).
 *
 * Four kinds:
 * - `adminQuery`: a read; `run` answers from the request.
 * - `adminMutation`: a change of one document, decided by a pure function of what was read.
 * - `adminOrchestration`: a change of several documents, or one that calls a relay (intent →
 *   call → settle); `run` does the steps, each one a `store.mutate` of its own.
 * - `relayMutation` / `relayQuery` / `relayOrchestration`: the same for a method a relay calls;
 *   the socket names the cluster.
 */

export interface IAdminHandlerContext {
  identity: IVerifiedIdentity;
  transport: 'http' | 'socket';
  /** The transport's per-connection data; on a socket, the same object for every call on it. */
  localData: Record<string, unknown>;
}

export interface IRelayHandlerContext {
  clusterId: string;
  session: IRelaySession;
}

/** What a request of a method looks like once the guard has taken the identity off. */
export type TOperationRequest<M extends TCloudlyMethod> = Omit<ICloudlyMethods[M]['request'], 'identity'>;
export type TOperationAnswer<M extends TCloudlyMethod> = ICloudlyMethods[M]['response'];

/** Where operations are registered: the composition root, by its guarded handler methods. */
export interface IOperationHost {
  readonly store: DocumentStore;
  addAdminHandler(
    methodArg: string,
    fnArg: (requestArg: unknown, contextArg: IAdminHandlerContext) => Promise<unknown>,
    optionsArg: { access: TAdminAccess; contractOwnsDryRun?: boolean },
  ): void;
  addRelayHandler(methodArg: string, fnArg: (requestArg: unknown, contextArg: IRelayHandlerContext) => Promise<unknown>): void;
  /** Keeps what each registered declaration is (its kind, and an orchestration's reason), for tests and tools. */
  readonly declaredOperations?: Map<string, IOperationDeclaration>;
  /** What each method's request shape admits, as JSON Schema per member, for GET /schema (ts/core/schema.ts). */
  readonly checkedRequestMembers?: Map<string, Record<string, TCheckSchema>>;
}

/** A registered declaration as the host keeps it. */
export interface IOperationDeclaration {
  method: string;
  kind: TAnyOperation['kind'];
  access: TAdminAccess | 'relay';
  /** An orchestration's one line on why it is not a one-document mutation. */
  why?: string;
}

interface IShaped<M extends TCloudlyMethod> {
  method: M;
  /**
   * Who may call it (ts/core/access.ts): `read`, `own-session`, `write` or `admin-only` for an
   * administrator's method, `relay` for a relay's. Required: the guard enforces it, and a
   * declaration without one neither type-checks nor starts.
   */
  access: TAdminAccess | 'relay';
  /**
   * The request's members and their checks (ts/core/validation.ts); `'judged'` for a body that is
   * a contract value the operation judges whole itself, with refusals of that contract's own
   * (the ingress registration), so no `invalid-request` comes before its verdict.
   */
  input: IRequestShape | 'judged';
  /**
   * A member the shape admits as any value but the contract defines whole (a designation request):
   * read once into the typed request every later step sees, or every problem it is refused for.
   */
  parse?: (requestArg: TOperationRequest<M>) => { request: TOperationRequest<M> } | { problems: IFieldProblem[] };
  /** Problems that need more than one member (a range whose end is before its start); all are named. */
  check?: (requestArg: TOperationRequest<M>) => IFieldProblem[];
  /** Refusals in the contract's own error data instead of the catalogue's (see the file comment). */
  refusals?: IContractRefusals;
}

export interface IContractRefusals {
  /** The parse's and the checks' problems, answered instead of `invalid-request` (`sentenceOfProblem` words each as the contract does). */
  invalid?: (problemsArg: IFieldProblem[]) => TypedResponseError;
  /** A one-document mutation that lost every compare-and-swap round, answered instead of `conflict`. */
  conflict?: () => TypedResponseError;
}

export interface IAdminQueryDef<M extends TCloudlyMethod> extends IShaped<M> {
  access: TAdminAccess;
  run: (requestArg: TOperationRequest<M>, contextArg: IAdminHandlerContext) => Promise<TOperationAnswer<M>>;
}

/**
 * What an orchestration must say: in one line, why it is not a one-document mutation (the
 * documents it coordinates, or the relay call it makes). Required, and checked at registration.
 */
interface IOrchestrationReason {
  why: string;
}

export interface IAdminOrchestrationDef<M extends TCloudlyMethod> extends IShaped<M>, IOrchestrationReason {
  access: TAdminAccess;
  run: (requestArg: TOperationRequest<M>, contextArg: IAdminHandlerContext) => Promise<TOperationAnswer<M>>;
  /**
   * The contract defines `dryRun` for this method itself (the archive prune's preview, which the
   * node computes): it stays in the request and the host runs no dry run of its own.
   */
  contractOwnsDryRun?: boolean;
}

/** What `decide`, `answer` and `after` of a one-document mutation see. */
export interface IMutationStep<M extends TCloudlyMethod, TFacts> {
  request: TOperationRequest<M>;
  facts: TFacts;
  /** When the decision is made, epoch ms (one clock reading per attempt). */
  now: number;
}

export interface IMutationOutcome<T extends IStoredDocument> extends IMutateResult<T> {
  /** The document the committed decision was made on (null when there was none). */
  previous: T | null;
  /** What the committing write recorded for replays (a declaration with `replay`), else undefined. */
  recorded?: unknown;
}

/**
 * A decision of a mutation with `replay`: a write or a create carries `record`, what the write
 * stores under the mutation id and a replay answers from (decided with the write, never after it).
 */
export type TRecordedDecision<T extends IStoredDocument> = TDecision<T> & { record?: unknown };

/**
 * Idempotence by a mutation id the request carries: the same id with the same request answers
 * what was recorded, also after a restart and to a concurrent call that lost to it; the id with
 * another request is refused `mutation-id-reused` (naming `path`).
 */
export interface IMutationReplay<M extends TCloudlyMethod, T extends IStoredDocument> {
  /** The kind of the target document, where the answers are recorded. */
  kind: IDocumentKind<T>;
  mutationId: (requestArg: TOperationRequest<M>) => string;
  /** Where the id is in the request, as the reuse refusal names it. */
  path: string;
  /** Whether a recorded answer (and the document holding it) was made for this very request. */
  matches: (recordArg: { doc: T; answer: unknown }, requestArg: TOperationRequest<M>) => boolean;
  /** The answer a replay gives from what was recorded. */
  replayed: (recordedArg: unknown) => TOperationAnswer<M>;
}

interface IOneDocumentMutation<M extends TCloudlyMethod, T extends IStoredDocument, TFacts, TContext> extends IShaped<M> {
  /** Reads of other domains (through the domain's ports) the decision needs; run once, before the mutate. */
  facts?: (requestArg: TOperationRequest<M>, contextArg: TContext) => Promise<TFacts>;
  /** The one document the mutation decides on. */
  target: (requestArg: TOperationRequest<M>, factsArg: TFacts, contextArg: TContext) => { kind: IDocumentKind<T>; id: string };
  /** Pure: what to do with the document as it was read (ts/manager.<domain>/decide.ts). */
  decide: (currentArg: T | null, stepArg: IMutationStep<M, TFacts>) => TRecordedDecision<T>;
  /** Replays by the request's mutation id (see IMutationReplay); the decision records the answer. */
  replay?: IMutationReplay<M, T>;
  answer: (outcomeArg: IMutationOutcome<T>, stepArg: IMutationStep<M, TFacts>, contextArg: TContext) => TOperationAnswer<M> | Promise<TOperationAnswer<M>>;
  /** Follow-up work once the change committed (queue a push, log); skipped when nothing changed and in a dry run. */
  after?: (outcomeArg: IMutationOutcome<T>, stepArg: IMutationStep<M, TFacts>, contextArg: TContext) => void | Promise<void>;
}

export type IAdminMutationDef<M extends TCloudlyMethod, T extends IStoredDocument, TFacts> =
  IOneDocumentMutation<M, T, TFacts, IAdminHandlerContext> & { access: TAdminAccess };

export type IRelayMutationDef<M extends TCloudlyMethod, T extends IStoredDocument, TFacts> =
  IOneDocumentMutation<M, T, TFacts, IRelayHandlerContext> & { access: 'relay' };

export interface IRelayOrchestrationDef<M extends TCloudlyMethod> extends IShaped<M>, IOrchestrationReason {
  access: 'relay';
  run: (requestArg: TOperationRequest<M>, contextArg: IRelayHandlerContext) => Promise<TOperationAnswer<M>>;
}

export interface IRelayQueryDef<M extends TCloudlyMethod> extends IShaped<M> {
  access: 'relay';
  run: (requestArg: TOperationRequest<M>, contextArg: IRelayHandlerContext) => Promise<TOperationAnswer<M>>;
}

export type IAdminQuery<M extends TCloudlyMethod> = IAdminQueryDef<M> & { kind: 'admin-query' };
export type IAdminOrchestration<M extends TCloudlyMethod> = IAdminOrchestrationDef<M> & { kind: 'admin-orchestration' };
export type IAdminMutation<M extends TCloudlyMethod, T extends IStoredDocument, TFacts> = IAdminMutationDef<M, T, TFacts> & { kind: 'admin-mutation' };
export type IRelayMutation<M extends TCloudlyMethod, T extends IStoredDocument, TFacts> = IRelayMutationDef<M, T, TFacts> & { kind: 'relay-mutation' };
export type IRelayQuery<M extends TCloudlyMethod> = IRelayQueryDef<M> & { kind: 'relay-query' };
export type IRelayOrchestration<M extends TCloudlyMethod> = IRelayOrchestrationDef<M> & { kind: 'relay-orchestration' };

/** Any declared operation, as the pipeline reads it. */
type TAnyOperation =
  // The method, document and fact types are the declaring domain's business; the pipeline passes them along.
  | IAdminQuery<any> | IAdminOrchestration<any> | IAdminMutation<any, any, any>
  | IRelayMutation<any, any, any> | IRelayQuery<any> | IRelayOrchestration<any>;

/**
 * A declared operation as a domain hands it to the root. Deliberately carries no method type
 * parameter: a list of operations typed by it gives the declarations no contextual type, so each
 * one infers its own method name (and from it, its request and answer).
 */
export interface IDeclaredOperation {
  readonly kind: TAnyOperation['kind'];
  readonly method: TCloudlyMethod;
  readonly access: TAdminAccess | 'relay';
}

const relayKinds: ReadonlySet<TAnyOperation['kind']> = new Set(['relay-mutation', 'relay-query', 'relay-orchestration']);
const orchestrationKinds: ReadonlySet<TAnyOperation['kind']> = new Set(['admin-orchestration', 'relay-orchestration']);

/** The longest reason an orchestration may give: one line. */
export const maximumOrchestrationReasonLength = 200;

/**
 * An orchestration's reason, checked once at registration: one that gives none (a declaration
 * merged or cast past the type checker) stops the start with a sentence saying what to add.
 */
export const requireOrchestrationReason = (operationArg: { kind: TAnyOperation['kind']; method: string; why?: unknown }): string | undefined => {
  if (!orchestrationKinds.has(operationArg.kind)) {
    return undefined;
  }
  const why = operationArg.why;
  if (typeof why !== 'string' || why.trim() === '' || why.includes('\n') || why.length > maximumOrchestrationReasonLength) {
    throw new Error(`method ${operationArg.method} is a free-form ${operationArg.kind} but says not why in one line: add why: '<the documents it coordinates or the relay call it makes>' (at most ${maximumOrchestrationReasonLength} characters), or declare it as a one-document mutation`);
  }
  return why;
};

/**
 * The access a declaration names, checked once at registration: a missing or foreign value (a
 * declaration merged without one, or one cast past the type checker) stops the start with a
 * sentence saying what to add, and a relay method cannot claim an administrator's access.
 */
export const requireDeclaredAccess = (operationArg: { kind: TAnyOperation['kind']; method: string; access?: unknown }): TAdminAccess | 'relay' => {
  const access = operationArg.access;
  if (!isMethodAccess(access) || access === 'public') {
    throw new Error(missingAccessMessage(operationArg.method, access));
  }
  if (relayKinds.has(operationArg.kind) !== (access === 'relay')) {
    throw new Error(`method ${operationArg.method} is a ${operationArg.kind} but declares access '${access}': a relay's method declares 'relay', an administrator's one of 'read' | 'own-session' | 'write' | 'admin-only'`);
  }
  return access;
};

// Each declaration takes its definition whole (no mapped type around it), so the method name's
// literal type is inferred and every callback's request and answer follow from the method map.
export const adminQuery = <M extends TCloudlyMethod>(defArg: IAdminQueryDef<M>): IAdminQuery<M> =>
  ({ kind: 'admin-query', ...defArg });

export const adminOrchestration = <M extends TCloudlyMethod>(defArg: IAdminOrchestrationDef<M>): IAdminOrchestration<M> =>
  ({ kind: 'admin-orchestration', ...defArg });

export const adminMutation = <M extends TCloudlyMethod, T extends IStoredDocument, TFacts = undefined>(
  defArg: IAdminMutationDef<M, T, TFacts>,
): IAdminMutation<M, T, TFacts> => ({ kind: 'admin-mutation', ...defArg });

export const relayMutation = <M extends TCloudlyMethod, T extends IStoredDocument, TFacts = undefined>(
  defArg: IRelayMutationDef<M, T, TFacts>,
): IRelayMutation<M, T, TFacts> => ({ kind: 'relay-mutation', ...defArg });

export const relayQuery = <M extends TCloudlyMethod>(defArg: IRelayQueryDef<M>): IRelayQuery<M> =>
  ({ kind: 'relay-query', ...defArg });

export const relayOrchestration = <M extends TCloudlyMethod>(defArg: IRelayOrchestrationDef<M>): IRelayOrchestration<M> =>
  ({ kind: 'relay-orchestration', ...defArg });

/** Shape, then the parse and the cross-field checks: one refusal naming every reason. */
const readRequest = <M extends TCloudlyMethod>(operationArg: IShaped<M>, requestArg: unknown): TOperationRequest<M> => {
  if (operationArg.input === 'judged') {
    return requestArg as TOperationRequest<M>;
  }
  let request = requireRequestShape(requestArg, operationArg.input) as TOperationRequest<M>;
  const parsed = operationArg.parse?.(request);
  if (parsed && 'problems' in parsed) {
    throw refuseInvalid(operationArg, parsed.problems);
  }
  request = parsed?.request ?? request;
  const problems = operationArg.check?.(request) ?? [];
  if (problems.length > 0) {
    throw refuseInvalid(operationArg, problems);
  }
  return request;
};

const refuseInvalid = <M extends TCloudlyMethod>(operationArg: IShaped<M>, problemsArg: IFieldProblem[]): TypedResponseError =>
  operationArg.refusals?.invalid?.(problemsArg) ?? refuseFields(problemsArg);

/** The recorded answer of an earlier call under the request's mutation id, or null; another request under it is refused. */
const findReplay = async <M extends TCloudlyMethod, T extends IStoredDocument>(
  storeArg: DocumentStore,
  replayArg: IMutationReplay<M, T>,
  requestArg: TOperationRequest<M>,
): Promise<{ answer: TOperationAnswer<M> } | null> => {
  const found = await storeArg.findMutation(replayArg.kind, replayArg.mutationId(requestArg));
  if (!found) {
    return null;
  }
  if (!replayArg.matches(found, requestArg)) {
    throw mutationIdReusedRefusal(replayArg.path);
  }
  return { answer: replayArg.replayed(found.answer) };
};

const runOneDocumentMutation = async <M extends TCloudlyMethod, T extends IStoredDocument, TFacts, TContext>(
  storeArg: DocumentStore,
  operationArg: IOneDocumentMutation<M, T, TFacts, TContext>,
  requestArg: unknown,
  contextArg: TContext,
): Promise<TOperationAnswer<M>> => {
  const request = readRequest(operationArg, requestArg);
  const replay = operationArg.replay;
  const earlier = replay ? await findReplay(storeArg, replay, request) : null;
  if (earlier) {
    return earlier.answer;
  }
  const facts = (operationArg.facts ? await operationArg.facts(request, contextArg) : undefined) as TFacts;
  const target = operationArg.target(request, facts, contextArg);
  let previous: T | null = null;
  let step: IMutationStep<M, TFacts> = { request, facts, now: Date.now() };
  // The store reads the answer to record when it writes, so each round's decision fills it in first.
  const recording: IMutationAnswer | undefined = replay ? { mutationId: replay.mutationId(request), answer: undefined } : undefined;
  let result: IMutateResult<T>;
  try {
    result = await storeArg.mutate(target.kind, target.id, (currentArg) => {
      previous = currentArg;
      step = { request, facts, now: Date.now() };
      const decision = operationArg.decide(currentArg, step);
      if (recording && (decision.kind === 'write' || decision.kind === 'create')) {
        if (decision.record === undefined) {
          throw new Error(`method ${operationArg.method} declares replay but its ${decision.kind} decision records no answer`);
        }
        recording.answer = decision.record;
      }
      return decision;
    }, recording ? { mutation: recording } : {});
  } catch (error) {
    // The same mutation may have committed in a concurrent call: its answer is this call's too.
    const concurrent = replay ? await findReplay(storeArg, replay, request) : null;
    if (concurrent) {
      return concurrent.answer;
    }
    if (operationArg.refusals?.conflict && isLostEveryRound(error)) {
      throw operationArg.refusals.conflict();
    }
    throw error;
  }
  const outcome: IMutationOutcome<T> = { ...result, previous, ...(recording ? { recorded: recording.answer } : {}) };
  const answer = await operationArg.answer(outcome, step, contextArg);
  // A dry run has no follow-ups: nothing was written for them to follow.
  if (operationArg.after && outcome.outcome !== 'kept' && !currentOperation().dryRun) {
    await operationArg.after(outcome, step, contextArg);
  }
  return answer;
};

/** Registers every operation on the host: the one pipeline. */
export const registerOperations = (hostArg: IOperationHost, operationsArg: readonly IDeclaredOperation[]): void => {
  for (const operation of operationsArg as readonly TAnyOperation[]) {
    const access = requireDeclaredAccess(operation);
    const why = requireOrchestrationReason(operation);
    hostArg.declaredOperations?.set(operation.method, {
      method: operation.method,
      kind: operation.kind,
      access,
      ...(why ? { why } : {}),
    });
    if (operation.input !== 'judged') {
      hostArg.checkedRequestMembers?.set(operation.method, shapeSchema(operation.input));
    }
    switch (operation.kind) {
      case 'admin-query':
        hostArg.addAdminHandler(operation.method, async (requestArg, contextArg) =>
          operation.run(readRequest(operation, requestArg), contextArg), { access: operation.access });
        break;
      case 'admin-orchestration':
        hostArg.addAdminHandler(operation.method, async (requestArg, contextArg) =>
          operation.run(readRequest(operation, requestArg), contextArg),
        { access: operation.access, ...(operation.contractOwnsDryRun ? { contractOwnsDryRun: true } : {}) });
        break;
      case 'admin-mutation':
        hostArg.addAdminHandler(operation.method, async (requestArg, contextArg) =>
          runOneDocumentMutation(hostArg.store, operation, requestArg, contextArg), { access: operation.access });
        break;
      case 'relay-mutation':
        hostArg.addRelayHandler(operation.method, async (requestArg, contextArg) =>
          runOneDocumentMutation(hostArg.store, operation, requestArg, contextArg));
        break;
      case 'relay-query':
      case 'relay-orchestration':
        hostArg.addRelayHandler(operation.method, async (requestArg, contextArg) =>
          operation.run(readRequest(operation, requestArg), contextArg));
        break;
    }
  }
};
