import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as path from 'node:path';

/**
 * etcd beside Cloudly in a bench (issue 58: a write side by side with etcd's). Only when an `etcd`
 * binary is on PATH (Debian's `etcd-server`); neither the tests nor CI need one. The client speaks
 * etcd v3's JSON gateway over HTTP/1.1 with keep-alive, one request at a time per call, as the
 * bench's Cloudly client sends one request per call over its socket.
 */

/** The `etcd` on PATH, or null. */
export const findEtcd = (): string | null => {
  for (const directory of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(directory, 'etcd');
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
};

const freePort = (): Promise<number> => new Promise((resolve, reject) => {
  const server = net.createServer();
  server.once('error', reject);
  server.listen(0, '127.0.0.1', () => {
    const { port } = server.address() as net.AddressInfo;
    server.close(() => resolve(port));
  });
});

const base64 = (textArg: string): string => Buffer.from(textArg).toString('base64');

export interface IEtcd {
  child: ChildProcess;
  /** Puts the key unconditionally; answers its new mod revision. */
  put(keyArg: string, valueArg: string): Promise<number>;
  /** Puts the key only if its mod revision is still `modRevisionArg` (a txn); answers the new one, or null when another write came first. */
  compareAndSwap(keyArg: string, modRevisionArg: number, valueArg: string): Promise<number | null>;
  stop(): Promise<void>;
}

/** Starts etcd on free loopback ports with its data in `dataDirArg` (its default durability: every commit synced). */
export const startEtcd = async (binaryArg: string, dataDirArg: string): Promise<IEtcd> => {
  const [clientPort, peerPort] = [await freePort(), await freePort()];
  const clientUrl = `http://127.0.0.1:${clientPort}`;
  const peerUrl = `http://127.0.0.1:${peerPort}`;
  const child = spawn(binaryArg, [
    '--name', 'bench',
    '--data-dir', dataDirArg,
    '--listen-client-urls', clientUrl,
    '--advertise-client-urls', clientUrl,
    '--listen-peer-urls', peerUrl,
    '--initial-advertise-peer-urls', peerUrl,
    '--initial-cluster', `bench=${peerUrl}`,
    '--log-level', 'error',
    '--logger', 'zap',
  ], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (chunkArg: Buffer) => {
    stderr = (stderr + chunkArg.toString()).slice(-4000);
  });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const post = (pathArg: string, bodyArg: unknown): Promise<Record<string, unknown>> => new Promise((resolve, reject) => {
    const body = JSON.stringify(bodyArg);
    const request = http.request(`${clientUrl}${pathArg}`, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (responseArg) => {
      const chunks: Buffer[] = [];
      responseArg.on('data', (chunkArg: Buffer) => chunks.push(chunkArg));
      responseArg.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        if (responseArg.statusCode !== 200) {
          reject(new Error(`etcd ${pathArg}: ${responseArg.statusCode} ${text}`));
          return;
        }
        resolve(JSON.parse(text) as Record<string, unknown>);
      });
    });
    request.on('error', reject);
    request.end(body);
  });
  const revisionOf = (answerArg: Record<string, unknown>): number => Number((answerArg.header as { revision?: string } | undefined)?.revision);
  for (let waited = 0; ; waited += 100) {
    if (child.exitCode !== null) {
      throw new Error(`etcd exited: ${stderr}`);
    }
    try {
      await post('/v3/kv/range', { key: base64('/health-probe') });
      break;
    } catch (error) {
      if (waited > 20_000) {
        throw new Error(`etcd did not answer within 20 s: ${String(error)} ${stderr}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  return {
    child,
    async put(keyArg, valueArg) {
      return revisionOf(await post('/v3/kv/put', { key: base64(keyArg), value: base64(valueArg) }));
    },
    async compareAndSwap(keyArg, modRevisionArg, valueArg) {
      const key = base64(keyArg);
      const answer = await post('/v3/kv/txn', {
        compare: [{ key, target: 'MOD', result: 'EQUAL', mod_revision: String(modRevisionArg) }],
        success: [{ request_put: { key, value: base64(valueArg) } }],
      });
      return answer.succeeded === true ? revisionOf(answer) : null;
    },
    async stop() {
      agent.destroy();
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await new Promise((resolve) => child.once('exit', resolve));
      }
    },
  };
};
