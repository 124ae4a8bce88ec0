/**
 * The runtime network contracts judge values that crossed a wire and may be hostile. Before a
 * validator looks at a value it takes a detached copy of its plain JSON data here: accessors are
 * never invoked, class instances, functions, symbols, cycles and non-finite numbers are refused,
 * and the walk is bounded, so the rules that follow read ordinary frozen data and cannot throw.
 * Project's own definition.
 */

export type TRuntimeNetworkPlainData =
  | null
  | boolean
  | number
  | string
  | readonly TRuntimeNetworkPlainData[]
  | { readonly [key: string]: TRuntimeNetworkPlainData };

export interface IRuntimeNetworkPlainDataLimits {
  /** Deepest nesting admitted (the contracts here nest at most about six levels). */
  maximumDepth: number;
  /** Longest array admitted; a longer one is refused from its length alone. */
  maximumArrayLength: number;
  /** Total values visited before the walk gives up. */
  maximumValues: number;
}

export const runtimeNetworkPlainDataLimits: IRuntimeNetworkPlainDataLimits = Object.freeze({
  maximumDepth: 16,
  maximumArrayLength: 65_536,
  maximumValues: 2_000_000,
});

export type TRuntimeNetworkPlainDataResult =
  | { ok: true; value: TRuntimeNetworkPlainData }
  | { ok: false; reason: string };

class PlainDataRefusal {
  constructor(public reason: string) {}
}

/**
 * A frozen plain copy of the value, or the first reason it is not plain JSON data.
 * Never throws: a proxy trap or any other surprise becomes a refusal.
 */
export const snapshotRuntimeNetworkPlainData = (
  valueArg: unknown,
  pathArg: string,
  limitsArg: IRuntimeNetworkPlainDataLimits = runtimeNetworkPlainDataLimits,
): TRuntimeNetworkPlainDataResult => {
  const budget = { remaining: limitsArg.maximumValues };
  const visiting = new Set<object>();
  try {
    return { ok: true, value: copyPlain(valueArg, pathArg, 0, limitsArg, budget, visiting) };
  } catch (error) {
    if (error instanceof PlainDataRefusal) {
      return { ok: false, reason: error.reason };
    }
    return { ok: false, reason: `${pathArg} could not be read as plain data` };
  }
};

const copyPlain = (
  valueArg: unknown,
  pathArg: string,
  depthArg: number,
  limitsArg: IRuntimeNetworkPlainDataLimits,
  budgetArg: { remaining: number },
  visitingArg: Set<object>,
): TRuntimeNetworkPlainData => {
  budgetArg.remaining -= 1;
  if (budgetArg.remaining < 0) {
    throw new PlainDataRefusal(`${pathArg} holds more values than the contract can carry`);
  }
  if (valueArg === null || typeof valueArg === 'string' || typeof valueArg === 'boolean') {
    return valueArg;
  }
  if (typeof valueArg === 'number') {
    if (!Number.isFinite(valueArg)) {
      throw new PlainDataRefusal(`${pathArg} must be a finite number`);
    }
    return valueArg;
  }
  if (typeof valueArg !== 'object') {
    throw new PlainDataRefusal(`${pathArg} must be plain JSON data, not a ${typeof valueArg}`);
  }
  if (depthArg >= limitsArg.maximumDepth) {
    throw new PlainDataRefusal(`${pathArg} is nested too deeply`);
  }
  if (visitingArg.has(valueArg)) {
    throw new PlainDataRefusal(`${pathArg} refers to itself`);
  }
  if (Object.getOwnPropertySymbols(valueArg).length > 0) {
    throw new PlainDataRefusal(`${pathArg} must not carry symbol keys`);
  }
  visitingArg.add(valueArg);
  try {
    if (Array.isArray(valueArg)) {
      if (Object.getPrototypeOf(valueArg) !== Array.prototype) {
        throw new PlainDataRefusal(`${pathArg} must be a plain array`);
      }
      const length = valueArg.length;
      if (length > limitsArg.maximumArrayLength) {
        throw new PlainDataRefusal(`${pathArg} has more than ${limitsArg.maximumArrayLength} entries`);
      }
      const keys = Object.getOwnPropertyNames(valueArg);
      // An array's own names are its indices plus `length`; anything else is extra data.
      if (keys.length !== length + 1) {
        throw new PlainDataRefusal(`${pathArg} must be a dense array without extra properties`);
      }
      const copy: TRuntimeNetworkPlainData[] = [];
      for (let index = 0; index < length; index++) {
        copy.push(copyPlain(readDataProperty(valueArg, String(index), `${pathArg}[${index}]`),
          `${pathArg}[${index}]`, depthArg + 1, limitsArg, budgetArg, visitingArg));
      }
      return Object.freeze(copy);
    }
    const prototype = Object.getPrototypeOf(valueArg);
    if (prototype !== Object.prototype && prototype !== null) {
      throw new PlainDataRefusal(`${pathArg} must be a plain object`);
    }
    const copy: Record<string, TRuntimeNetworkPlainData> = {};
    for (const key of Object.getOwnPropertyNames(valueArg)) {
      const path = `${pathArg}.${key}`;
      const item = readDataProperty(valueArg, key, path);
      if (item === undefined) {
        throw new PlainDataRefusal(`${path} must not be undefined`);
      }
      // defineProperty, not assignment: a key named `__proto__` must stay a plain key.
      Object.defineProperty(copy, key, {
        value: copyPlain(item, path, depthArg + 1, limitsArg, budgetArg, visitingArg),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return Object.freeze(copy);
  } finally {
    visitingArg.delete(valueArg);
  }
};

const readDataProperty = (recordArg: object, keyArg: string, pathArg: string): unknown => {
  const descriptor = Object.getOwnPropertyDescriptor(recordArg, keyArg);
  if (descriptor === undefined || !Object.hasOwn(descriptor, 'value')) {
    throw new PlainDataRefusal(`${pathArg} must be a data property, not an accessor`);
  }
  return descriptor.value;
};

/** Orders two strings by UTF-16 code units, the order every sorted list of the runtime network uses. */
export const compareCodeUnits = (leftArg: string, rightArg: string): number =>
  (leftArg < rightArg ? -1 : leftArg > rightArg ? 1 : 0);
