import * as fsp from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import type { IS3BlobStoreOptions } from '../../ts/core/s3blobstore.js';

/**
 * A local S3-protocol server for tests and benchmarks: `s3rver` on a random loopback port with a
 * temporary directory, one bucket, and the credentials it accepts (S3RVER / S3RVER).
 *
 * What s3rver lacks and this adds: AbortMultipartUpload (s3rver answers `DELETE ?uploadId`
 * with 405). The added handler removes the upload's parts the way s3rver's own complete does.
 * ListMultipartUploads stays unimplemented (the store's start-up sweep then does nothing);
 * `openUploads()` reads s3rver's upload folder instead, so tests can prove none is left.
 */

/** s3rver ships no types; it is a Koa application class. */
const S3rver = createRequire(import.meta.url)('s3rver') as new (optionsArg: object) => IS3rver;

export const s3TestAccessKeyId = 'S3RVER';
export const s3TestSecretAccessKey = 'S3RVER';

interface IKoaContext {
  method: string;
  path: string;
  headers: Record<string, string | undefined>;
  query: Record<string, string | undefined>;
  status: number;
  body: unknown;
}

interface IS3rver {
  middleware: Array<(ctxArg: IKoaContext, nextArg: () => Promise<void>) => Promise<void>>;
  run(): Promise<AddressInfo>;
  close(): Promise<void>;
  httpServer?: Server;
}

export interface ITestS3Server {
  bucket: string;
  endpoint: string;
  port: number;
  directory: string;
  /** Blob store options for this server (path style, test credentials). */
  storeOptions(prefixArg?: string): IS3BlobStoreOptions;
  /** The environment that selects this server as Cloudly's blob store. */
  env(prefixArg?: string): Record<string, string>;
  /** Ids of multipart uploads started and neither completed nor aborted. */
  openUploads(): Promise<string[]>;
  /** Every request served so far: method, path, and the range asked for if any. */
  requests: Array<{ method: string; path: string; range: string | null }>;
  /** Keys of the objects in the bucket. */
  objectKeys(): Promise<string[]>;
  /** Stops the server at once (open connections cut), keeping its directory. */
  stop(): Promise<void>;
  /** Starts it again on the same port and directory. */
  start(): Promise<void>;
  /** Stops it and removes the directory. */
  destroy(): Promise<void>;
}

const uploadsFolder = '._S3rver_uploads';
const objectSuffix = '._S3rver_object';

export const startTestS3Server = async (bucketArg = 'cloudly-test'): Promise<ITestS3Server> => {
  const directory = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-s3rver-'));
  let port = 0;
  let server: IS3rver | null = null;
  const requests: ITestS3Server['requests'] = [];

  const boot = async (): Promise<void> => {
    const instance = new S3rver({
      address: '127.0.0.1',
      port,
      directory,
      silent: true,
      configureBuckets: [{ name: bucketArg }],
    });
    // AbortMultipartUpload, ahead of s3rver's own routes (path-style requests only).
    instance.middleware.unshift(async (ctxArg, nextArg) => {
      requests.push({ method: ctxArg.method, path: ctxArg.path, range: ctxArg.headers.range ?? null });
      const uploadId = ctxArg.query.uploadId;
      if (ctxArg.method === 'DELETE' && uploadId && /^[0-9a-f]+$/.test(uploadId) && ctxArg.path.startsWith(`/${bucketArg}/`)) {
        await fsp.rm(path.join(directory, bucketArg, uploadsFolder, uploadId), { recursive: true, force: true });
        ctxArg.status = 204;
        ctxArg.body = null;
        return;
      }
      await nextArg();
    });
    const address = await instance.run();
    port = address.port;
    server = instance;
  };
  await boot();

  const stop = async (): Promise<void> => {
    const current = server;
    server = null;
    if (current?.httpServer) {
      const closed = new Promise<void>((resolve) => current.httpServer!.close(() => resolve()));
      current.httpServer.closeAllConnections();
      await closed;
    }
  };

  const listFiles = async (dirArg: string): Promise<string[]> => {
    try {
      return (await fsp.readdir(dirArg, { recursive: true })).map(String);
    } catch {
      return [];
    }
  };

  const handle: ITestS3Server = {
    bucket: bucketArg,
    get endpoint() {
      return `http://127.0.0.1:${port}`;
    },
    get port() {
      return port;
    },
    directory,
    requests,
    storeOptions(prefixArg = '') {
      return {
        bucket: bucketArg,
        prefix: prefixArg,
        region: 'us-east-1',
        endpoint: handle.endpoint,
        forcePathStyle: true,
        credentials: { accessKeyId: s3TestAccessKeyId, secretAccessKey: s3TestSecretAccessKey },
      };
    },
    env(prefixArg = '') {
      return {
        CLOUDLY_BLOB_STORE: 's3',
        CLOUDLY_S3_BUCKET: bucketArg,
        CLOUDLY_S3_PREFIX: prefixArg,
        CLOUDLY_S3_ENDPOINT: handle.endpoint,
        CLOUDLY_S3_REGION: 'us-east-1',
        CLOUDLY_S3_FORCE_PATH_STYLE: 'true',
        AWS_ACCESS_KEY_ID: s3TestAccessKeyId,
        AWS_SECRET_ACCESS_KEY: s3TestSecretAccessKey,
      };
    },
    async openUploads() {
      try {
        return await fsp.readdir(path.join(directory, bucketArg, uploadsFolder));
      } catch {
        return [];
      }
    },
    async objectKeys() {
      return (await listFiles(path.join(directory, bucketArg)))
        .filter((nameArg) => nameArg.endsWith(objectSuffix) && !nameArg.startsWith(uploadsFolder))
        .map((nameArg) => nameArg.slice(0, -objectSuffix.length))
        .sort();
    },
    stop,
    start: boot,
    async destroy() {
      await stop();
      await fsp.rm(directory, { recursive: true, force: true });
    },
  };
  return handle;
};
