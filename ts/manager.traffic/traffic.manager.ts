import type { Cloudly } from '../classes.cloudly.js';
import { refuseNamed } from '../core/errors.js';
import { requireValidRelayAnswer } from '../core/relaycalls.js';
import { describedCheck, invalidField, isIdString, isIntegerIn, isString, stringSchema, type TFieldCheck } from '../core/validation.js';
import { adminQuery, registerOperations } from '../core/operations.js';
import {
  clusterTrafficStatisticsContract as contract,
  readUtcDay,
  snapshotClusterTrafficStatistics,
  utcDayPattern,
  validateClusterTrafficStatistics,
  type IClusterTrafficStatistics,
} from '../interfaces/data/clustertraffic.js';
import type {
  IReq_Any_Cloudly_GetClusterTrafficStatistics,
  IReq_Cloudly_Relay_GetClusterTrafficStatistics,
} from '../interfaces/requests/traffic.js';

const dayMs = 86_400_000;

// The schema states the form; the server also refuses a day that does not exist (2026-02-30).
const isUtcDay: TFieldCheck = describedCheck(stringSchema(10, 10, utcDayPattern), (valueArg, pathArg) =>
  (readUtcDay(valueArg) === null ? [invalidField(pathArg, `must be a UTC day YYYY-MM-DD`)] : []));

const isLimit: TFieldCheck = isIntegerIn(1, contract.maximumLimit);

const isCursor = isString(1, contract.maximumCursorLength);

/**
 * The cluster's ingress traffic, read through its relay (spec 001: `getClusterTrafficStatistics`,
 * Cloudly → relay → ingress). Cloudly keeps no copy: the ingress owns its counters and its cursor,
 * and Cloudly checks the shape of what comes back (records inside the asked range, on the
 * cluster's nodes, no more than the limit) before an administrator sees it.
 */
export class TrafficManager {
  constructor(private readonly cloudly: Cloudly) {
    registerOperations(cloudly, [adminQuery({
      method: 'getClusterTrafficStatistics',
      access: 'read',
      input: {
        required: { clusterId: isIdString, fromDayUtc: isUtcDay, toDayUtc: isUtcDay },
        optional: { cursor: isCursor, limit: isLimit },
      },
      check(request) {
        const from = readUtcDay(request.fromDayUtc)!;
        const to = readUtcDay(request.toDayUtc)!;
        if (to < from) {
          return [invalidField('request.toDayUtc', 'must not be before request.fromDayUtc')];
        }
        const days = (to - from) / dayMs + 1;
        return days > contract.maximumRangeDays
          ? [invalidField('request.toDayUtc', `spans ${days} days from request.fromDayUtc; at most ${contract.maximumRangeDays} days per read`)]
          : [];
      },
      run: async (request) => {
        if (!(await cloudly.clusterManager.getCluster(request.clusterId))) {
          throw refuseNamed('not-found', 'cluster-not-found', `cluster ${request.clusterId} does not exist`);
        }
        const ask: IReq_Cloudly_Relay_GetClusterTrafficStatistics['request'] = {
          fromDayUtc: request.fromDayUtc,
          toDayUtc: request.toDayUtc,
          limit: request.limit ?? contract.defaultLimit,
          ...(request.cursor !== undefined ? { cursor: request.cursor } : {}),
        };
        const answer = await cloudly.relays.ask(request.clusterId, 'getClusterTrafficStatistics', ask);
        const nodeIds = new Set((await cloudly.clusterManager.nodes.listNodes(request.clusterId)).map((node) => node.id));
        return this.readAnswer(answer, ask, readUtcDay(request.fromDayUtc)!, readUtcDay(request.toDayUtc)!, nodeIds);
      },
    })]);
  }

  /** The relay's answer checked against what was asked; any flaw is `relay-answer-invalid`, naming it. */
  private readAnswer(
    answerArg: unknown,
    askArg: IReq_Cloudly_Relay_GetClusterTrafficStatistics['request'],
    fromArg: number,
    toArg: number,
    nodeIdsArg: ReadonlySet<string>,
  ): IReq_Any_Cloudly_GetClusterTrafficStatistics['response'] {
    const reasons: string[] = [];
    if (typeof answerArg !== 'object' || answerArg === null || Array.isArray(answerArg)) {
      requireValidRelayAnswer(['answer must be { statistics, nextCursor? }']);
    }
    const answer = answerArg as Record<string, unknown>;
    for (const key of Object.keys(answer)) {
      if (key !== 'statistics' && key !== 'nextCursor') {
        reasons.push(`answer.${key} is not a member of the answer`);
      }
    }
    const statistics = Object.getOwnPropertyDescriptor(answer, 'statistics')?.value;
    const nextCursor = Object.getOwnPropertyDescriptor(answer, 'nextCursor')?.value;
    if (!Array.isArray(statistics)) {
      reasons.push('answer.statistics must be an array');
    } else {
      if (statistics.length > askArg.limit) {
        reasons.push(`answer.statistics holds ${statistics.length} records; the limit asked was ${askArg.limit}`);
      }
      statistics.slice(0, askArg.limit).forEach((record: unknown, index: number) => {
        const path = `answer.statistics[${index}]`;
        const recordReasons = validateClusterTrafficStatistics(record, path);
        reasons.push(...recordReasons);
        if (recordReasons.length === 0) {
          const typed = record as IClusterTrafficStatistics;
          const day = readUtcDay(typed.dayUtc)!;
          if (day < fromArg || day > toArg) {
            reasons.push(`${path}.dayUtc ${typed.dayUtc} is outside ${askArg.fromDayUtc}..${askArg.toDayUtc}`);
          }
          if (!nodeIdsArg.has(typed.nodeId)) {
            reasons.push(`${path}.nodeId ${typed.nodeId} is not a node of the cluster`);
          }
        }
      });
    }
    if (nextCursor !== undefined && (typeof nextCursor !== 'string' || nextCursor.length === 0 || nextCursor.length > contract.maximumCursorLength)) {
      reasons.push(`answer.nextCursor must be a string of 1 to ${contract.maximumCursorLength} characters`);
    }
    requireValidRelayAnswer(reasons);
    return {
      statistics: (statistics as IClusterTrafficStatistics[]).map(snapshotClusterTrafficStatistics),
      ...(nextCursor !== undefined ? { nextCursor: nextCursor as string } : {}),
    };
  }
}
