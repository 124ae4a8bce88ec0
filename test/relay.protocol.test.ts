import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import { startTestCloudly, type ITestCloudly } from './helpers/cloudly.js';
import { cloudlyToRelayCalls, defaultRelayCallTimeouts, relayCallFailureReasons } from '../ts/core/relaycalls.js';
import { streamAbortReasons, streamFrameKinds, streamFrameVersion, defaultStreamChunkBytes, maximumOpenStreamsPerChannel } from '../ts/core/streams.js';
import { backupRefusalReasons } from '../ts/manager.backup/backup.manager.js';
import { readConfig } from '../ts/config.js';
import { secretRefusalReasons } from '../ts/manager.secret/decide.js';

/**
 * docs/relay-protocol.md cannot drift: its method tables are read here and held against the
 * contracts module, the running server's relay handlers and the table of calls Cloudly makes;
 * its frame kinds, timeouts and reasons against the constants that define them.
 */

const doc = await fsp.readFile('docs/relay-protocol.md', 'utf8');

/** The rows of the table under a heading: each row's cells, backticks kept. */
const tableUnder = (headingArg: string): string[][] => {
  const start = doc.indexOf(`\n${headingArg}\n`);
  assert.ok(start >= 0, `the document has a heading ${headingArg}`);
  const rest = doc.slice(start + headingArg.length + 2);
  const section = rest.slice(0, rest.search(/\n#{2,3} /) === -1 ? undefined : rest.search(/\n#{2,3} /));
  return section.split('\n')
    .filter((line) => line.startsWith('| ') && !line.startsWith('| ---'))
    .slice(1)
    .map((line) => line.slice(2, -2).split(/ (?<!\\)\| /).map((cell) => cell.trim()));
};
const methodOf = (cellArg: string): string => {
  const match = /^`(\w+)`$/.exec(cellArg);
  assert.ok(match, `a method cell is one name in backticks: ${cellArg}`);
  return match[1];
};

/** Method names of the contracts module's types with this prefix (the types are the only place they live). */
const contractMethods = async (prefixPatternArg: string): Promise<string[]> => {
  const methods: string[] = [];
  for (const file of await fsp.readdir('ts/interfaces/requests')) {
    const text = await fsp.readFile(`ts/interfaces/requests/${file}`, 'utf8');
    for (const match of text.matchAll(new RegExp(`export type IReq_(?:${prefixPatternArg})_\\w+ = ITypedContract<\\s*'(\\w+)'`, 'g'))) {
      methods.push(match[1]);
    }
  }
  return methods.sort();
};

describe('docs/relay-protocol.md matches the code', () => {
  let t: ITestCloudly;
  before(async () => { t = await startTestCloudly(); });
  after(async () => { await t.stop(); });

  test('relay → Cloudly: the document, the contracts module and the server\'s relay handlers name the same methods', async () => {
    const documented = tableUnder('### Relay → Cloudly methods').map((row) => methodOf(row[0])).sort();
    assert.deepEqual(documented, await contractMethods('Relay_Cloudly'));
    // A relay handler is the one a caller without a relay socket is `forbidden` to call.
    const served: string[] = [];
    for (const handler of t.cloudly.router.handlerMap.getArray()) {
      const answer = await fetch(`${t.baseUrl}/typedrequest`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ method: handler.method, request: {}, response: null, correlation: { id: 'probe', phase: 'request' } }),
      }).then((response) => response.json() as Promise<{ error?: { data?: { code?: string } } }>);
      if (answer.error?.data?.code === 'forbidden') {
        served.push(handler.method);
      }
    }
    assert.deepEqual(served.sort(), documented);
  });

  test('Cloudly → relay: the document names every method Cloudly calls, with the timeout class of the call table', async () => {
    const documented = Object.fromEntries(tableUnder('### Cloudly → relay methods').map((row) => [methodOf(row[0]), row.at(-1)]));
    assert.deepEqual(documented, { ...cloudlyToRelayCalls });
    assert.deepEqual(Object.keys(documented).sort(), await contractMethods('Cloudly_Relay|Cloudly_Coreflow|Controller_Pallet'));
  });

  test('timeouts: every class with its default and variable', () => {
    const config = readConfig({});
    const byClass = Object.fromEntries(tableUnder('## 9. Timeouts')
      .map((row) => [/class `(\w+)`/.exec(row[0])?.[1], row[1]] as const)
      .filter(([name]) => name !== undefined));
    const inMs = (textArg: string): number => {
      const [value, unit] = textArg.split(' ');
      return Number(value) * (unit === 'min' ? 60_000 : 1000);
    };
    assert.deepEqual(Object.fromEntries(Object.entries(byClass).map(([name, text]) => [name, inMs(String(text))])), {
      hint: defaultRelayCallTimeouts.hint,
      ordinary: config.relayCallTimeoutMs,
      archive: config.relayArchiveCallTimeoutMs,
      backup: config.relayBackupCallTimeoutMs,
    });
    for (const variable of ['CLOUDLY_RELAY_CALL_TIMEOUT_MS', 'CLOUDLY_RELAY_ARCHIVE_CALL_TIMEOUT_MS', 'CLOUDLY_RELAY_BACKUP_CALL_TIMEOUT_MS', 'CLOUDLY_SOCKET_PING_INTERVAL_MS', 'CLOUDLY_SOCKET_MISSED_PONGS']) {
      assert.ok(doc.includes(variable), variable);
    }
  });

  test('frames: version, every kind with its number, the chunk size and the stream limit', () => {
    assert.ok(doc.includes(`| 0 | version, always \`${streamFrameVersion}\` |`));
    const documentedKinds = Object.fromEntries(tableUnder('### 8.2 Frames').slice(4)
      .map((row) => /^(\w+) \((\d)\)$/.exec(row[0]))
      .filter((match): match is RegExpExecArray => match !== null)
      .map((match) => [match[1], Number(match[2])]));
    assert.deepEqual(documentedKinds, { ...streamFrameKinds });
    assert.ok(doc.includes(`≤ ${defaultStreamChunkBytes / 1024} KiB per frame`));
    assert.ok(doc.includes(`${maximumOpenStreamsPerChannel} open streams per socket`));
  });

  test('every reason a relay can meet is named', () => {
    const reasons = [
      ...Object.values(streamAbortReasons),
      ...Object.values(relayCallFailureReasons),
      backupRefusalReasons.backupNotFound,
      backupRefusalReasons.closureAlreadyStored,
      backupRefusalReasons.closureUploadInProgress,
      backupRefusalReasons.closureNotStored,
      backupRefusalReasons.closureBytesMissing,
      backupRefusalReasons.closureRecordFailed,
      'closure-blob-too-short', 'closure-blob-too-long', 'closure-blob-sha256-mismatch', 'closure-blob-corrupt',
      'relay-not-elected',
      ...Object.values(secretRefusalReasons),
    ];
    const missing = reasons.filter((reason) => !doc.includes(`\`${reason}\``));
    assert.deepEqual(missing, []);
  });
});
