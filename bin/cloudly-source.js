// The server from a checkout: what `bin/cloudly-server --source` runs (`npm start`, `cloudly server`).
// ts/cli.ts runs from an esbuild bundle built on first use into .nogit/server/
// (CLOUDLY_SERVER_CACHE_DIR, which must lie inside the checkout: the bundle loads its packages from
// the checkout's node_modules), and built again whenever one of its sources changed; loading the
// sources through tsx cost every start about two CPU-seconds more. With no bundle to be had
// (esbuild missing, a read-only checkout), or with CLOUDLY_SERVER_SOURCE=1, the sources run through
// tsx (bin/checkoutbundle.js). The launcher runs this file with the server's node flags.
import { join } from 'node:path';
import { checkoutRoot, runFromCheckout } from './checkoutbundle.js';

await runFromCheckout({
  entry: 'ts/cli.ts',
  cacheDir: process.env.CLOUDLY_SERVER_CACHE_DIR || join(checkoutRoot, '.nogit', 'server'),
  fromSource: process.env.CLOUDLY_SERVER_SOURCE === '1',
});
