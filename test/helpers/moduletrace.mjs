// Loaded with `node --import <this file>` into a child process: appends the path of every module
// the process loads (ES modules through a load hook, CommonJS through Module._load, which also sees
// the `require` calls inside packages) to the file named by CLOUDLY_MODULE_TRACE, one per line.
// Plain JavaScript: the child runs under plain node, without tsx.
import * as fs from 'node:fs';
import Module from 'node:module';

const traceFile = process.env.CLOUDLY_MODULE_TRACE;
if (!traceFile) {
  throw new Error('moduletrace: CLOUDLY_MODULE_TRACE names no file');
}

const record = (pathArg) => {
  fs.appendFileSync(traceFile, `${pathArg}\n`);
};

const loadHook = `
import * as fs from 'node:fs';
import { fileURLToPath } from 'node:url';
export async function load(url, context, next) {
  const loaded = await next(url, context);
  if (url.startsWith('file:')) {
    fs.appendFileSync(${JSON.stringify(traceFile)}, fileURLToPath(url) + '\\n');
  }
  return loaded;
}
`;
Module.register(`data:text/javascript,${encodeURIComponent(loadHook)}`, import.meta.url);

const originalLoad = Module._load;
Module._load = function tracedLoad(requestArg, parentArg, isMainArg) {
  const exported = originalLoad.apply(this, arguments);
  if (!Module.isBuiltin(requestArg)) {
    try {
      record(Module._resolveFilename(requestArg, parentArg, isMainArg));
    } catch {
      // Resolved once already by the load itself; nothing to add when it cannot be again.
    }
  }
  return exported;
};

