import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TCloudlyLogger } from './logger.js';

/**
 * The web dashboard (docs/dashboard.md): `GET /dashboard/` serves one HTML page, one script and one
 * stylesheet bundled from `web/` by esbuild, all same-origin, under a strict Content-Security-Policy.
 * The bundle lives in `dist/dashboard/` (git-ignored). When `web/` is present (a checkout, tests,
 * CI) the bundle is built on the first dashboard request if it is missing or older than any file
 * under `web/` (about 100-300 ms); `scripts/build-dashboard.ts` builds it ahead of time.
 *
 * A browser cannot put `Authorization` on a WebSocket upgrade, so the dashboard offers its identity
 * JWT as a WebSocket subprotocol (`cloudly.bearer.<jwt>`, as Kubernetes does). A same-origin upgrade
 * to `/typedsocket` that carries one and no `Authorization` header gets it copied into the header
 * before the transport authenticates the upgrade; nothing else about the socket changes.
 */

export const projectDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const dashboardSourceDir = path.join(projectDir, 'web');
export const dashboardBundleDir = path.join(projectDir, 'dist', 'dashboard');

/** The subprotocol prefix that carries the identity JWT on a browser's socket upgrade. */
export const dashboardBearerProtocolPrefix = 'cloudly.bearer.';
/** The subprotocol the dashboard names first; the server selects it (ws selects the first offered). */
export const dashboardSocketProtocol = 'cloudly.dashboard';

/** No inline script or style, no eval, nothing from another origin, never framed. */
export const dashboardContentSecurityPolicy = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "manifest-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
].join('; ');

export const dashboardSecurityHeaders: Readonly<Record<string, string>> = Object.freeze({
  'content-security-policy': dashboardContentSecurityPolicy,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'permissions-policy': 'camera=(), microphone=(), geolocation=(), payment=(), usb=()',
  'cache-control': 'no-cache',
});

/** `Strict-Transport-Security` of every dashboard answer served over TLS. */
export const dashboardHstsHeader = 'max-age=31536000';

/** The files of the bundle, by the name they are served under. */
const bundleFiles: Readonly<Record<string, string>> = Object.freeze({
  'index.html': 'text/html; charset=utf-8',
  'app.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
  'favicon.svg': 'image/svg+xml',
  // The relay-token dialog links it: a relay author reads it from the same origin, offline.
  'relay-protocol.md': 'text/markdown; charset=utf-8',
});

const newestMtimeMs = async (dirArg: string): Promise<number> => {
  let newest = 0;
  const entries = await fsp.readdir(dirArg, { withFileTypes: true });
  for (const entry of entries) {
    const full = path.join(dirArg, entry.name);
    if (entry.isDirectory()) {
      newest = Math.max(newest, await newestMtimeMs(full));
    } else if (entry.isFile()) {
      newest = Math.max(newest, (await fsp.stat(full)).mtimeMs);
    }
  }
  return newest;
};

export interface IDashboardBuildResult {
  outDir: string;
  /** Bytes of each written file. */
  bytes: Record<string, number>;
  durationMs: number;
}

/**
 * Bundles `web/src/main.ts` (Lit components, TypeScript) into `app.js` and `web/styles.css` into
 * `app.css`, minified, and copies `index.html`, `favicon.svg` and `docs/relay-protocol.md`. Writes into a fresh temporary
 * directory and renames it into place, so a reader never sees half a bundle and concurrent builds
 * (parallel test processes) do not collide.
 */
export const buildDashboardBundle = async (optionsArg: { sourceDir?: string; outDir?: string; minify?: boolean } = {}): Promise<IDashboardBuildResult> => {
  const started = performance.now();
  const sourceDir = optionsArg.sourceDir ?? dashboardSourceDir;
  const outDir = optionsArg.outDir ?? dashboardBundleDir;
  const esbuild = await import('esbuild');
  await fsp.mkdir(path.dirname(outDir), { recursive: true });
  const tempDir = await fsp.mkdtemp(`${outDir}.build-`);
  try {
    await esbuild.build({
      entryPoints: { app: path.join(sourceDir, 'src', 'main.ts') },
      bundle: true,
      format: 'esm',
      platform: 'browser',
      target: ['chrome110', 'firefox115', 'safari16'],
      minify: optionsArg.minify ?? true,
      legalComments: 'none',
      outdir: tempDir,
      tsconfig: path.join(sourceDir, 'tsconfig.json'),
      logLevel: 'silent',
      define: { 'process.env.NODE_ENV': '"production"' },
      // The forms reuse the contracts' validators (ts/interfaces); their modules import
      // node:crypto for hashing the forms never do, so the browser gets a stand-in.
      plugins: [{
        name: 'node-crypto-shim',
        setup(buildArg) {
          buildArg.onResolve({ filter: /^(node:)?crypto$/ }, () => ({ path: path.join(sourceDir, 'src', 'shims', 'node-crypto.ts') }));
        },
      }],
    });
    await esbuild.build({
      entryPoints: { app: path.join(sourceDir, 'styles.css') },
      bundle: true,
      minify: optionsArg.minify ?? true,
      outdir: tempDir,
      logLevel: 'silent',
    });
    await fsp.copyFile(path.join(sourceDir, 'index.html'), path.join(tempDir, 'index.html'));
    await fsp.copyFile(path.join(sourceDir, 'favicon.svg'), path.join(tempDir, 'favicon.svg'));
    await fsp.copyFile(path.join(sourceDir, '..', 'docs', 'relay-protocol.md'), path.join(tempDir, 'relay-protocol.md'));
    const bytes: Record<string, number> = {};
    for (const name of Object.keys(bundleFiles)) {
      bytes[name] = (await fsp.stat(path.join(tempDir, name))).size;
    }
    // Swap: move the old bundle aside, move the new one in, drop the old one.
    const oldDir = `${outDir}.old-${process.pid}-${Date.now()}`;
    await fsp.rename(outDir, oldDir).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') {
        throw error;
      }
    });
    await fsp.rename(tempDir, outDir).catch(async (error: NodeJS.ErrnoException) => {
      // Another process put its fresh bundle in place between the two renames: keep that one.
      if (error.code !== 'ENOTEMPTY' && error.code !== 'EEXIST') {
        throw error;
      }
      await fsp.rm(tempDir, { recursive: true, force: true });
    });
    await fsp.rm(oldDir, { recursive: true, force: true });
    return { outDir, bytes, durationMs: performance.now() - started };
  } catch (error) {
    await fsp.rm(tempDir, { recursive: true, force: true });
    throw error;
  }
};

/** Whether the bundle is missing or older than its sources (false when there are no sources). */
export const dashboardBundleIsStale = async (sourceDirArg = dashboardSourceDir, outDirArg = dashboardBundleDir): Promise<boolean> => {
  if (!fs.existsSync(sourceDirArg)) {
    return false;
  }
  let builtAt = Infinity;
  for (const name of Object.keys(bundleFiles)) {
    try {
      builtAt = Math.min(builtAt, (await fsp.stat(path.join(outDirArg, name))).mtimeMs);
    } catch {
      return true;
    }
  }
  return (await newestMtimeMs(sourceDirArg)) > builtAt;
};

/** One build at a time per process; later callers share it. */
let ensuring: Promise<void> | null = null;

/** Builds the bundle when it is missing or stale; resolves at once when it is current. */
export const ensureDashboardBundle = async (loggerArg?: TCloudlyLogger): Promise<void> => {
  if (!ensuring) {
    ensuring = (async () => {
      if (await dashboardBundleIsStale()) {
        const result = await buildDashboardBundle();
        loggerArg?.info({ bytes: result.bytes, durationMs: Math.round(result.durationMs) }, 'dashboard bundle built');
      }
    })().finally(() => {
      ensuring = null;
    });
  }
  return ensuring;
};

const sameOrigin = (requestArg: FastifyRequest): boolean => {
  const origin = requestArg.headers.origin;
  const host = requestArg.headers.host;
  if (typeof origin !== 'string' || typeof host !== 'string') {
    return false;
  }
  try {
    return new URL(origin).host === host;
  } catch {
    return false;
  }
};

/** The JWT a same-origin browser offers as a subprotocol, or null. */
const readBearerProtocol = (requestArg: FastifyRequest): string | null => {
  const header = requestArg.headers['sec-websocket-protocol'];
  if (typeof header !== 'string' || header.length > 16_384) {
    return null;
  }
  for (const part of header.split(',')) {
    const value = part.trim();
    if (value.startsWith(dashboardBearerProtocolPrefix)) {
      const jwt = value.slice(dashboardBearerProtocolPrefix.length);
      return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(jwt) ? jwt : null;
    }
  }
  return null;
};

/** Registers `/dashboard` and the socket bearer hook on the server's fastify instance (before listen). */
export const registerDashboard = (appArg: FastifyInstance, optionsArg: { logger: TCloudlyLogger; tls?: boolean }): void => {
  if (optionsArg.tls) {
    // Over TLS the browser is told to come back only over TLS (a year; subdomains are not Cloudly's to speak for).
    appArg.addHook('onSend', async (request, reply) => {
      if (request.url === '/dashboard' || request.url.startsWith('/dashboard/')) {
        void reply.header('strict-transport-security', dashboardHstsHeader);
      }
    });
  }
  appArg.addHook('onRequest', async (request) => {
    if (request.method !== 'GET' || request.url !== '/typedsocket' || request.headers.authorization !== undefined) {
      return;
    }
    const jwt = readBearerProtocol(request);
    if (jwt !== null && sameOrigin(request)) {
      request.raw.headers.authorization = `Bearer ${jwt}`;
    }
  });

  const send = async (reply: FastifyReply, nameArg: string) => {
    try {
      await ensureDashboardBundle(optionsArg.logger);
    } catch (error) {
      optionsArg.logger.error({ err: error }, 'dashboard bundle could not be built');
      return reply.code(503).headers(dashboardSecurityHeaders).type('text/plain; charset=utf-8')
        .send('The dashboard bundle could not be built; see the server log.');
    }
    let body: Buffer;
    try {
      body = await fsp.readFile(path.join(dashboardBundleDir, nameArg));
    } catch {
      return reply.code(503).headers(dashboardSecurityHeaders).type('text/plain; charset=utf-8')
        .send('The dashboard is not built: run `node --import tsx scripts/build-dashboard.ts`.');
    }
    return reply.code(200).headers(dashboardSecurityHeaders).type(bundleFiles[nameArg]).send(body);
  };

  // The base URL the start log prints is where a browser goes first: the dashboard is there.
  appArg.get('/', async (_request, reply) => reply.code(302).headers(dashboardSecurityHeaders).header('location', '/dashboard/').send());
  appArg.get('/dashboard', async (_request, reply) => reply.code(302).headers(dashboardSecurityHeaders).header('location', '/dashboard/').send());
  appArg.get('/dashboard/', async (_request, reply) => send(reply, 'index.html'));
  appArg.get<{ Params: { file: string } }>('/dashboard/:file', async (request, reply) => {
    const name = request.params.file;
    if (!Object.hasOwn(bundleFiles, name) || name === 'index.html') {
      return reply.code(404).headers(dashboardSecurityHeaders).type('text/plain; charset=utf-8').send('not found');
    }
    return send(reply, name);
  });
};
