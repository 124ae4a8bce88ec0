#!/usr/bin/env node
// The `cloudly-sim` executable from a checkout: the simulator (ts/sim/main.ts) runs from a bundle
// built on first use into .nogit/sim/ (CLOUDLY_SIM_CACHE_DIR, inside the checkout) and built again
// whenever one of its sources changed, as bin/cloudly.js runs the CLI; with CLOUDLY_SIM_SOURCE=1
// (or no bundle to be had) through tsx (docs/simulator.md).
import { join } from 'node:path';
import { checkoutRoot, runFromCheckout } from './checkoutbundle.js';

await runFromCheckout({
  entry: 'ts/sim/main.ts',
  cacheDir: process.env.CLOUDLY_SIM_CACHE_DIR || join(checkoutRoot, '.nogit', 'sim'),
  fromSource: process.env.CLOUDLY_SIM_SOURCE === '1',
});
