import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { WebSocket, WebSocketServer } from 'ws';
import { decodeJwt, generateKeyPair, jwtVerify, SignJWT, type CryptoKey } from 'jose';
import { TypedResponseError } from '@api.global/typedrequest';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { IReq_Cloudly_Relay_GetClusterCorestoreLegacyResources } from '../ts/interfaces/requests/corestore.js';
import type { IIdentity } from '../ts/interfaces/data/user.js';
import { internalAudience, internalRelayCallPath, type IForwardedRelayCall } from '../ts/core/instances.js';
import { InstanceLinks, instanceLinkLimits, instanceLinkMethods, internalLinkPath, serveInstanceLink } from '../ts/core/instancelinks.js';
import { createLogger } from '../ts/core/logger.js';
import { identityIssuer } from '../ts/core/auth.js';
import { killHard } from './helpers/process.js';
import { refusalOf, waitFor } from './helpers/cloudly.js';
import {
  FailoverRelay,
  multiInstanceAdminPassword,
  startDevDatabase,
  startInstance,
  stopInstance,
  type IDevDatabaseProcess,
  type IInstanceProcess,
} from './helpers/multiinstance.js';

/**
 * Forwarded relay calls over the instance link (ts/core/instancelinks.ts), between real processes
 * over one shared database: A holds the relay's socket, B forwards to it. A's internal URL is a
 * TCP relay in front of A that the test controls: it sees the link's upgrade (and its token), cuts
 * the link, and answers upgrades as an instance without links would.
 */

const instanceEnv = {
  CLOUDLY_SOCKET_REQUESTS_PER_SECOND: '100000',
  // Far beyond anything the test waits for: a call that ends was ended by the link, never by its timeout.
  CLOUDLY_RELAY_CALL_TIMEOUT_MS: '120000',
};

/** A TCP relay in front of A's port: what B reaches at A's internal URL. */
class InternalRelay {
  public readonly linkAuthorizations: string[] = [];
  /** Connections that began with `POST /internal/relaycall` (a keep-alive connection may carry more calls). */
  public httpConnections = 0;
  /** Answer link upgrades 404, as an instance without links does. */
  public refuseLinks = false;
  public upstreamPort = 0;
  private readonly server = net.createServer((clientArg) => this.accept(clientArg));
  private readonly pairs = new Set<{ client: net.Socket; upstream: net.Socket | null }>();

  public async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
  }

  private accept(clientArg: net.Socket): void {
    const pair: { client: net.Socket; upstream: net.Socket | null } = { client: clientArg, upstream: null };
    this.pairs.add(pair);
    const cut = (): void => {
      clientArg.destroy();
      pair.upstream?.destroy();
      this.pairs.delete(pair);
    };
    clientArg.on('error', cut);
    clientArg.on('close', cut);
    clientArg.once('data', (firstArg: Buffer) => {
      const head = firstArg.toString('latin1');
      if (head.startsWith(`GET ${internalLinkPath} `)) {
        this.linkAuthorizations.push(/\r\nauthorization: ([^\r\n]+)/i.exec(head)?.[1] ?? '');
        if (this.refuseLinks) {
          clientArg.end('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
          return;
        }
      } else if (head.startsWith(`POST ${internalRelayCallPath} `)) {
        this.httpConnections++;
      }
      const upstream = net.connect(this.upstreamPort, '127.0.0.1');
      pair.upstream = upstream;
      upstream.on('error', cut);
      upstream.on('close', cut);
      upstream.write(firstArg);
      clientArg.pipe(upstream);
      upstream.pipe(clientArg);
    });
  }

  /** Ends every connection through the relay at once, as a dropped network path would. */
  public cutAll(): void {
    for (const pair of this.pairs) {
      pair.client.destroy();
      pair.upstream?.destroy();
    }
    this.pairs.clear();
  }

  public async close(): Promise<void> {
    this.cutAll();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

let workDir: string;
let database: IDevDatabaseProcess;
let internal: InternalRelay;
let a: IInstanceProcess;
let b: IInstanceProcess;
let identity: IIdentity;
let clusterId: string;
let relay: FailoverRelay;
const admins = new Map<string, CloudlyAdminClient>();
/** Answers of calls for node `held`: the relay keeps them until the test lets them go. */
const held: Array<() => void> = [];
let relayCalls = 0;

const adminOf = (instanceArg: IInstanceProcess): CloudlyAdminClient => {
  let client = admins.get(instanceArg.name);
  if (!client) {
    client = new CloudlyAdminClient(instanceArg.baseUrl);
    client.identity = identity;
    admins.set(instanceArg.name, client);
  }
  return client;
};

const inventoryOf = (instanceArg: IInstanceProcess, nodeIdArg = 'n1') =>
  adminOf(instanceArg).call('getCorestoreLegacyResources', { clusterId, nodeId: nodeIdArg });

const answerInventory = (clientArg: CloudlyRelayClient): void => {
  clientArg.addHandler<IReq_Cloudly_Relay_GetClusterCorestoreLegacyResources>('getClusterCorestoreLegacyResources', async ({ nodeId }) => {
    relayCalls++;
    if (nodeId === 'refused-node') {
      throw new TypedResponseError('the relay refuses', { code: 'not-found', retryable: false, reasons: ['refused-node is not on this relay'] });
    }
    if (nodeId === 'held') {
      await new Promise<void>((resolve) => held.push(resolve));
    }
    return { reachable: true, nodeId, readAt: 1_700_000_000_000, services: [] };
  });
};

/** Lines of an instance's log with this message. */
const logLines = (instanceArg: IInstanceProcess, messageArg: string): number =>
  instanceArg.output().split('\n').filter((line) => line.includes(`"msg":"${messageArg}"`)).length;

/** Opens `/internal/link` with this Authorization header: the socket, or the HTTP status the upgrade was refused with. */
const openLink = (baseUrlArg: string, authorizationArg: string | null): Promise<{ status: number; socket: WebSocket | null }> => new Promise((resolve) => {
  const socket = new WebSocket(`${baseUrlArg.replace(/^http/, 'ws')}${internalLinkPath}`, authorizationArg ? { headers: { authorization: authorizationArg } } : {});
  socket.on('error', () => undefined);
  socket.once('open', () => resolve({ status: 101, socket }));
  socket.once('unexpected-response', (_request, response) => {
    response.resume();
    socket.terminate();
    resolve({ status: response.statusCode ?? 0, socket: null });
  });
});

/** The code the link was closed with, or 'still open' when the holder has not closed it by the time it surely would have. */
const closeCodeOf = (socketArg: WebSocket): Promise<number | 'still open'> => new Promise((resolve) => {
  const timer = setTimeout(() => resolve('still open'), 20_000);
  socketArg.once('close', (codeArg: number) => {
    clearTimeout(timer);
    resolve(codeArg);
  });
});

/** The call's outcome, or 'still waiting' when it has not ended by the time nothing but the link could have ended it. */
const settledOrWaiting = async (callArg: Promise<unknown>): Promise<unknown> => {
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    callArg.then(() => 'answered', (error: unknown) => error),
    new Promise((resolve) => { timer = setTimeout(() => resolve('still waiting'), 20_000); }),
  ]);
  clearTimeout(timer);
  return outcome;
};

const holderUnreachable = (outcomeArg: unknown): void => {
  assert.notEqual(outcomeArg, 'still waiting', 'the call ended when the link did');
  const data = (outcomeArg as { errorData?: { code?: string; reasons?: string[]; retryAfterMs?: number } }).errorData;
  assert.equal(data?.code, 'unavailable', JSON.stringify(data ?? outcomeArg));
  assert.deepEqual(data?.reasons, ['relay-holder-unreachable']);
  assert.ok((data?.retryAfterMs ?? 0) > 0, 'retryAfterMs: until the holder\'s lease runs out');
};

/** A forwarded call as another instance sends it over HTTP, `POST /internal/relaycall`. */
const postForwarded = async (authorizationArg: string, nodeIdArg: string): Promise<{ status: number; answer: Record<string, unknown> }> => {
  const response = await fetch(`${a.baseUrl}${internalRelayCallPath}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: authorizationArg },
    body: JSON.stringify({ clusterId, method: 'getClusterCorestoreLegacyResources', request: { nodeId: nodeIdArg }, timeoutMs: 5_000 }),
  });
  return { status: response.status, answer: await response.json() as Record<string, unknown> };
};

/** Fires `countArg` calls for node `held` on B and waits until the relay on A holds all of them. */
const holdCalls = async (countArg: number): Promise<Array<Promise<unknown>>> => {
  held.length = 0;
  const calls = Array.from({ length: countArg }, () => inventoryOf(b, 'held'));
  for (const call of calls) {
    call.catch(() => undefined);
  }
  await waitFor(() => held.length === countArg, `the relay holds ${countArg} calls`, 10_000);
  return calls;
};

describe('forwarded relay calls over the instance link', () => {
  before(async () => {
    workDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-forwarding-'));
    database = await startDevDatabase(path.join(workDir, 'database'));
    internal = new InternalRelay();
    const internalUrl = await internal.listen();
    a = await startInstance(database, 'a', { ...instanceEnv, CLOUDLY_INTERNAL_URL: internalUrl });
    internal.upstreamPort = Number(new URL(a.baseUrl).port);
    b = await startInstance(database, 'b', instanceEnv);
    identity = await new CloudlyAdminClient(a.baseUrl).login('admin', multiInstanceAdminPassword);
    const created = await adminOf(a).call('createCluster', { name: 'linked' });
    clusterId = created.cluster.id;
    for (const nodeId of ['n1', 'refused-node', 'held']) {
      await adminOf(a).call('addClusterNode', { clusterId, name: nodeId, nodeId });
    }
    relay = new FailoverRelay(clusterId, created.relayToken, () => [a.baseUrl], 0, answerInventory);
    await relay.connect();
    await waitFor(async () => (await inventoryOf(a).then(() => true, () => false)), 'the relay is elected on A', 15_000);
  });

  after(async () => {
    for (const release of held) {
      release();
    }
    relay?.close();
    for (const client of admins.values()) {
      client.close();
    }
    await Promise.all([a, b].filter(Boolean).map((instance) => stopInstance(instance)));
    await database?.stop();
    await internal?.close();
    await fsp.rm(workDir, { recursive: true, force: true });
  });

  test('calls on B reach the relay on A over one link; the answer and the refusal come back unchanged', async () => {
    const before = relayCalls;
    const onA = await inventoryOf(a);
    const viaB = await Promise.all(Array.from({ length: 20 }, () => inventoryOf(b)));
    assert.equal(relayCalls, before + 21, 'every call reached the relay on A');
    for (const answer of viaB) {
      assert.deepEqual(answer, onA, 'the answer forwarded from A is what A itself answers');
    }
    const refusedOnA = await refusalOf(() => inventoryOf(a, 'refused-node'));
    const refusedViaB = await refusalOf(() => inventoryOf(b, 'refused-node'));
    assert.equal(refusedViaB.code, 'unavailable');
    assert.deepEqual(refusedViaB, refusedOnA, 'the relay\'s refusal forwarded from A is what A itself answers');
    assert.deepEqual((refusedViaB.relayError as { reasons: string[] }).reasons, ['refused-node is not on this relay']);
    assert.equal(internal.linkAuthorizations.length, 1, 'one link carried all the calls');
    assert.equal(internal.httpConnections, 0, 'no call went over HTTP');
    assert.equal(logLines(a, 'instance link accepted'), 1, 'A accepted one link');
    assert.equal(logLines(b, 'instance link opened'), 1, 'B opened one link');
    assert.equal(logLines(b, 'instance link could not be opened; forwarding over HTTP'), 0);
  });

  test('the link upgrade refuses everyone but the instance the token was made by, for the instance it was made for', async () => {
    const authorization = internal.linkAuthorizations[0];
    const claims = decodeJwt(authorization.replace(/^Bearer /, ''));
    assert.equal(claims.aud, internalAudience);
    const { privateKey } = await generateKeyPair('RS256');
    const foreign = await new SignJWT({ target: claims.target }).setProtectedHeader({ alg: 'RS256' }).setIssuer(identityIssuer)
      .setAudience(internalAudience).setSubject('instance:forged').setExpirationTime('1m').sign(privateKey);
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${Buffer.from(JSON.stringify({
      iss: identityIssuer, aud: internalAudience, sub: 'instance:forged', target: claims.target, exp: Math.floor(Date.now() / 1000) + 60,
    })).toString('base64url')}.`;
    const refusals: Array<[string, string, string | null]> = [
      ['no token', a.baseUrl, null],
      ['not a JWT', a.baseUrl, 'Bearer not-a-token'],
      ['a token of a foreign key', a.baseUrl, `Bearer ${foreign}`],
      ['alg none', a.baseUrl, `Bearer ${none}`],
      ['an administrator\'s identity (the admin audience)', a.baseUrl, `Bearer ${identity.jwt}`],
      ['a token made for A, shown to B', b.baseUrl, authorization],
    ];
    for (const [what, url, header] of refusals) {
      const { status, socket } = await openLink(url, header);
      socket?.close();
      assert.equal(status, 401, `refused: ${what}`);
    }
    const accepted = await openLink(a.baseUrl, authorization);
    assert.equal(accepted.status, 101, 'the token B made for A opens a link to A');
    accepted.socket!.close();
    // The HTTP endpoint still serves the same token: the way to instances without links.
    const { status, answer } = await postForwarded(authorization, 'n1');
    assert.equal(status, 200);
    assert.equal((answer.response as { nodeId: string }).nodeId, 'n1');
  });

  test('a call on a link is answered as the HTTP endpoint answers it; a garbage frame closes the link and the holder goes on', async () => {
    const authorization = internal.linkAuthorizations[0];
    const { socket } = await openLink(a.baseUrl, authorization);
    const answers: unknown[] = [];
    socket!.on('message', (dataArg) => answers.push(JSON.parse(dataArg.toString())));
    const call = (idArg: string, nodeIdArg: string) => JSON.stringify({
      method: instanceLinkMethods.call,
      request: { clusterId, method: 'getClusterCorestoreLegacyResources', request: { nodeId: nodeIdArg }, timeoutMs: 5_000 },
      correlation: { id: idArg, phase: 'request' },
    });
    socket!.send(call('answered', 'n1'));
    socket!.send(call('refused', 'refused-node'));
    await waitFor(() => answers.length === 2, 'both calls answered', 10_000);
    const byId = new Map(answers.map((answer) => [(answer as { correlation: { id: string } }).correlation.id, answer as Record<string, unknown>]));
    const overHttp = await postForwarded(authorization, 'n1');
    const refusedOverHttp = await postForwarded(authorization, 'refused-node');
    assert.equal(refusedOverHttp.status, 200);
    assert.deepEqual(byId.get('answered')!.response, overHttp.answer.response, 'the answer HTTP carries');
    assert.equal(byId.get('answered')!.error, undefined);
    assert.deepEqual(byId.get('refused')!.error, refusedOverHttp.answer.error, 'the refusal HTTP carries');
    socket!.close();

    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    // Each with the close code the holder (or, for invalid UTF-8, ws on its behalf) ends the link with.
    const garbage: Array<[string, number, (socketArg: WebSocket) => void]> = [
      ['text that is not JSON', 1007, (socketArg) => socketArg.send('{"method":')],
      ['invalid UTF-8', 1007, (socketArg) => socketArg.send(Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), { binary: false })],
      ['a binary frame', 1003, (socketArg) => socketArg.send(Buffer.from('binary'), { binary: true })],
      ['a JSON value that is no envelope', 1007, (socketArg) => socketArg.send('[1,2,3]')],
      ['nesting 100,000 deep', 1007, (socketArg) => socketArg.send(deep)],
      ['an answer the holder never asked for', 1007, (socketArg) => socketArg.send(JSON.stringify({ method: 'x', response: 1, correlation: { id: 'x', phase: 'response' } }))],
      ['an unknown method', 1008, (socketArg) => socketArg.send(JSON.stringify({ method: 'dropDatabase', request: {}, correlation: { id: 'u', phase: 'request' } }))],
      ['a call that is not { clusterId, method, request, timeoutMs }', 1008, (socketArg) => socketArg.send(JSON.stringify({
        method: instanceLinkMethods.call, request: { clusterId: 7 }, correlation: { id: 'm', phase: 'request' },
      }))],
      ['a re-authentication without a token', 1008, (socketArg) => socketArg.send(JSON.stringify({
        method: instanceLinkMethods.reauthenticate, request: {}, correlation: { id: 'r', phase: 'request' },
      }))],
      ['a re-authentication with an administrator\'s identity', 1008, (socketArg) => socketArg.send(JSON.stringify({
        method: instanceLinkMethods.reauthenticate, request: { token: identity.jwt }, correlation: { id: 'r', phase: 'request' },
      }))],
      ['a frame over the size limit', 1009, (socketArg) => socketArg.send('x'.repeat(3 * 1024 * 1024))],
    ];
    for (const [what, expectedCode, sendGarbage] of garbage) {
      const opened = await openLink(a.baseUrl, authorization);
      assert.equal(opened.status, 101, what);
      const closed = closeCodeOf(opened.socket!);
      sendGarbage(opened.socket!);
      assert.equal(await closed, expectedCode, `the holder closed the link after ${what}`);
    }
    assert.equal(a.child.exitCode, null, 'A is alive');
    assert.equal(a.child.signalCode, null);
    assert.equal(logLines(a, 'unexpected failure'), 0, 'no frame made A fail');
    assert.equal((await inventoryOf(b)).inventory.nodeId, 'n1', 'B\'s own link to A carries on');
    assert.equal(internal.linkAuthorizations.length, 1);
  });

  test('a dropped link ends its calls in flight at once; the next call opens a new one; with no link to be had, calls go over HTTP', async () => {
    const closedBefore = logLines(b, 'instance link closed');
    const calls = await holdCalls(3);
    internal.cutAll();
    for (const call of calls) {
      holderUnreachable(await settledOrWaiting(call));
    }
    await waitFor(() => logLines(b, 'instance link closed') > closedBefore, 'B saw its link close', 5_000);
    for (const release of held) {
      release();
    }
    assert.equal((await inventoryOf(b)).inventory.nodeId, 'n1');
    assert.equal(internal.linkAuthorizations.length, 2, 'the next call opened a new link');

    // An instance without links (its upgrade answered 404): the calls go over HTTP, unchanged.
    const closedAgain = logLines(b, 'instance link closed');
    internal.refuseLinks = true;
    internal.cutAll();
    await waitFor(() => logLines(b, 'instance link closed') > closedAgain, 'B saw its link close', 5_000);
    assert.deepEqual(await inventoryOf(b), await inventoryOf(a));
    assert.deepEqual(await refusalOf(() => inventoryOf(b, 'refused-node')), await refusalOf(() => inventoryOf(a, 'refused-node')));
    assert.equal(internal.linkAuthorizations.length, 3, 'B tried a link once');
    assert.ok(internal.httpConnections > 0, 'the calls went over HTTP');
    assert.equal(logLines(b, 'instance link could not be opened; forwarding over HTTP'), 1);
    internal.refuseLinks = false;
    // Once the pause after the refused upgrade is over, B opens a link again.
    await waitFor(async () => {
      await inventoryOf(b);
      await new Promise((resolve) => setTimeout(resolve, 100));
      return internal.linkAuthorizations.length === 4;
    }, 'B opens a link again', 15_000);
  });

  test('kill -9 of the holder ends the forwarded calls in flight at once with relay-holder-unreachable', async () => {
    const links = internal.linkAuthorizations.length;
    const httpConnections = internal.httpConnections;
    const calls = await holdCalls(4);
    assert.equal(internal.linkAuthorizations.length, links, 'the calls travel on the open link');
    assert.equal(internal.httpConnections, httpConnections);
    await killHard(a.child);
    for (const call of calls) {
      holderUnreachable(await settledOrWaiting(call));
    }
    // Calls after it end too (no link, nobody at A's address), never wait.
    const next = await settledOrWaiting(inventoryOf(b));
    assert.notEqual(next, 'still waiting');
    const reason = (next as { errorData?: { reasons?: string[] } }).errorData?.reasons?.[0];
    assert.ok(reason === 'relay-holder-unreachable' || reason === 'relay-holder-gone', String(reason));
  });
});

/**
 * The link's own rules, with real sockets in this process: a holder served by `serveInstanceLink`
 * behind a WebSocket server that checks tokens of a test key, tokens that live 4 s instead of 60 s.
 */
describe('instance links: re-authentication, expiry, idle links and the in-flight bound', () => {
  const tokenLifeMs = 4_000;
  const target = { instanceId: 'holder', internalUrl: '' };
  let server: http.Server;
  let signingKey: CryptoKey;
  let verifyingKey: CryptoKey;
  let upgrades = 0;
  let authentications = 0;
  /** Calls the holder keeps unanswered while set. */
  let holding: Array<() => void> | null = null;
  const logger = createLogger('silent');

  const tokenFor = async (targetArg: string, lifeMsArg = tokenLifeMs): Promise<string> =>
    new SignJWT({ target: targetArg }).setProtectedHeader({ alg: 'RS256' }).setIssuer(identityIssuer).setAudience(internalAudience)
      .setSubject('instance:forwarder').setExpirationTime(Math.floor((Date.now() + lifeMsArg) / 1000)).sign(signingKey);
  const accepts = async (bearerArg: string): Promise<boolean> => {
    try {
      const { payload } = await jwtVerify(bearerArg, verifyingKey, { issuer: identityIssuer, audience: internalAudience, algorithms: ['RS256'] });
      return payload.target === target.instanceId;
    } catch {
      return false;
    }
  };
  const linksOf = () => new InstanceLinks({ token: (targetArg) => tokenFor(targetArg), logger });
  const callOf = (requestArg: unknown): IForwardedRelayCall => ({ clusterId: 'c1', method: 'echo', request: requestArg, timeoutMs: 5_000 });

  before(async () => {
    const keys = await generateKeyPair('RS256');
    signingKey = keys.privateKey;
    verifyingKey = keys.publicKey;
    const sockets = new WebSocketServer({ noServer: true });
    server = http.createServer((_request, response) => response.writeHead(404).end());
    server.on('upgrade', (request, socket, head) => {
      const bearer = /^Bearer (.+)$/.exec(request.headers.authorization ?? '')?.[1] ?? '';
      void accepts(bearer).then((okArg) => {
        if (!okArg) {
          socket.end('HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n');
          return;
        }
        upgrades++;
        sockets.handleUpgrade(request, socket, head, (webSocketArg) => serveInstanceLink(webSocketArg, {
          bearer,
          authenticate: async (bearerArg) => {
            authentications++;
            return accepts(bearerArg);
          },
          // As the endpoint does: the link's bearer is checked on every call.
          serve: async (bearerArg, callArg) => {
            if (!(await accepts(bearerArg))) {
              return { status: 401, answer: { error: { text: 'unauthenticated', data: null } } };
            }
            if (holding) {
              await new Promise<void>((resolve) => holding!.push(resolve));
            }
            return { status: 200, answer: { response: { echo: (callArg as IForwardedRelayCall).request } } };
          },
          requestFrameBytes: 64 * 1024,
          liveness: { intervalMs: 1_000, missedPongsAllowed: 2 },
          logger,
          onInternalFailure: () => 'error-id',
          remoteAddress: '127.0.0.1',
        }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    target.internalUrl = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  });

  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  test('a link hands the holder a new token before its own runs out, keeps carrying calls, and closes itself once idle', async () => {
    const links = linksOf();
    const upgradesBefore = upgrades;
    const authenticationsBefore = authentications;
    const startedAt = Date.now();
    let index = 0;
    // Calls for twice the token's life: without a new token, the holder would have closed the link.
    while (Date.now() - startedAt < 2 * tokenLifeMs) {
      const answer = await links.call(target, callOf(index), Date.now() + 5_000);
      assert.deepEqual(answer, { response: { echo: index } }, `call ${index}`);
      index++;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.equal(upgrades - upgradesBefore, 1, 'every call travelled on the one link');
    assert.ok(authentications - authenticationsBefore >= 2, `the link was authenticated again: ${authentications - authenticationsBefore} times`);
    // No calls any more: at its next re-authentication the link closes instead.
    await waitFor(() => links.openLinks === 0, 'the idle link closed', 3 * tokenLifeMs);
    links.close();
  });

  test('the holder closes a link whose token ran out without a new one', async () => {
    const { status, socket } = await openLink(target.internalUrl, `Bearer ${await tokenFor(target.instanceId, 2_000)}`);
    assert.equal(status, 101);
    assert.equal(await closeCodeOf(socket!), 1008);
  });

  test('a link carries at most its bound of calls at once; the one beyond it is left to HTTP', async () => {
    const links = linksOf();
    holding = [];
    const calls = Array.from({ length: instanceLinkLimits.callsInFlight }, (_unused, indexArg) => links.call(target, callOf(indexArg), Date.now() + 10_000));
    await waitFor(() => holding!.length === instanceLinkLimits.callsInFlight, 'the holder has every call', 10_000);
    assert.equal(await links.call(target, callOf('beyond'), Date.now() + 10_000), null, 'the call beyond the bound goes over HTTP');
    const release = holding;
    holding = null;
    for (const resolve of release) {
      resolve();
    }
    const answers = await Promise.all(calls);
    assert.ok(answers.every((answer, indexArg) => (answer as { response: { echo: number } }).response.echo === indexArg));
    links.close();
  });
});
