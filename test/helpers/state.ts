import { createHash } from 'node:crypto';
import type { ITestCloudly } from './cloudly.js';

/**
 * A digest of every stored document, collection by collection, outside the relay leases (a
 * heartbeat renews them at any time) and whatever else `excludeArg` names: equal digests mean
 * nothing was written in between.
 */
export const stateDigest = async (tArg: ITestCloudly, excludeArg: RegExp = /lease/i): Promise<string> => {
  const hash = createHash('sha256');
  const names = (await tArg.cloudly.database.mongoDb.listCollections({}, { nameOnly: true }).toArray())
    .map((info) => info.name).filter((name) => !excludeArg.test(name)).sort();
  for (const name of names) {
    const docs = await tArg.cloudly.database.mongoDb.collection(name).find({}).sort({ _id: 1 }).toArray();
    hash.update(name).update(JSON.stringify(docs));
  }
  return hash.digest('hex');
};
