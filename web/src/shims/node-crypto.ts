/**
 * Stands in for `node:crypto` in the browser bundle. The contract validators the forms reuse
 * (ts/interfaces) live in modules that also hash (volume ids, canonical JSON); the forms never
 * call those, so hashing here is a programming error, said loudly.
 */
export const createHash = (): never => {
  throw new Error('node:crypto is not available in the dashboard');
};
