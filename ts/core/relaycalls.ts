import { TypedResponseError } from '@api.global/typedrequest';
import { PeerUnavailableError } from './envelopepeer.js';
import { isRefusal, isRefusalReasonToken, type IRefusalCause } from './errors.js';
import { problemsOfSentences } from './validation.js';

/**
 * Everything Cloudly calls on a relay, in one table: each method's timeout class, and the one
 * mapping from "the call did not give a usable answer" to what Cloudly's own caller is told.
 * `docs/relay-protocol.md` lists the same methods; a test holds the two together.
 */

/** How long a class of Cloudly → relay calls may take before it ends as `relay-timeout`. */
export interface IRelayCallTimeouts {
  /** A hint the relay only acknowledges; losing one costs nothing (the relay pulls). */
  hint: number;
  /** Reads and small writes a caller waits for (`CLOUDLY_RELAY_CALL_TIMEOUT_MS`). */
  ordinary: number;
  /** Archive work on a node: prune, isolated-restore steps (`CLOUDLY_RELAY_ARCHIVE_CALL_TIMEOUT_MS`). */
  archive: number;
  /** A whole node backup or restore (`CLOUDLY_RELAY_BACKUP_CALL_TIMEOUT_MS`). */
  backup: number;
}

export type TRelayCallTimeoutClass = keyof IRelayCallTimeouts;

export const defaultRelayCallTimeouts: IRelayCallTimeouts = Object.freeze({
  hint: 5_000,
  ordinary: 15_000,
  archive: 5 * 60_000,
  backup: 15 * 60_000,
});

/** Every method Cloudly calls on a relay, and its timeout class. */
export const cloudlyToRelayCalls = {
  getClusterCorestoreLegacyResources: 'ordinary',
  getClusterTrafficStatistics: 'ordinary',
  applyRuntimeLocalStorageClaim: 'ordinary',
  pushClusterIngressRouteTableChanged: 'hint',
  pushClusterPlatformDesiredStateChanged: 'hint',
  pushClusterRouteCertificatesChanged: 'hint',
  backupClusterService: 'backup',
  restoreClusterService: 'backup',
  pruneClusterNodeArchive: 'archive',
  coreflowPrepareIsolatedRestore: 'archive',
  stageIsolatedRestoreArchive: 'archive',
  coreflowGetIsolatedRestoreStatus: 'ordinary',
  coreflowExecuteIsolatedRestore: 'archive',
  coreflowCleanupIsolatedRestore: 'archive',
} as const satisfies Record<string, TRelayCallTimeoutClass>;

export type TCloudlyToRelayMethod = keyof typeof cloudlyToRelayCalls;

export const isCloudlyToRelayMethod = (methodArg: string): methodArg is TCloudlyToRelayMethod =>
  Object.hasOwn(cloudlyToRelayCalls, methodArg);

/** The timeout of one method; a method outside the table (tests, extensions) gets `ordinary`. */
export const relayCallTimeoutMs = (methodArg: string, timeoutsArg: IRelayCallTimeouts): number =>
  timeoutsArg[isCloudlyToRelayMethod(methodArg) ? cloudlyToRelayCalls[methodArg] : 'ordinary'];

/** Reasons of the `unavailable` answer Cloudly gives when a relay call gave no usable answer. */
export const relayCallFailureReasons = {
  notConnected: 'relay-not-connected',
  timeout: 'relay-timeout',
  disconnected: 'relay-disconnected',
  /** The relay answered with an error envelope; its code and reasons travel in `relayError`. */
  refused: 'relay-refused',
  /** The relay's answer does not match the contract; the reasons after it name each member. */
  answerInvalid: 'relay-answer-invalid',
  /** The call could not be made at all (e.g. the request could not be sent). */
  failed: 'relay-failed',
} as const;

/** The relay's own refusal, as Cloudly passes it on: bounded, so a relay cannot flood a caller or a log. */
export interface IRelayErrorData {
  code: string | null;
  retryable?: boolean;
  reasons: string[];
  /** The relay's sentences for people (its refusal's `causes`), bounded like the reasons. */
  causes?: Array<{ path?: string; message: string }>;
}

export const maximumRelayErrorReasons = 16;
export const maximumRelayErrorReasonLength = 512;
const maximumRelayErrorCodeLength = 64;

/** Cuts a text that came from a relay to `maxArg` characters (plus an ellipsis), for answers and logs. */
export const boundRelayText = (valueArg: string, maxArg: number = maximumRelayErrorReasonLength): string =>
  (valueArg.length <= maxArg ? valueArg : `${valueArg.slice(0, maxArg)}…`);

/** Reads a relay's error data into the bounded shape, whatever the relay sent. */
export const readRelayErrorData = (valueArg: unknown): IRelayErrorData => {
  const data = valueArg && typeof valueArg === 'object' && !Array.isArray(valueArg) ? valueArg as Record<string, unknown> : {};
  const reasons = Array.isArray(data.reasons) ? data.reasons.filter((reason): reason is string => typeof reason === 'string') : [];
  const causes = (Array.isArray(data.causes) ? data.causes : [])
    .filter((cause): cause is { path?: unknown; message: string } => !!cause && typeof cause === 'object' && typeof (cause as { message?: unknown }).message === 'string')
    .slice(0, maximumRelayErrorReasons)
    .map((cause) => ({
      ...(typeof cause.path === 'string' ? { path: boundRelayText(cause.path, maximumRelayErrorCodeLength) } : {}),
      message: boundRelayText(cause.message, maximumRelayErrorReasonLength),
    }));
  return {
    code: typeof data.code === 'string' ? boundRelayText(data.code, maximumRelayErrorCodeLength) : null,
    ...(typeof data.retryable === 'boolean' ? { retryable: data.retryable } : {}),
    reasons: reasons.slice(0, maximumRelayErrorReasons).map((reason) => boundRelayText(reason, maximumRelayErrorReasonLength)),
    ...(causes.length > 0 ? { causes } : {}),
  };
};

const unavailableText = 'The service needed for this request is unavailable.';

/** `unavailable` with the given reasons (the catalogue's shape, plus `relayError` when the relay refused). */
export const relayUnavailable = (reasonsArg: string[], relayErrorArg?: IRelayErrorData, causesArg: IRefusalCause[] = []): TypedResponseError =>
  new TypedResponseError(unavailableText, {
    code: 'unavailable',
    // A relay's own refusal that says it will not change is passed on as not worth retrying.
    retryable: relayErrorArg?.retryable ?? true,
    reasons: reasonsArg,
    ...(causesArg.length > 0 ? { causes: causesArg } : {}),
    ...(relayErrorArg ? { relayError: relayErrorArg } : {}),
  });

/**
 * `relay-answer-invalid` with what was wrong with the answer: flaws that are tokens (`frame-too-large`)
 * follow it in `reasons`; sentences (`answer.snapshots[0].type must be …`) become causes, each
 * naming the member under `answer` it is about. At most `maximumRelayErrorReasons` flaws, each bounded.
 */
const answerInvalidRefusal = (flawsArg: readonly string[]): TypedResponseError => {
  const flaws = flawsArg.slice(0, maximumRelayErrorReasons).map((flawArg) => boundRelayText(flawArg, maximumRelayErrorReasonLength));
  const causes = problemsOfSentences(flaws.filter((flawArg) => !isRefusalReasonToken(flawArg)), 'answer')
    .map(({ path, message }) => ({ path, message }));
  return relayUnavailable([relayCallFailureReasons.answerInvalid, ...flaws.filter(isRefusalReasonToken)], undefined, causes);
};

/**
 * The one mapping of a failed Cloudly → relay call: no answer is `relay-not-connected`,
 * `relay-timeout` or `relay-disconnected`; the relay's own refusal is `relay-refused` with the
 * relay's code and reasons in `relayError` (never the caller's own `invalid-request`); anything
 * else is `relay-failed`. All are `unavailable`.
 */
export const relayCallRefusal = (errorArg: unknown): TypedResponseError => {
  if (errorArg instanceof PeerUnavailableError) {
    return relayUnavailable([errorArg.failure === 'timeout'
      ? relayCallFailureReasons.timeout
      : errorArg.failure === 'not-open' ? relayCallFailureReasons.notConnected : relayCallFailureReasons.disconnected]);
  }
  if (isRefusal(errorArg)) {
    return relayUnavailable([relayCallFailureReasons.refused], readRelayErrorData(errorArg.errorData));
  }
  // The socket's answer reader refused the answer itself (too large, not an envelope): read by
  // name so this mapping does not depend on which reader produced it.
  if (errorArg instanceof Error && errorArg.name === 'PeerAnswerMalformedError') {
    const reasons = (errorArg as Error & { reasons?: unknown }).reasons;
    return answerInvalidRefusal(Array.isArray(reasons) ? reasons.filter((reason): reason is string => typeof reason === 'string') : []);
  }
  return relayUnavailable([relayCallFailureReasons.failed]);
};

/** The outcome label of a failed call for metrics: the first reason of its refusal. */
export const relayCallOutcomeOf = (refusalArg: TypedResponseError): string =>
  String((refusalArg.errorData as { reasons?: string[] } | undefined)?.reasons?.[0] ?? 'relay-failed');

/**
 * Refuses an answer that does not match the contract: `unavailable`, `relay-answer-invalid`, and
 * every flaw as a cause naming the member under `answer` (`answer.snapshots[0].type`).
 */
export const requireValidRelayAnswer = (reasonsArg: string[]): void => {
  if (reasonsArg.length > 0) {
    throw answerInvalidRefusal(reasonsArg);
  }
};
