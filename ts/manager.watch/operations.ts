import { EnvelopePeer } from '../core/envelopepeer.js';
import { refuseNamed } from '../core/errors.js';
import { adminQuery, type IAdminHandlerContext, type IDeclaredOperation, type TOperationRequest } from '../core/operations.js';
import { fieldProblem, fieldProblemReasons, type IFieldProblem, isArrayOf, isIdString, isNonNegativeInteger, isString } from '../core/validation.js';

/**
 * `watchChanges` / `unwatchChanges` as declared operations: the pipeline runs the guard (identity,
 * role, dry-run flag) and the shape check with every reason, as for every other method. They are
 * declared as queries: like Kubernetes' watch (a GET), a watch reads the change stream and writes
 * no document, so there is no target to decide on, nothing to audit and nothing to swap. The
 * stream itself (revisions, replay, back-pressure, the shared audit log) is not a request and
 * stays in ./watch.manager.ts, behind `IWatchPorts`.
 */

const maxKinds = 64;

export type TWatchRequest = TOperationRequest<'watchChanges'>;

/** What the declarations need from the stream: register and stop a watcher of one socket. */
export interface IWatchPorts {
  /** Registers a watcher on the socket (none in a dry run) and answers its id and the current revision. */
  watch(requestArg: TWatchRequest, peerArg: EnvelopePeer): Promise<{ watchId: string; revision: number }>;
  /** Stops the socket's watcher (not in a dry run); false when the socket has no such watcher. The socket is read only when the watcher exists. */
  unwatch(watchIdArg: string, peerArg: () => EnvelopePeer): boolean;
  /** The kinds a change can carry (the audited document kinds): a watch of any other kind would match nothing. */
  watchableKinds(): ReadonlySet<string>;
}

/**
 * Every named kind that no change can carry, by its path: `cluster` for `CloudlyCluster` would
 * be accepted and silently match nothing, so it is refused.
 */
export const judgeWatchKinds = (kindsArg: readonly string[] | undefined, watchableArg: ReadonlySet<string>): IFieldProblem[] =>
  (kindsArg ?? []).flatMap((kindArg, indexArg) => (watchableArg.has(kindArg)
    ? []
    : [fieldProblem(`request.kinds[${indexArg}]`, fieldProblemReasons.notSupported,
      `names no watchable kind: ${JSON.stringify(kindArg)} (kinds are document kinds such as CloudlyCluster)`)]));

/** The admin socket the call came on: the transport puts it into the socket's per-connection data. */
const peerOf = (contextArg: IAdminHandlerContext): EnvelopePeer => {
  const peer = contextArg.transport === 'socket' ? contextArg.localData.peer : undefined;
  if (peer instanceof EnvelopePeer) {
    return peer;
  }
  throw refuseNamed('invalid-request', 'admin-socket-only', 'watchChanges is served only on the admin socket (GET /typedsocket)', 'method');
};

export const watchOperations = (portsArg: IWatchPorts): IDeclaredOperation[] => [
  adminQuery({
    method: 'watchChanges',
    access: 'read',
    input: {
      required: {},
      optional: { kinds: isArrayOf(isString(1, 128), maxKinds), clusterId: isIdString, sinceRevision: isNonNegativeInteger },
    },
    check: (request) => judgeWatchKinds(request.kinds, portsArg.watchableKinds()),
    run: async (request, context) => portsArg.watch(request, peerOf(context)),
  }),

  adminQuery({
    method: 'unwatchChanges',
    access: 'read',
    input: { required: { watchId: isString(1, 128) } },
    run: async (request, context) => ({ stopped: portsArg.unwatch(request.watchId, () => peerOf(context)) }),
  }),
];
