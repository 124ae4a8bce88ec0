import * as net from 'node:net';
import { laneOf } from '../../scripts/test.js';

/**
 * Loaded (`--import`) into every test file's process by scripts/test.ts. In a file of the unit
 * lane it makes opening a socket fail: a unit test that starts a server or dials out is in the
 * wrong lane, and says so at once instead of quietly slowing the lane down.
 */

const file = process.argv[1];
// A shared test process of the unit lane (scripts/test.ts) says so in its environment.
const unitProcess = process.env.CLOUDLY_TEST_LANE === 'unit' || (file !== undefined && /\.test\.ts$/.test(file) && laneOf(file) === 'unit');
if (unitProcess) {
  const refuse = (whatArg: string) => function refused(): never {
    throw new Error(`${whatArg} in a unit-lane test file${process.env.CLOUDLY_TEST_LANE === 'unit' ? '' : ` (${file})`}: move the file to the integration lane (scripts/test.ts)`);
  };
  net.Server.prototype.listen = refuse('a server listening') as typeof net.Server.prototype.listen;
  net.Socket.prototype.connect = refuse('a socket connecting') as typeof net.Socket.prototype.connect;
}
