import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { data } from '../ts/interfaces/index.js';

const {
  validateClusterNodeCorestore,
  maximumClusterNodeCorestoreEndpointLength,
  validateClusterNodeHostAddresses,
  runtimeNetworkProtectionContract,
  runtimeNodeUplinkAddress,
  validateClusterNodeReport,
  validateClusterRelayAnnouncement,
  validateClusterRelayOrigin,
  validateClusterRelayRegistrationQueryIds,
} = data;

const path = 'cluster node corestore';

/** Validators answer a list of non-empty reason strings, whatever they are given. */
const isListOfReasons = (valueArg: unknown): boolean =>
  Array.isArray(valueArg) && valueArg.every((reason) => typeof reason === 'string' && reason.length > 0);

/**
 * Which rules a set of reasons names, by a short tag per rule, in the order they appear. Each
 * reason must be the upstream validator's literal text (spec 000:64-102), whole.
 */
const ruleTags = (reasonsArg: string[]): string[] =>
  reasonsArg.map((reason) => {
    if (reason === `${path} must use its exact schema`) return 'schema';
    if (reason === `${path} endpoint must be a string of 1 to 2048 characters`) return 'length';
    if (reason === `${path} endpoint must be a parsable URL`) return 'parse';
    if (reason === `${path} endpoint must use the http or https scheme`) return 'scheme';
    if (reason === `${path} endpoint must not carry userinfo`) return 'userinfo';
    if (/^cluster node corestore endpoint must be the canonical origin \S+, without a path, query, fragment, trailing slash or default port$/.test(reason)) return 'canonical';
    return `unknown: ${reason}`;
  });

test('a node Corestore endpoint: every rule alone and in combination', () => {
  const withGetter = {};
  Object.defineProperty(withGetter, 'endpoint', { enumerable: true, get: () => 'http://10.0.0.1:3000' });
  class Endpoint { endpoint = 'http://10.0.0.1:3000'; }
  const table: Array<[string, unknown, string[]]> = [
    ['plain http origin with port', { endpoint: 'http://10.20.0.15:3000' }, []],
    ['https origin without port', { endpoint: 'https://corestore.example' }, []],
    ['http origin without port', { endpoint: 'http://10.20.0.15' }, []],
    ['IPv6 origin', { endpoint: 'http://[fd00::1]:3000' }, []],
    ['null', null, ['schema']],
    ['undefined', undefined, ['schema']],
    ['a string', 'http://10.0.0.1:3000', ['schema']],
    ['an array', [{ endpoint: 'http://10.0.0.1' }], ['schema']],
    ['a class instance', new Endpoint(), ['schema']],
    ['an extra key', { endpoint: 'http://10.0.0.1', token: 'x' }, ['schema']],
    ['no key', {}, ['schema']],
    ['a getter', withGetter, ['schema']],
    ['a number endpoint', { endpoint: 3000 }, ['length']],
    ['an empty endpoint', { endpoint: '' }, ['length']],
    ['an endpoint too long', { endpoint: `http://a${'b'.repeat(maximumClusterNodeCorestoreEndpointLength)}.example` }, ['length']],
    ['no scheme before an address', { endpoint: '10.0.0.1:3000' }, ['parse']],
    ['a host name read as a scheme', { endpoint: 'corestore:3000' }, ['scheme', 'canonical']],
    ['not a URL', { endpoint: 'not a url' }, ['parse']],
    ['ftp scheme alone', { endpoint: 'ftp://10.0.0.1' }, ['scheme']],
    ['ws scheme alone', { endpoint: 'ws://10.0.0.1:3000' }, ['scheme']],
    ['an opaque scheme', { endpoint: 'mailto:corestore@example' }, ['scheme', 'canonical']],
    ['userinfo', { endpoint: 'http://user:secret@10.0.0.1:3000' }, ['userinfo', 'canonical']],
    ['user only', { endpoint: 'http://user@10.0.0.1:3000' }, ['userinfo', 'canonical']],
    ['trailing slash', { endpoint: 'http://10.0.0.1:3000/' }, ['canonical']],
    ['a path', { endpoint: 'http://10.0.0.1:3000/api' }, ['canonical']],
    ['a query', { endpoint: 'http://10.0.0.1:3000?x=1' }, ['canonical']],
    ['a fragment', { endpoint: 'http://10.0.0.1:3000#x' }, ['canonical']],
    ['default http port', { endpoint: 'http://10.0.0.1:80' }, ['canonical']],
    ['default https port', { endpoint: 'https://corestore.example:443' }, ['canonical']],
    ['upper-case host', { endpoint: 'http://CORESTORE.example' }, ['canonical']],
    ['scheme, userinfo and path together', { endpoint: 'ftp://u:p@10.0.0.1/x' }, ['scheme', 'userinfo', 'canonical']],
    ['userinfo and default port together', { endpoint: 'https://u@corestore.example:443' }, ['userinfo', 'canonical']],
  ];
  for (const [name, value, expected] of table) {
    const reasons = validateClusterNodeCorestore(value);
    assert.deepEqual(ruleTags(reasons), expected, name);
    for (const reason of reasons) {
      assert.ok(reason.startsWith(path), `${name}: reason names the path: ${reason}`);
    }
  }
});

test('a node Corestore endpoint: exactly 2048 characters is admitted, 2049 is not', () => {
  const host = 'a'.repeat(maximumClusterNodeCorestoreEndpointLength - 'http://'.length - '.io'.length);
  const atLimit = `http://${host}.io`;
  assert.equal(atLimit.length, 2048);
  // The URL parser refuses labels over 63 characters only for IDNA; a plain long label parses.
  assert.deepEqual(ruleTags(validateClusterNodeCorestore({ endpoint: atLimit })), []);
  assert.deepEqual(ruleTags(validateClusterNodeCorestore({ endpoint: `${atLimit}x` })), ['length']);
});

test('a node Corestore endpoint: the path argument names every reason', () => {
  const reasons = validateClusterNodeCorestore({ endpoint: 'ftp://u@x/y' }, 'corestore');
  assert.deepEqual(reasons, [
    'corestore endpoint must use the http or https scheme',
    'corestore endpoint must not carry userinfo',
    'corestore endpoint must be the canonical origin ftp://x, without a path, query, fragment, trailing slash or default port',
  ]);
});

test('a node Corestore endpoint: never throws on arbitrary input', () => {
  fc.assert(fc.property(fc.anything(), (value) => {
    const reasons = validateClusterNodeCorestore(value);
    assert.ok(isListOfReasons(reasons));
  }));
  fc.assert(fc.property(fc.string(), (endpoint) => {
    const reasons = validateClusterNodeCorestore({ endpoint });
    assert.ok(isListOfReasons(reasons));
    // An endpoint is admitted exactly when it is its own http(s) origin.
    let origin: string | null = null;
    try {
      const parsed = new URL(endpoint);
      origin = ['http:', 'https:'].includes(parsed.protocol) && !parsed.username && !parsed.password ? parsed.origin : null;
    } catch {
      origin = null;
    }
    assert.equal(reasons.length === 0, endpoint.length > 0 && endpoint.length <= 2048 && origin === endpoint, endpoint);
  }));
  const throwing = {};
  Object.defineProperty(throwing, 'endpoint', { enumerable: true, get: () => { throw new Error('boom'); } });
  assert.equal(validateClusterNodeCorestore(throwing).length, 1);
});

test('a node Corestore endpoint: every admitted value is its own origin', () => {
  fc.assert(fc.property(fc.webUrl(), (url) => {
    const reasons = validateClusterNodeCorestore({ endpoint: url });
    if (reasons.length === 0) {
      assert.equal(new URL(url).origin, url);
    }
  }));
});

test('hostAddresses: every rule alone and in combination', () => {
  const max = runtimeNetworkProtectionContract.maximumHostAddresses;
  assert.equal(max, 32);
  const many = (countArg: number): string[] =>
    Array.from({ length: countArg }, (_, index) => `10.0.${index}.1`).sort();
  const sparse: string[] = ['10.0.0.1'];
  sparse[2] = '10.0.0.3';
  const withGetter = ['10.0.0.1'];
  Object.defineProperty(withGetter, 1, { enumerable: true, get: () => '10.0.0.2' });
  const table: Array<[string, unknown, string[]]> = [
    ['one address', ['192.0.2.17'], []],
    ['sorted as strings, not numerically', ['10.0.0.10', '10.0.0.9'], []],
    ['exactly the maximum', many(max), []],
    ['private and public unicast', ['10.0.0.1', '172.16.0.1', '192.168.1.1', '8.8.8.8'], []],
    ['not an array', '10.0.0.1', ['not-array']],
    ['null', null, ['not-array']],
    ['an object', { 0: '10.0.0.1' }, ['not-array']],
    ['empty', [], ['empty']],
    ['one over the maximum', many(max + 1), ['too-many']],
    ['a huge array', new Array(1_000_000).fill('10.0.0.1'), ['too-many']],
    ['a hole', sparse, ['shape']],
    ['an accessor', withGetter, ['shape']],
    ['loopback', ['127.0.0.1'], ['address']],
    ['unspecified', ['0.0.0.0'], ['address']],
    ['link-local', ['169.254.1.1'], ['address']],
    ['multicast', ['224.0.0.1'], ['address']],
    ['reserved', ['240.0.0.1'], ['address']],
    ['broadcast', ['255.255.255.255'], ['address']],
    ['leading zero', ['10.0.0.01'], ['address']],
    ['a prefix', ['10.0.0.0/24'], ['address']],
    ['IPv6', ['fd00::1'], ['address']],
    ['a number', [167772161], ['address']],
    ['unsorted', ['10.0.0.9', '10.0.0.10'], ['order']],
    ['duplicate', ['10.0.0.1', '10.0.0.1'], ['duplicate']],
    ['bad address, duplicate and unsorted together', ['127.0.0.1', '10.0.0.2', '10.0.0.2', '10.0.0.1'], ['address', 'duplicate', 'order']],
  ];
  const tag = (reasonArg: string): string => {
    if (reasonArg.includes('must be an array')) return 'not-array';
    if (reasonArg.includes('not be empty')) return 'empty';
    if (reasonArg.includes('at most 32')) return 'too-many';
    if (reasonArg.includes('without holes')) return 'shape';
    if (reasonArg.includes('unicast IPv4 uplink')) return 'address';
    if (reasonArg.includes('must be unique')) return 'duplicate';
    if (reasonArg.includes('must sort after')) return 'order';
    return `unknown: ${reasonArg}`;
  };
  for (const [name, value, expected] of table) {
    const reasons = validateClusterNodeHostAddresses(value);
    assert.deepEqual(reasons.map(tag), expected, name);
    assert.ok(reasons.every((reason) => reason.startsWith('hostAddresses')), name);
  }
  // The reasons name the offending index.
  assert.deepEqual(
    validateClusterNodeHostAddresses(['10.0.0.2', '127.0.0.1', '10.0.0.1']).map((reason) => reason.split(' ')[0]),
    ['hostAddresses[1]'],
  );
});

test('runtimeNodeUplinkAddress admits exactly unicast dotted quads', () => {
  for (const address of ['10.0.0.1', '1.1.1.1', '100.64.0.1', '223.255.255.254', '169.253.0.1']) {
    assert.equal(runtimeNodeUplinkAddress(address), true, address);
  }
  for (const value of ['', '1.2.3', '1.2.3.4.5', '256.0.0.1', ' 10.0.0.1', '127.1.2.3', null, 10, ['10.0.0.1']]) {
    assert.equal(runtimeNodeUplinkAddress(value), false, String(value));
  }
});

test('a node report: members, name and hostAddresses', () => {
  assert.deepEqual(validateClusterNodeReport({ nodeId: 'node-1' }), []);
  assert.deepEqual(validateClusterNodeReport({ nodeId: 'node-1', name: 'worker 1', hostAddresses: ['10.0.0.1'] }), []);
  assert.deepEqual(validateClusterNodeReport(null), ['report must be an object']);
  const reasons = validateClusterNodeReport({ nodeId: '-bad', name: ' padded', hostAddresses: [], extra: 1 });
  assert.equal(reasons.length, 4);
  assert.ok(reasons[0].startsWith('report.extra'));
  assert.ok(reasons[1].startsWith('report.nodeId'));
  assert.ok(reasons[2].startsWith('report.name'));
  assert.ok(reasons[3].startsWith('report.hostAddresses'));
  fc.assert(fc.property(fc.anything(), (value) => {
    assert.ok(isListOfReasons(validateClusterNodeReport(value)));
  }));
});

test('a relay registration: origin, version and protocol', () => {
  const good = { origin: 'https://relay.example:8443', version: '1.2.3', protocol: 'cluster-relay/1' };
  assert.deepEqual(validateClusterRelayAnnouncement(good), []);
  assert.deepEqual(validateClusterRelayOrigin('http://192.0.2.17:8080'), []);
  assert.equal(validateClusterRelayOrigin('http://192.0.2.17:8080/').length, 1);
  assert.equal(validateClusterRelayOrigin('').length, 1);
  const reasons = validateClusterRelayAnnouncement({ origin: 'ftp://u@x/', version: '', protocol: 7, more: true });
  assert.deepEqual(reasons.map((reason) => reason.split(' ')[0]), [
    'registration.more',
    'registration.origin',
    'registration.origin',
    'registration.origin',
    'registration.version',
    'registration.protocol',
  ]);
  fc.assert(fc.property(fc.anything(), (value) => {
    assert.ok(isListOfReasons(validateClusterRelayAnnouncement(value)));
  }));
});

test('getClusterRelayRegistrations clusterIds: array of unique ids', () => {
  assert.deepEqual(validateClusterRelayRegistrationQueryIds([]), []);
  assert.deepEqual(validateClusterRelayRegistrationQueryIds(['a', 'b-2']), []);
  assert.equal(validateClusterRelayRegistrationQueryIds('a').length, 1);
  assert.deepEqual(
    validateClusterRelayRegistrationQueryIds(['a', '', 'a', 5]).map((reason) => reason.split(' ')[0]),
    ['clusterIds[1]', 'clusterIds[2]', 'clusterIds[3]'],
  );
  assert.equal(validateClusterRelayRegistrationQueryIds(new Array(1025).fill('a')).length, 1);
});
