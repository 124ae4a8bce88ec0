/**
 * A stream of `updateService` calls from a worker thread of the bench's process (bench/reconciler.bench.ts):
 * the load generator on its own thread, as an administrator's client is on its own machine, so the
 * server's event loop carries only the server. Started through bench/helpers/tsworker.mjs with
 * `workerData: { entry, job }`; posts one `IUpdateStreamResult` when every call has answered.
 */
import { parentPort, workerData } from 'node:worker_threads';
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
  seconds: number;
}

const job = (workerData as { job: IUpdateStreamJob }).job;
const admin = new CloudlyAdminClient(job.baseUrl);
await admin.login(job.username, job.password);
await admin.connectSocket();
const sentAt: number[] = new Array(job.requests.length);
const callTimes: number[] = [];
const started = performance.now();
const calls: Array<Promise<unknown>> = [];
for (let index = 0; index < job.requests.length; index++) {
  const wait = started + (index * 1000) / job.rate - performance.now();
  if (wait > 0) {
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
  const began = performance.now();
  sentAt[index] = performance.timeOrigin + began;
  calls.push(admin.call<IReq_Any_Cloudly_UpdateService>('updateService', job.requests[index]).then(() => callTimes.push(performance.now() - began)));
}
await Promise.all(calls);
const result: IUpdateStreamResult = { sentAt, callTimes, seconds: (performance.now() - started) / 1000 };
admin.close();
parentPort!.postMessage(result);
