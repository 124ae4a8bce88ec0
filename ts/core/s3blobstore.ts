import { createHash } from 'node:crypto';
import * as path from 'node:path';
import type { ICloudlyConfig, ICloudlyS3Config } from '../config.js';
import {
  BlobStoreError,
  drainProvenBlob,
  FilesystemBlobStore,
  isBlobKey,
  type IBlobExpectation,
  type IBlobReadOptions,
  type IBlobSource,
  type IBlobStore,
  type IStoredBlobRecord,
} from './blobstore.js';
import { StagedSha256 } from './hashworker.js';

/**
 * Blobs in an S3-compatible bucket (`CLOUDLY_BLOB_STORE=s3`, see docs/storage.md).
 *
 * `put` streams the bytes as a multipart upload (one PutObject for a blob that fits in one part)
 * while the hash worker proves their sha256, and completes the upload only once the exact length
 * and sha256 are proven: until `CompleteMultipartUpload` the object does not exist for any
 * reader, and a refused or failed upload is aborted, so nothing becomes visible. The expected
 * length and sha256 travel as the object's user metadata (`x-amz-meta-cloudly-*`); an object
 * without them, or whose length differs from them, is not a blob (as a file without its record
 * in the filesystem store). `read` proves them again over every byte and resumes a broken
 * download where it stopped (a ranged GET of the rest, refused if the object changed meanwhile).
 *
 * The SDK is loaded on `init`, so a Cloudly on the filesystem store never loads it.
 */

/** Metadata names (S3 lowercases user metadata). */
const sha256MetadataName = 'cloudly-sha256';
const lengthMetadataName = 'cloudly-byte-length';

/** Default part size: S3's smallest part is 5 MiB (except the last). */
export const defaultS3PartBytes = 8 * 1024 * 1024;
/** Parts being hashed or uploaded at once (each holds one part's memory). */
const partSlots = 3;
/** Multipart uploads older than this under the prefix are aborted by the start-up sweep. */
const staleUploadAgeMs = 24 * 3600 * 1000;

/** The store's settings: the configured bucket (ts/config.ts) and the store's own knobs. */
export interface IS3BlobStoreOptions extends ICloudlyS3Config {
  /** Bytes per multipart part (default 8 MiB; S3 refuses parts under 5 MiB except the last). */
  partBytes?: number;
  /** Attempts per request, the SDK's retries included (default 3). */
  maxAttempts?: number;
  /** Times a broken download is resumed without progress before the read fails (default 3). */
  readResumes?: number;
  /** Milliseconds to wait for a connection and for a quiet socket (defaults 5 000 and 60 000). */
  connectionTimeoutMs?: number;
  requestTimeoutMs?: number;
}

type TS3Module = typeof import('@aws-sdk/client-s3');
type TS3Client = import('@aws-sdk/client-s3').S3Client;

interface IS3Failure {
  name?: string;
  code?: string;
  message?: string;
  $metadata?: { httpStatusCode?: number };
}

const statusOf = (errorArg: unknown): number | undefined => (errorArg as IS3Failure | null)?.$metadata?.httpStatusCode;

/**
 * What an S3 failure is called: unreachable, timed out, throttled or 5xx is
 * `blob-store-unavailable` (retry later); any other answer is `blob-store-failed`.
 */
const failureOf = (errorArg: unknown, whatArg: string): BlobStoreError => {
  if (errorArg instanceof BlobStoreError) {
    return errorArg;
  }
  const failure = (errorArg ?? {}) as IS3Failure;
  const status = statusOf(errorArg);
  const name = failure.name ?? failure.code ?? 'Error';
  if (status === undefined || status >= 500 || status === 429 || name === 'TimeoutError') {
    return new BlobStoreError('blob-store-unavailable', `${whatArg}: the S3 store did not answer (${name}${status ? `, HTTP ${status}` : ''})`);
  }
  return new BlobStoreError('blob-store-failed', `${whatArg}: the S3 store refused (${name}, HTTP ${status})`);
};

const isNotFound = (errorArg: unknown): boolean => {
  const name = (errorArg as IS3Failure | null)?.name;
  return statusOf(errorArg) === 404 || name === 'NotFound' || name === 'NoSuchKey';
};

const pause = (msArg: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, msArg));

interface IHeadOfBlob {
  record: IStoredBlobRecord;
  etag: string | undefined;
}

export class S3BlobStore implements IBlobStore {
  private s3: TS3Module | null = null;
  private client: TS3Client | null = null;
  private ready: Promise<void> | null = null;
  private readonly prefix: string;
  private readonly partBytes: number;
  private readonly readResumes: number;
  /** Multipart uploads whose abort failed (e.g. the store was down): aborted again on the next call. */
  private readonly pendingAborts = new Map<string, string>();

  constructor(public readonly options: IS3BlobStoreOptions) {
    this.prefix = options.prefix === '' || options.prefix.endsWith('/') ? options.prefix : `${options.prefix}/`;
    this.partBytes = options.partBytes ?? defaultS3PartBytes;
    this.readResumes = options.readResumes ?? 3;
  }

  /** Loads the SDK and makes the client; sweeps stale multipart uploads in the background. */
  async init(): Promise<void> {
    this.ready ??= (async () => {
      const s3 = await import('@aws-sdk/client-s3');
      this.s3 = s3;
      this.client = new s3.S3Client({
        region: this.options.region,
        ...(this.options.endpoint ? { endpoint: this.options.endpoint } : {}),
        forcePathStyle: this.options.forcePathStyle,
        ...(this.options.credentials ? { credentials: this.options.credentials } : {}),
        // Integrity is the blob's own sha256, proven while uploading and on every read; the SDK's
        // extra CRC over every byte would cost CPU (and some S3-compatible servers lack it).
        requestChecksumCalculation: 'WHEN_REQUIRED',
        responseChecksumValidation: 'WHEN_REQUIRED',
        maxAttempts: this.options.maxAttempts ?? 3,
        requestHandler: {
          connectionTimeout: this.options.connectionTimeoutMs ?? 5_000,
          requestTimeout: this.options.requestTimeoutMs ?? 60_000,
        },
      });
      void this.sweepStaleUploads().catch(() => undefined);
    })();
    return this.ready;
  }

  /** Releases the client's sockets. */
  async close(): Promise<void> {
    this.client?.destroy();
  }

  /** Multipart uploads this store failed to abort so far (tests use it to prove cleanup). */
  get pendingAbortCount(): number {
    return this.pendingAborts.size;
  }

  async put(keyArg: string, expectedArg: IBlobExpectation, sourceArg: IBlobSource): Promise<IStoredBlobRecord> {
    const objectKey = this.objectKeyOf(keyArg);
    await this.init();
    await this.retryPendingAborts();
    if (await this.stat(keyArg)) {
      throw new BlobStoreError('blob-exists', `blob ${keyArg} is already stored`);
    }
    const { s3, client } = this.sdk();
    const metadata = { [sha256MetadataName]: expectedArg.sha256, [lengthMetadataName]: String(expectedArg.byteLength) };
    const single = expectedArg.byteLength <= this.partBytes;
    let uploadId: string | null = null;
    const parts: Array<{ PartNumber: number; ETag?: string }> = [];
    let whole: Buffer | null = null;
    if (!single) {
      try {
        const created = await client.send(new s3.CreateMultipartUploadCommand({ Bucket: this.options.bucket, Key: objectKey, Metadata: metadata }));
        uploadId = created.UploadId ?? null;
      } catch (error) {
        throw failureOf(error, `blob ${keyArg}`);
      }
      if (!uploadId) {
        throw new BlobStoreError('blob-store-failed', `blob ${keyArg}: the S3 store answered no upload id`);
      }
    }
    const currentUpload = uploadId;
    // Each full staging buffer is hashed on the worker, then uploaded as one part (or, for a
    // single-part blob, kept until the sha256 is proven).
    const staging = new StagedSha256(
      StagedSha256.plainSlots(single ? 1 : partSlots, single ? Math.max(1, expectedArg.byteLength) : this.partBytes),
      async (bytesArg, positionArg) => {
        if (currentUpload === null) {
          whole = bytesArg;
          return;
        }
        const partNumber = positionArg / this.partBytes + 1;
        try {
          const uploaded = await client.send(new s3.UploadPartCommand({
            Bucket: this.options.bucket, Key: objectKey, UploadId: currentUpload, PartNumber: partNumber, Body: bytesArg, ContentLength: bytesArg.byteLength,
          }));
          parts[partNumber - 1] = { PartNumber: partNumber, ETag: uploaded.ETag };
        } catch (error) {
          throw failureOf(error, `blob ${keyArg} part ${partNumber}`);
        }
      },
    );
    try {
      await drainProvenBlob(keyArg, sourceArg, expectedArg, staging);
      // Proven: only now does the object come into existence.
      try {
        if (currentUpload === null) {
          await client.send(new s3.PutObjectCommand({
            Bucket: this.options.bucket, Key: objectKey, Body: whole ?? Buffer.alloc(0), ContentLength: expectedArg.byteLength, Metadata: metadata,
          }));
        } else {
          await client.send(new s3.CompleteMultipartUploadCommand({
            Bucket: this.options.bucket, Key: objectKey, UploadId: currentUpload, MultipartUpload: { Parts: parts },
          }));
          uploadId = null;
        }
      } catch (error) {
        throw failureOf(error, `blob ${keyArg}`);
      }
    } catch (error) {
      await staging.close();
      if (uploadId !== null) {
        await this.abortUpload(objectKey, uploadId);
      }
      throw error;
    }
    await staging.close();
    const stored = await this.stat(keyArg);
    if (!stored || stored.byteLength !== expectedArg.byteLength || stored.sha256 !== expectedArg.sha256) {
      // What the store holds is not what was proven (it answered success for something else).
      await this.delete(keyArg).catch(() => undefined);
      throw new BlobStoreError('blob-corrupt', `blob ${keyArg} is not what was uploaded`);
    }
    return stored;
  }

  async stat(keyArg: string): Promise<IStoredBlobRecord | null> {
    return (await this.head(keyArg))?.record ?? null;
  }

  /**
   * The bytes of a blob, proven against its length and sha256 (the last chunk is held back until
   * they are). With `offset`/`length` only that range is read and only its length is proven.
   * A download that breaks is resumed from the byte where it stopped, as long as the object is
   * the same one (its ETag); `readResumes` attempts in a row without progress end it with
   * `blob-store-unavailable`.
   */
  async *read(keyArg: string, optionsArg: IBlobReadOptions = {}): AsyncIterable<Buffer> {
    const objectKey = this.objectKeyOf(keyArg);
    const head = await this.head(keyArg);
    if (!head) {
      throw new BlobStoreError('blob-not-found', `blob ${keyArg} is not stored`);
    }
    const { record, etag } = head;
    const start = optionsArg.offset ?? 0;
    const end = optionsArg.length === undefined ? record.byteLength : start + optionsArg.length;
    if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 0 || end < start || end > record.byteLength) {
      throw new BlobStoreError('blob-range-invalid', `blob ${keyArg} has ${record.byteLength} bytes; the range asked for is outside`);
    }
    const whole = start === 0 && end === record.byteLength;
    const hash = whole ? optionsArg.sharedHash ?? createHash('sha256') : null;
    const { s3, client } = this.sdk();
    let position = start;
    let pending: Buffer | null = null;
    let failures = 0;
    while (position < end) {
      let body: (AsyncIterable<Uint8Array> & { destroy?: () => void }) | null = null;
      let progressed = false;
      try {
        const answer = await client.send(new s3.GetObjectCommand({
          Bucket: this.options.bucket, Key: objectKey, Range: `bytes=${position}-${end - 1}`, ...(etag ? { IfMatch: etag } : {}),
        }));
        if (etag && answer.ETag && answer.ETag !== etag) {
          throw new BlobStoreError('blob-corrupt', `blob ${keyArg} changed while it was read`);
        }
        body = answer.Body as unknown as AsyncIterable<Uint8Array> & { destroy?: () => void };
        for await (const piece of body) {
          const chunk = Buffer.isBuffer(piece) ? piece : Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength);
          position += chunk.byteLength;
          if (position > end) {
            throw new BlobStoreError('blob-corrupt', `blob ${keyArg} grew past its recorded length`);
          }
          progressed = true;
          failures = 0;
          hash?.update(chunk);
          if (!hash) {
            yield chunk;
            continue;
          }
          if (pending) {
            yield pending;
          }
          pending = chunk;
        }
      } catch (error) {
        if (error instanceof BlobStoreError) {
          throw error;
        }
        if (statusOf(error) === 412) {
          throw new BlobStoreError('blob-corrupt', `blob ${keyArg} changed while it was read`);
        }
        if (isNotFound(error)) {
          throw new BlobStoreError('blob-not-found', `blob ${keyArg} was deleted while it was read`);
        }
        const failure = failureOf(error, `blob ${keyArg}`);
        if (failure.code !== 'blob-store-unavailable' || failures >= this.readResumes) {
          throw failure;
        }
        failures += 1;
        // Resumed from `position` after a short pause (100 ms, 200 ms, 400 ms …).
        await pause(100 * 2 ** (failures - 1));
      } finally {
        body?.destroy?.();
      }
      if (!progressed && position < end && failures === 0) {
        // A clean end without a byte: the store answers less than it holds.
        throw new BlobStoreError('blob-corrupt', `blob ${keyArg} ended before its recorded length`);
      }
    }
    if (hash && (optionsArg.sharedHash ? hash.copy() : hash).digest('hex') !== record.sha256) {
      throw new BlobStoreError('blob-corrupt', `blob ${keyArg} no longer matches its record`);
    }
    if (pending) {
      yield pending;
    }
  }

  async delete(keyArg: string): Promise<void> {
    const objectKey = this.objectKeyOf(keyArg);
    await this.init();
    await this.retryPendingAborts();
    const { s3, client } = this.sdk();
    try {
      await client.send(new s3.DeleteObjectCommand({ Bucket: this.options.bucket, Key: objectKey }));
    } catch (error) {
      if (!isNotFound(error)) {
        throw failureOf(error, `blob ${keyArg}`);
      }
    }
  }

  /** The key inside the bucket (the prefix plus the blob key); refuses unsafe keys. */
  objectKeyOf(keyArg: string): string {
    if (!isBlobKey(keyArg)) {
      throw new BlobStoreError('blob-key-invalid', 'blob key must be a relative path of safe characters');
    }
    return `${this.prefix}${keyArg}`;
  }

  private sdk(): { s3: TS3Module; client: TS3Client } {
    if (!this.s3 || !this.client) {
      throw new BlobStoreError('blob-store-unavailable', 'the S3 blob store was not started');
    }
    return { s3: this.s3, client: this.client };
  }

  private async head(keyArg: string): Promise<IHeadOfBlob | null> {
    const objectKey = this.objectKeyOf(keyArg);
    await this.init();
    const { s3, client } = this.sdk();
    let answer: import('@aws-sdk/client-s3').HeadObjectCommandOutput;
    try {
      answer = await client.send(new s3.HeadObjectCommand({ Bucket: this.options.bucket, Key: objectKey }));
    } catch (error) {
      if (isNotFound(error)) {
        return null;
      }
      throw failureOf(error, `blob ${keyArg}`);
    }
    const sha256 = answer.Metadata?.[sha256MetadataName];
    const byteLength = Number(answer.Metadata?.[lengthMetadataName]);
    // An object without the proven length and sha256, or of another length, is not a blob.
    if (!sha256 || !/^[0-9a-f]{64}$/.test(sha256) || !Number.isSafeInteger(byteLength) || answer.ContentLength !== byteLength) {
      return null;
    }
    return {
      record: { key: keyArg, byteLength, sha256, storedAt: answer.LastModified?.getTime() ?? 0 },
      etag: answer.ETag,
    };
  }

  private async abortUpload(objectKeyArg: string, uploadIdArg: string): Promise<void> {
    const { s3, client } = this.sdk();
    try {
      await client.send(new s3.AbortMultipartUploadCommand({ Bucket: this.options.bucket, Key: objectKeyArg, UploadId: uploadIdArg }));
      this.pendingAborts.delete(uploadIdArg);
    } catch (error) {
      if (statusOf(error) === 404) {
        this.pendingAborts.delete(uploadIdArg);
        return;
      }
      // Parts cost storage until aborted: tried again on the next call (and by a bucket
      // lifecycle rule where one is set, see docs/storage.md).
      this.pendingAborts.set(uploadIdArg, objectKeyArg);
    }
  }

  private async retryPendingAborts(): Promise<void> {
    for (const [uploadId, objectKey] of [...this.pendingAborts]) {
      await this.abortUpload(objectKey, uploadId);
    }
  }

  /**
   * Aborts multipart uploads under the prefix that were started more than a day ago: left by a
   * crash. (A store without ListMultipartUploads, like s3rver, is simply not swept.)
   */
  private async sweepStaleUploads(): Promise<void> {
    const { s3, client } = this.sdk();
    let keyMarker: string | undefined;
    let uploadIdMarker: string | undefined;
    for (let page = 0; page < 100; page++) {
      const listed = await client.send(new s3.ListMultipartUploadsCommand({
        Bucket: this.options.bucket, Prefix: this.prefix, KeyMarker: keyMarker, UploadIdMarker: uploadIdMarker,
      }));
      for (const upload of listed.Uploads ?? []) {
        if (upload.Key && upload.UploadId && (upload.Initiated?.getTime() ?? Date.now()) < Date.now() - staleUploadAgeMs) {
          await this.abortUpload(upload.Key, upload.UploadId);
        }
      }
      if (!listed.IsTruncated) {
        return;
      }
      keyMarker = listed.NextKeyMarker;
      uploadIdMarker = listed.NextUploadIdMarker;
    }
  }
}

/** The S3 store's options from the configuration. */
export const s3BlobStoreOptionsOf = (configArg: ICloudlyS3Config): IS3BlobStoreOptions => ({
  bucket: configArg.bucket,
  prefix: configArg.prefix,
  region: configArg.region,
  endpoint: configArg.endpoint,
  forcePathStyle: configArg.forcePathStyle,
  credentials: configArg.credentials,
});

/** The blob store the configuration selects: the filesystem (default) or S3. */
export const blobStoreFromConfig = (configArg: ICloudlyConfig): IBlobStore & { init?(): Promise<void> } =>
  configArg.blobStore === 's3' && configArg.s3
    ? new S3BlobStore(s3BlobStoreOptionsOf(configArg.s3))
    : new FilesystemBlobStore(path.join(configArg.dataDir, 'blobs'));
