import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as https from 'node:https';
import * as os from 'node:os';
import * as path from 'node:path';
import * as net from 'node:net';
import { makeTestCa, type ITestCa } from './certificates.js';

/**
 * Let's Encrypt's ACME test server, `pebble` (Debian package `pebble`, installed by .ci/run), as a
 * child process for one test file: its own ports, its own listener certificate (from a test CA the
 * ACME client trusts), and HTTP-01 validation for real against `httpPort` on this machine
 * (`localhost` resolves here, so no PEBBLE_VA_ALWAYS_VALID is needed). PEBBLE_VA_NOSLEEP=1 drops
 * its random validation pauses.
 */

export interface IPebble {
  directoryUrl: string;
  /** The CA of pebble's own https listener (what CLOUDLY_ACME_CA_FILE names). */
  listenerCaFile: string;
  /** The port pebble sends HTTP-01 validation requests to. */
  httpPort: number;
  /** The root that pebble's certificates chain to, from its management interface (it makes a new one each start). */
  root(): Promise<string>;
  stop(): Promise<void>;
}

/** Whether the pebble binary is on this machine. */
export const pebbleAvailable = (): boolean => spawnSync('pebble', ['-h'], { stdio: 'ignore' }).error === undefined;

const getText = (urlArg: string, caArg: string): Promise<{ status: number; text: string }> => new Promise((resolve, reject) => {
  https.get(urlArg, { ca: caArg, agent: false }, (responseArg) => {
    let text = '';
    responseArg.on('data', (chunkArg: Buffer) => { text += chunkArg.toString(); });
    responseArg.on('end', () => resolve({ status: responseArg.statusCode ?? 0, text }));
  }).once('error', reject);
});

/** `countArg` distinct loopback ports nothing listens on now: each held by a listener until all are chosen. */
const findFreePorts = async (countArg: number): Promise<number[]> => {
  const servers: net.Server[] = [];
  try {
    for (let index = 0; index < countArg; index++) {
      const server = net.createServer();
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, '127.0.0.1', resolve);
      });
    }
    return servers.map((server) => (server.address() as net.AddressInfo).port);
  } finally {
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  }
};

type TPebbleOptions = { validitySeconds?: number; authorizationReuse?: number };

/**
 * One pebble on these four ports (ACME, management, HTTP-01, TLS-ALPN-01), once its directory
 * answers; 'port-taken' when it exited because another process listens on one of them and
 * `mayRetryArg` (otherwise that, like any other failure to start, throws with pebble's output).
 */
const launchPebble = async (
  portsArg: number[],
  dirArg: string,
  caArg: ITestCa,
  listenerArg: { certFile: string; keyFile: string },
  optionsArg: TPebbleOptions,
  mayRetryArg: boolean,
): Promise<ChildProcess | 'port-taken'> => {
  const [acmePort, managementPort, httpPort, tlsPort] = portsArg;
  const configFile = path.join(dirArg, 'pebble-config.json');
  await fsp.writeFile(configFile, JSON.stringify({
    pebble: {
      listenAddress: `127.0.0.1:${acmePort}`,
      managementListenAddress: `127.0.0.1:${managementPort}`,
      certificate: listenerArg.certFile,
      privateKey: listenerArg.keyFile,
      httpPort,
      tlsPort,
      ocspResponderURL: '',
      externalAccountBindingRequired: false,
      ...(optionsArg.validitySeconds ? { certificateValidityPeriod: optionsArg.validitySeconds } : {}),
    },
  }));
  const child: ChildProcess = spawn('pebble', ['-config', configFile], {
    env: { ...process.env, PEBBLE_VA_NOSLEEP: '1', ...(optionsArg.authorizationReuse !== undefined ? { PEBBLE_AUTHZREUSE: String(optionsArg.authorizationReuse) } : {}) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunkArg: Buffer) => { output += chunkArg.toString(); });
  child.stderr!.on('data', (chunkArg: Buffer) => { output += chunkArg.toString(); });
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      if ((await getText(`https://127.0.0.1:${acmePort}/dir`, caArg.certPem)).status === 200) {
        return child;
      }
    } catch {
      // not listening yet
    }
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      if (mayRetryArg && child.exitCode !== null && output.includes('address already in use')) {
        return 'port-taken';
      }
      throw new Error(`pebble did not start: ${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
};

/** `authorizationReuse`: the percentage of orders given an earlier valid authorization (pebble's PEBBLE_AUTHZREUSE; its own default when absent). */
export const startPebble = async (optionsArg: TPebbleOptions = {}): Promise<IPebble> => {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-pebble-'));
  const ca: ITestCa = await makeTestCa('Pebble listener test CA');
  const listener = await ca.issue('localhost', ['localhost', '127.0.0.1']);
  // Four ports held open together until all are chosen, so no two are the same: one after another,
  // a port closed by the first look can be handed out again by the next (a CI run's pebble once got
  // one port for its ACME and management listeners and failed "address already in use"). Another
  // process can still take one between the look and pebble's listen: then pebble starts again on
  // four new ports, at most three times.
  for (let attempt = 1; ; attempt++) {
    const ports = await findFreePorts(4);
    const child = await launchPebble(ports, dir, ca, listener, optionsArg, attempt < 3);
    if (child !== 'port-taken') {
      return pebbleOn(child, ports, dir, ca);
    }
  }
};

/** The handle of a pebble that answers on `portsArg`. */
const pebbleOn = (child: ChildProcess, portsArg: number[], dir: string, ca: ITestCa): IPebble => {
  const [acmePort, managementPort, httpPort] = portsArg;
  const directoryUrl = `https://127.0.0.1:${acmePort}/dir`;
  return {
    directoryUrl,
    listenerCaFile: ca.certFile,
    httpPort,
    async root() {
      const answer = await getText(`https://127.0.0.1:${managementPort}/roots/0`, ca.certPem);
      if (answer.status !== 200) {
        throw new Error(`pebble's management interface answered ${answer.status}`);
      }
      return answer.text;
    },
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
      await ca.remove();
      await fsp.rm(dir, { recursive: true, force: true });
    },
  };
};
