/**
 * A local multi-instance Cloudly in one command (docs/multi-instance.md):
 *
 *   npm run dev:cluster                  # 3 instances on 3000, 3001, 3002
 *   node --import tsx scripts/dev-cluster.ts --instances 3 --base-port 3000 --dir ./.nogit/dev-cluster
 *
 * Starts the shared database process (scripts/dev-database.ts: the embedded database as its own
 * process, single-node, for development only), a local S3-protocol server when one is available
 * (the tests' s3rver helper; every instance then keeps closures in it), and N Cloudly instances
 * on consecutive ports, each with its own data directory, all sharing the database, the
 * key-encryption key and the blob store. It prints where everything is and stops it all on
 * Ctrl-C. The first administrator is `admin` with the password printed at start (or
 * CLOUDLY_ADMIN_PASSWORD).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';

const projectRoot = path.resolve(import.meta.dirname, '..');

const option = (nameArg: string, fallbackArg: string): string => {
  const index = process.argv.indexOf(nameArg);
  return index >= 0 && index + 1 < process.argv.length ? process.argv[index + 1] : fallbackArg;
};

const instances = Number(option('--instances', '3'));
const basePort = Number(option('--base-port', '3000'));
const dir = path.resolve(option('--dir', './.nogit/dev-cluster'));
if (!Number.isInteger(instances) || instances < 1 || instances > 16 || !Number.isInteger(basePort) || basePort < 1 || basePort + instances > 65535) {
  process.stderr.write('usage: dev-cluster.ts [--instances 1-16] [--base-port N] [--dir PATH]\n');
  process.exit(2);
}

const children: ChildProcess[] = [];
let stopS3: (() => Promise<void>) | null = null;

const waitForLine = (childArg: ChildProcess, patternArg: RegExp, whatArg: string): Promise<RegExpExecArray> => new Promise((resolve, reject) => {
  let output = '';
  const onData = (chunkArg: Buffer): void => {
    output += chunkArg.toString();
    const match = patternArg.exec(output);
    if (match) {
      resolve(match);
    }
  };
  childArg.stdout!.on('data', onData);
  childArg.stderr!.on('data', (chunkArg: Buffer) => { output += chunkArg.toString(); });
  childArg.once('exit', (code) => reject(new Error(`${whatArg} exited with ${code}:\n${output.slice(-4000)}`)));
});

const main = async (): Promise<void> => {
  await fsp.mkdir(dir, { recursive: true, mode: 0o700 });
  const database = spawn(process.execPath, ['--import', 'tsx', 'scripts/dev-database.ts', '--data-dir', path.join(dir, 'database')], {
    cwd: projectRoot, env: { ...process.env, CLOUDLY_LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(database);
  const ready = JSON.parse((await waitForLine(database, /^\{"ready":true.*$/m, 'the dev database'))[0]) as { mongoDbUrl: string; secretsKeyFile: string };
  process.stdout.write(`database   ${ready.mongoDbUrl}\n`);

  let blobEnv: Record<string, string> = {};
  const s3Helper = path.join(projectRoot, 'test', 'helpers', 's3server.ts');
  if (existsSync(s3Helper) && existsSync(path.join(projectRoot, 'ts', 'core', 's3blobstore.ts'))) {
    const { startTestS3Server } = await import(s3Helper) as { startTestS3Server: (bucketArg?: string) => Promise<{ endpoint: string; env(prefixArg?: string): Record<string, string>; destroy(): Promise<void> }> };
    const s3 = await startTestS3Server('cloudly-dev');
    stopS3 = () => s3.destroy();
    blobEnv = s3.env('closures/');
    process.stdout.write(`s3         ${s3.endpoint} (bucket cloudly-dev, shared by every instance)\n`);
  } else {
    process.stdout.write('s3         not available: each instance keeps closures in its own data directory\n');
  }

  const adminPassword = process.env.CLOUDLY_ADMIN_PASSWORD ?? randomBytes(12).toString('base64url');
  const started = await Promise.all(Array.from({ length: instances }, async (_, index) => {
    const port = basePort + index;
    const dataDir = path.join(dir, `instance-${index + 1}`);
    await fsp.mkdir(dataDir, { recursive: true, mode: 0o700 });
    // The first instance creates the shared keys and the first administrator; the others find them.
    await new Promise((resolve) => setTimeout(resolve, index === 0 ? 0 : 1500));
    // As `npm start` starts the server (the launcher holds the node flags).
    const child = spawn(path.join(projectRoot, 'bin', 'cloudly-server'), ['--source'], {
      cwd: projectRoot,
      env: {
        ...process.env,
        ...blobEnv,
        CLOUDLY_PORT: String(port),
        CLOUDLY_HOST: process.env.CLOUDLY_HOST ?? '127.0.0.1',
        CLOUDLY_DATA_DIR: dataDir,
        MONGODB_URL: ready.mongoDbUrl,
        CLOUDLY_SECRETS_KEY_FILE: ready.secretsKeyFile,
        CLOUDLY_ADMIN_PASSWORD: adminPassword,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    await waitForLine(child, /cloudly is listening/, `instance ${index + 1}`);
    return `http://127.0.0.1:${port}`;
  }));
  started.forEach((url, index) => process.stdout.write(`instance ${index + 1} ${url}\n`));
  process.stdout.write(`admin      admin / ${adminPassword}\n`);
  process.stdout.write('Ctrl-C stops everything (the database last).\n');
};

const stopAll = async (): Promise<void> => {
  const [database, ...rest] = children;
  await Promise.all(rest.map((child) => new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) {
      resolve();
      return;
    }
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  })));
  await stopS3?.().catch(() => undefined);
  if (database && database.exitCode === null) {
    await new Promise<void>((resolve) => {
      database.once('exit', () => resolve());
      database.kill('SIGTERM');
    });
  }
};

let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (!stopping) {
      stopping = true;
      void stopAll().finally(() => process.exit(0));
    }
  });
}

main().catch(async (error: unknown) => {
  process.stderr.write(`${(error as Error).message}\n`);
  await stopAll();
  process.exit(1);
});
