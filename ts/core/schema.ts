import type { FastifyInstance } from 'fastify';
import { contractSchema } from '../interfaces/schema/contract.generated.js';
import { answerSchemaRef, requestSchemaRef, type IContractSchemaDocument } from '../interfaces/schema/document.js';
import { commitinfo } from '../interfaces/commitinfo.js';
import type { IServedMethod, TMethodAccess, TMethodCaller } from './access.js';
import type { TErrorCode } from './errors.js';
import { integerSchema, stringSchema, type TCheckSchema } from './validation.js';
import { streamIdPattern } from './streams.js';
import { x25519PublicKeyPattern } from './sealing.js';
import { canonicalIdPattern, sha256HexPattern } from '../interfaces/private/dataproperties.js';
import { serviceEgressHostPattern, serviceNetworkEgressKinds, serviceNetworkPolicyLimits } from '../interfaces/data/servicenetworkpolicy.js';
import {
  clusterIngressBearerPattern,
  clusterIngressRegistrationLimits as ingressLimits,
  clusterIngressVersionPattern,
} from '../interfaces/data/clusteringress.js';

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

type TSchemaObject = Record<string, unknown>;

const isSchemaObject = (valueArg: unknown): valueArg is TSchemaObject =>
  typeof valueArg === 'object' && valueArg !== null && !Array.isArray(valueArg);

/** The local definition a `#/$defs/<name>` reference names, following a chain of plain references. */
const resolveDefinition = (defsArg: Record<string, unknown>, schemaArg: unknown): unknown => {
  let schema = schemaArg;
  for (let hops = 0; isSchemaObject(schema) && typeof schema.$ref === 'string' && Object.keys(schema).length === 1 && hops < 8; hops++) {
    schema = defsArg[decodeURIComponent(schema.$ref.replace(/^#\/\$defs\//, ''))];
  }
  return schema;
};

/**
 * A member's type with what its check admits: the keywords side by side when none of them is
 * already there (a string type gains its lengths and pattern), else (a union, a reference, a
 * keyword both state) both schemas under `allOf`, which admits exactly what both admit.
 */
const narrowMember = (typeArg: unknown, checkArg: TCheckSchema): unknown => {
  if (!isSchemaObject(typeArg)) {
    return checkArg;
  }
  const combined = ['anyOf', 'oneOf', 'allOf', '$ref'].some((keyArg) => keyArg in typeArg || keyArg in checkArg);
  const clashes = Object.keys(checkArg).some((keyArg) =>
    keyArg in typeArg && JSON.stringify(typeArg[keyArg]) !== JSON.stringify(checkArg[keyArg]));
  return combined || clashes ? { allOf: [typeArg, checkArg] } : { ...typeArg, ...checkArg };
};

const canonicalId = stringSchema(1, 128, canonicalIdPattern);
const sha256Hex = stringSchema(64, 64, sha256HexPattern);

/**
 * Rules of nested contract values that their validators test and their types cannot say, by the
 * named definition they apply to, from the same patterns the validators use. Wherever the
 * definition is used (a request or an answer), it carries them.
 */
const definitionRules: Record<string, Record<string, TCheckSchema>> = {
  'ICorestoreDatabaseClosureDescriptor': { sha256: sha256Hex },
  'ICorestoreDatabaseClosureReceipt': { receiptId: canonicalId, receiptSha256: sha256Hex },
  'TVirtualStream<"send">': { streamId: stringSchema(32, 32, streamIdPattern) },
  'TVirtualStream<"receive">': { streamId: stringSchema(32, 32, streamIdPattern) },
  'ISecretRecipient': { publicKey: stringSchema(43, 43, x25519PublicKeyPattern) },
  'IRuntimeNetworkProjectionApplication': { projectionId: canonicalId, nodeId: canonicalId, generation: integerSchema(1), digest: sha256Hex },
  'IServiceEgressDestination': { host: stringSchema(1, serviceNetworkPolicyLimits.maximumHostLength, serviceEgressHostPattern), port: integerSchema(1, 65535) },
  'IClusterNetworkPolicyAuthority': {
    egress: { type: 'array', maxItems: serviceNetworkEgressKinds.length, uniqueItems: true },
    nodeIds: { type: 'array', items: canonicalId, maxItems: serviceNetworkPolicyLimits.maximumAuthorityNodes, uniqueItems: true },
  },
  'IClusterIngressRegistration': {
    bearer: stringSchema(ingressLimits.minimumBearerLength, ingressLimits.maximumBearerLength, clusterIngressBearerPattern),
    version: stringSchema(1, ingressLimits.maximumVersionLength, clusterIngressVersionPattern),
    nodeId: canonicalId,
  },
};

/** A definition's members narrowed by `membersArg`; the definition as it was when it has no such members. */
const narrowedDefinition = (definitionArg: unknown, membersArg: Record<string, TCheckSchema>): unknown => {
  if (!isSchemaObject(definitionArg) || !isSchemaObject(definitionArg.properties) || Object.keys(membersArg).length === 0) {
    return definitionArg;
  }
  const properties: TSchemaObject = { ...definitionArg.properties };
  for (const [member, check] of Object.entries(membersArg)) {
    if (member in properties) {
      properties[member] = narrowMember(properties[member], check);
    }
  }
  return { ...definitionArg, properties };
};

/**
 * The request definitions with what each method's shape checks admit (ranges, lengths, patterns,
 * enumerations) written into its members, so the schema refuses what the server's validators
 * refuse for those members. A request whose type is a named definition gets its own copy, so
 * another definition that names the same type is left as the types say.
 */
const withCheckedMembers = (defsArg: Record<string, unknown>, membersArg: ReadonlyMap<string, Record<string, TCheckSchema>>): Record<string, unknown> => {
  const defs = { ...defsArg };
  for (const [name, members] of Object.entries(definitionRules)) {
    if (name in defs) {
      defs[name] = narrowedDefinition(defs[name], members);
    }
  }
  for (const [method, members] of membersArg) {
    const name = `${method}.request`;
    const request = resolveDefinition(defs, defs[name]);
    const narrowed = narrowedDefinition(request, members);
    if (narrowed !== request) {
      defs[name] = narrowed;
    }
  }
  return defs;
};

/**
 * The served document. A method the server serves but the committed schema does not type (a
 * contract added without running scripts/contract-schema.ts) is listed with `request` and
 * `answer` null and named in `untyped`, so the server still starts; test/contracts.schema.test.ts
 * and test/foundation.schema.test.ts fail until the schema is regenerated.
 */
export const buildServedSchema = (
  servedArg: Iterable<IServedMethod>,
  requestMembersArg: ReadonlyMap<string, Record<string, TCheckSchema>> = new Map(),
  documentArg: IContractSchemaDocument = contractSchema,
): IServedSchemaDocument => {
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
  const $defs = withCheckedMembers(documentArg.$defs, requestMembersArg);
  return { ...documentArg, $defs, methods, calls, refusalCodes: refusalCodeMeanings, untyped, contracts: commitinfo };
};

/** GET /schema: public (it is what a relay author in another language starts from) and the same for every caller. */
export const registerSchemaRoute = (appArg: FastifyInstance, documentArg: () => IServedSchemaDocument): void => {
  let body: string | null = null;
  appArg.get('/schema', async (_request, reply) => {
    body ??= JSON.stringify(documentArg());
    return reply.header('cache-control', 'no-store').type('application/schema+json; charset=utf-8').send(body);
  });
};
