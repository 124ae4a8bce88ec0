/**
 * A stream of `updateService` calls from a worker thread of the bench's process (bench/reconciler.bench.ts):
 * the load generator on its own thread, as an administrator's client is on its own machine, so the
 * server's event loop carries only the server. Started through bench/helpers/tsworker.mjs with
 * `workerData: { entry, job }`; posts one `IUpdateStreamResult` when every call has answered. The
 * bench's own thread sends its stream with the same `sendPaced`.
 */
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { CloudlyAdminClient } from '../../ts/client/admin.js';
import type { IReq_Any_Cloudly_UpdateService } from '../../ts/interfaces/requests/service.js';

export interface IUpdateStreamJob {
  baseUrl: string;
  username: string;
  password: string;
  /** Calls a second. */
  rate: number;
  /** One `updateService` request per call, sent in this order. */
  requests: Array<IReq_Any_Cloudly_UpdateService['request']>;
}

export interface IUpdateStreamResult {
  /** When each call was sent, in epoch milliseconds (`performance.timeOrigin + performance.now()`), by the request's index. */
  sentAt: number[];
  /** Each call's time to its answer, in ms. */
  callTimes: number[];
  /** From the first call sent to the last one answered. */
  seconds: number;
}

/**
 * Sends `requestsArg` at `rateArg` calls a second, each at its due time whether or not the ones
 * before it have answered, and answers when every call has: the pacing both the bench's own thread
 * and the worker use.
 */
export const sendPaced = async (
  adminArg: CloudlyAdminClient,
  requestsArg: Array<IReq_Any_Cloudly_UpdateService['request']>,
  rateArg: number,
): Promise<IUpdateStreamResult> => {
  const sentAt: number[] = new Array(requestsArg.length);
  const callTimes: number[] = [];
  const started = performance.now();
  const calls: Array<Promise<unknown>> = [];
  for (let index = 0; index < requestsArg.length; index++) {
    const wait = started + (index * 1000) / rateArg - performance.now();
    if (wait > 0) {
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
    const began = performance.now();
    sentAt[index] = performance.timeOrigin + began;
    calls.push(adminArg.call<IReq_Any_Cloudly_UpdateService>('updateService', requestsArg[index]).then(() => callTimes.push(performance.now() - began)));
  }
  await Promise.all(calls);
  return { sentAt, callTimes, seconds: (performance.now() - started) / 1000 };
};

// As a worker thread: its own admin client, one stream, its result posted back.
if (!isMainThread && parentPort) {
  const job = (workerData as { job: IUpdateStreamJob }).job;
  const admin = new CloudlyAdminClient(job.baseUrl);
  await admin.login(job.username, job.password);
  await admin.connectSocket();
  const result = await sendPaced(admin, job.requests, job.rate);
  admin.close();
  parentPort.postMessage(result);
}
