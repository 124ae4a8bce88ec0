import type { FastifyInstance } from 'fastify';
import { contractSchema } from '../interfaces/schema/contract.generated.js';
import { answerSchemaRef, requestSchemaRef, type IContractSchemaDocument } from '../interfaces/schema/document.js';
import { commitinfo } from '../interfaces/commitinfo.js';
import type { IServedMethod, TMethodAccess, TMethodCaller } from './access.js';
import type { TErrorCode } from './errors.js';

/** One served method as GET /schema lists it. */
export interface ISchemaMethod {
  caller: TMethodCaller;
  access: TMethodAccess;
  /** Null only for a method the committed schema does not type yet (listed in `untyped`). */
  request: { $ref: string } | null;
  answer: { $ref: string } | null;
  /** The codes the pipeline itself may refuse a call of this method with (its own decisions may add `not-found` and `conflict`). */
  refusals: TErrorCode[];
}

/** The document GET /schema answers: the generated schema plus what only the running server knows. */
export interface IServedSchemaDocument extends IContractSchemaDocument {
  methods: Record<string, ISchemaMethod>;
  /** Calls Cloudly makes on a relay's socket (and the other outbound calls), with their schemas. */
  calls: Record<string, { request: { $ref: string }; answer: { $ref: string } }>;
  refusalCodes: Record<TErrorCode, string>;
  /** Served methods the committed schema has no definitions for (regenerate it); empty when current. */
  untyped: string[];
  /** The contracts module's commitinfo: which upstream `@serve.zone/interfaces` release each area follows. */
  contracts: typeof commitinfo;
}

/** What each of the seven codes means; the same text as docs/foundation.md. */
export const refusalCodeMeanings: Record<TErrorCode, string> = {
  'unauthenticated': 'no identity, or one that is not valid or no longer stands; log in again',
  'forbidden': 'the caller may not call this method (its access), or not on this transport',
  'invalid-request': 'the request does not have the method\'s shape; `reasons` names every member',
  'not-found': 'a named document does not exist',
  'conflict': 'the document is not as the request expected, or the change lost every compare-and-swap round',
  'unavailable': 'try again later (`retryAfterMs` when known): the database, a relay or a limit',
  'internal': 'Cloudly failed; the log holds the `errorId`',
};

/** The codes a call can get before its method decides anything, by the method's access. */
const pipelineRefusals = (accessArg: TMethodAccess): TErrorCode[] => {
  const always: TErrorCode[] = ['invalid-request', 'unavailable', 'internal'];
  switch (accessArg) {
    case 'public': return always;
    case 'relay': return ['forbidden', ...always];
    default: return ['unauthenticated', 'forbidden', ...always];
  }
};

/**
 * The served document. A method the server serves but the committed schema does not type (a
 * contract added without running scripts/contract-schema.ts) is listed with `request` and
 * `answer` null and named in `untyped`, so the server still starts; test/contracts.schema.test.ts
 * and test/foundation.schema.test.ts fail until the schema is regenerated.
 */
export const buildServedSchema = (servedArg: Iterable<IServedMethod>, documentArg: IContractSchemaDocument = contractSchema): IServedSchemaDocument => {
  const typed = new Set(documentArg.served);
  const methods: Record<string, ISchemaMethod> = {};
  const untyped: string[] = [];
  for (const entry of [...servedArg].sort((leftArg, rightArg) => leftArg.method.localeCompare(rightArg.method))) {
    const known = typed.has(entry.method);
    if (!known) {
      untyped.push(entry.method);
    }
    methods[entry.method] = {
      caller: entry.caller,
      access: entry.access,
      request: known ? { $ref: requestSchemaRef(entry.method) } : null,
      answer: known ? { $ref: answerSchemaRef(entry.method) } : null,
      refusals: pipelineRefusals(entry.access),
    };
  }
  const calls = Object.fromEntries(documentArg.called.map((methodArg) =>
    [methodArg, { request: { $ref: requestSchemaRef(`call.${methodArg}`) }, answer: { $ref: answerSchemaRef(`call.${methodArg}`) } }]));
  return { ...documentArg, methods, calls, refusalCodes: refusalCodeMeanings, untyped, contracts: commitinfo };
};

/** GET /schema: public (it is what a relay author in another language starts from) and the same for every caller. */
export const registerSchemaRoute = (appArg: FastifyInstance, documentArg: () => IServedSchemaDocument): void => {
  let body: string | null = null;
  appArg.get('/schema', async (_request, reply) => {
    body ??= JSON.stringify(documentArg());
    return reply.header('cache-control', 'no-store').type('application/schema+json; charset=utf-8').send(body);
  });
};
