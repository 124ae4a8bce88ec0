import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { CloudlyRelayClient } from '../ts/client/relay.js';
import { Writable } from 'node:stream';
import { createLogger } from '../ts/core/logger.js';
import { defaultRelayActivityBudget, RelayActivityLog, relayActivitySummaryMessage } from '../ts/core/relayactivity.js';

/**
 * Each relay's own log lines (socket opened, elected, registration accepted, socket closed) are
 * written at info up to a budget per window; past it they go to debug and the window ends with one
 * info line that counts them (ts/core/relayactivity.ts). A storm of thousands of reconnects used
 * to write five info lines per relay, 6% of the instances' busy time in the fleet bench.
 */

const registration = { origin: 'http://192.0.2.10:8080', version: '1.0.0', protocol: 'cluster-relay/1' as const };
const relayMessages = ['relay socket opened', 'relay socket elected', 'relay registration accepted', 'relay socket closed'];

interface ILine { level: number; msg: string; time?: number; clusterId?: string; lines?: Record<string, number> }

const linesOf = (tArg: ITestCloudly): ILine[] => tArg.logs.join('').split('\n').filter(Boolean).map((line) => JSON.parse(line) as ILine);

describe('relay log lines within a budget', () => {
  let t: ITestCloudly;
  before(async () => {
    t = await startTestCloudly({ logLevel: 'info' });
  });
  after(async () => { await t.stop(); });

  test(`a storm of relays writes at most ${defaultRelayActivityBudget.budget} of their lines at info per window, and one line counting the rest`, async () => {
    const relayCount = 30;
    const tokens: string[] = [];
    for (let index = 0; index < relayCount; index++) {
      tokens.push((await t.createCluster(`activity-${index}`)).relayToken);
    }
    const startAt = t.logs.length;
    const relays = await Promise.all(tokens.map((token) => CloudlyRelayClient.connect(t.baseUrl, token, { reconnect: false, registration })));
    for (const relay of relays) {
      relay.close();
    }
    await waitFor(() => t.cloudly.relays.socketCount === 0, 'every relay socket closed on the server');
    // Every line a relay caused, at info or debug: counted at the window's end.
    t.cloudly.relays.activity.flush();
    const lines = linesOf({ ...t, logs: t.logs.slice(startAt) });
    const infoLines = lines.filter((line) => line.level === 30 && relayMessages.includes(line.msg));
    const summaries = lines.filter((line) => line.msg === relayActivitySummaryMessage);
    // The summaries count every relay line past the budget; the four kinds of the storm are compared
    // (a relay also causes others, such as a hint that found its socket closing).
    const counted = summaries.reduce((sum, line) => sum + Object.entries(line.lines ?? {})
      .filter(([message]) => relayMessages.includes(message)).reduce((inner, [, count]) => inner + count, 0), 0);
    console.log(`${infoLines.length} relay lines at info, ${counted} counted in ${summaries.length} summary line(s)`);
    // 30 relays × 4 lines: 120 lines, in one window of 10 s unless the machine is very slow.
    const times = lines.filter((line) => relayMessages.includes(line.msg)).map((line) => line.time ?? 0);
    const windows = Math.floor((Math.max(...times) - Math.min(...times)) / defaultRelayActivityBudget.windowMs) + 1;
    assert.ok(infoLines.length <= defaultRelayActivityBudget.budget * windows, `at most the budget at info per window: ${infoLines.length} in ${windows}`);
    assert.equal(infoLines.length + counted, relayCount * relayMessages.length, 'every line written at info or counted');
    assert.ok(summaries.length >= 1, 'the lines past the budget are counted at info');
  });

  test('past the budget lines go to debug and are counted when the window ends; the next window logs at info again', async () => {
    const written: string[] = [];
    const logger = createLogger('debug', new Writable({ write(chunkArg, _encodingArg, callbackArg) { written.push(chunkArg.toString()); callbackArg(); } }), 'json');
    const activity = new RelayActivityLog(logger, { budget: 2, windowMs: 300 });
    for (let index = 0; index < 5; index++) {
      activity.line({ clusterId: `c${index}` }, 'relay socket opened');
    }
    const read = (): ILine[] => written.join('').split('\n').filter(Boolean).map((line) => JSON.parse(line) as ILine);
    assert.deepEqual(read().map((line) => [line.level, line.clusterId]), [[30, 'c0'], [30, 'c1'], [20, 'c2'], [20, 'c3'], [20, 'c4']]);
    await waitFor(() => read().some((line) => line.msg === relayActivitySummaryMessage), 'the window ends with its count', 5_000);
    assert.deepEqual(read().find((line) => line.msg === relayActivitySummaryMessage)?.lines, { 'relay socket opened': 3 });
    activity.line({ clusterId: 'c5' }, 'relay socket closed');
    assert.deepEqual(read().at(-1) && [read().at(-1)!.level, read().at(-1)!.clusterId], [30, 'c5']);
    activity.flush();
  });
});
