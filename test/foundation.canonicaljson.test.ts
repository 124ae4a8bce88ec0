import { test } from 'node:test';
import assert from 'node:assert/strict';
import canonicalizeModule from 'canonicalize';
import { canonicalizeJson, computeDomainDigestHex } from '../ts/interfaces/private/canonicaljson.js';
import { seededRandom } from './helpers/embedded.js';

/**
 * ts/interfaces/private/canonicaljson.ts writes canonical JSON (RFC 8785) in one walk of its own.
 * Every contract digest is built on it, so its text must be the `canonicalize` package's, byte for
 * byte, for every plain JSON value, and it must refuse what it refused before, with the same words.
 */

const reference = canonicalizeModule as unknown as (valueArg: unknown) => string;

const awkwardStrings = ['', 'a', 'é', '\u0000', '\n\t"\\', '\u2028', '\ud83d\ude00', '\ud800', '\udfff', 'z'.repeat(40), '10', '-1', '__proto__x'];
const awkwardNumbers = [0, -0, 1, -1, 0.1, 1e21, 1e-7, 5e-324, 1.7976931348623157e308, 123456789.123, -(2 ** 53), 2 ** 53 + 2, 333333333.3333333];

const randomValue = (randomArg: ReturnType<typeof seededRandom>, depthArg: number): unknown => {
  const roll = randomArg.next();
  if (depthArg > 5 || roll < 0.35) {
    const which = Math.floor(randomArg.next() * 5);
    if (which === 0) {
      return randomArg.pick(awkwardStrings);
    }
    if (which === 1) {
      return randomArg.next() < 0.5 ? randomArg.pick(awkwardNumbers) : (randomArg.next() - 0.5) * 10 ** Math.floor(randomArg.next() * 30 - 10);
    }
    return which === 2 ? randomArg.next() < 0.5 : which === 3 ? null : Math.floor(randomArg.next() * 1000);
  }
  const size = Math.floor(randomArg.next() * 6);
  if (roll < 0.6) {
    return Array.from({ length: size }, () => randomValue(randomArg, depthArg + 1));
  }
  const record: Record<string, unknown> = randomArg.next() < 0.1 ? Object.create(null) : {};
  for (let index = 0; index < size; index++) {
    record[randomArg.pick(awkwardStrings) + randomArg.pick(['', 'b', 'B', '1', '_'])] = randomValue(randomArg, depthArg + 1);
  }
  return record;
};

test('canonical text is the canonicalize package\'s for 3,000 random plain JSON values', () => {
  const random = seededRandom(20261207);
  for (let round = 0; round < 3_000; round++) {
    const value = randomValue(random, 0);
    assert.equal(canonicalizeJson(value), reference(value), `round ${round}: ${JSON.stringify(value)}`);
  }
});

test('what is not plain JSON is refused with the words it was refused with before', () => {
  const deep: Record<string, unknown> = {};
  let cursor = deep;
  for (let level = 0; level < 70; level++) {
    cursor.next = {};
    cursor = cursor.next as Record<string, unknown>;
  }
  const cases: Array<[unknown, RegExp]> = [
    [Number.NaN, /value must be a finite number/],
    [{ a: [1, Infinity] }, /value\.a\[1\] must be a finite number/],
    [{ a: undefined }, /value\.a must not be undefined/],
    [[undefined], /value\[0\] is not a JSON value/],
    [{ when: new Date(0) }, /value\.when must be a plain object/],
    [{ f: () => 1 }, /value\.f is not a JSON value/],
    [new Map(), /value must be a plain object/],
    [10n, /value is not a JSON value/],
    [deep, /is nested too deeply/],
  ];
  for (const [value, message] of cases) {
    assert.throws(() => canonicalizeJson(value), message);
  }
});

test('an array with holes is written as the package writes it', () => {
  // eslint-disable-next-line no-sparse-arrays
  const holes = [1, , 3];
  assert.equal(canonicalizeJson(holes), reference(holes));
});

test('a domain digest is sha256 over the domain, a NUL and the canonical text', async () => {
  const { createHash } = await import('node:crypto');
  const value = { b: [1, 'x'], a: { d: null, c: true } };
  const expected = createHash('sha256').update('cloudly.test').update(Buffer.from([0])).update('{"a":{"c":true,"d":null},"b":[1,"x"]}').digest('hex');
  assert.equal(computeDomainDigestHex('cloudly.test', value), expected);
});
