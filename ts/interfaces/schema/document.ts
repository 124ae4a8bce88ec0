/**
 * The machine-readable contract: JSON Schema (draft 2020-12) for every method Cloudly serves and
 * every call it makes, generated from this module's types (scripts/contract-schema.ts) into
 * `contract.generated.ts`. Project's own definition.
 */
export interface IContractSchemaDocument {
  $schema: string;
  $id: string;
  /**
   * `<method>.request` and `<method>.answer` for a served method, `call.<method>.request` and
   * `call.<method>.answer` for a call Cloudly makes, and the named types they refer to.
   */
  $defs: Record<string, unknown>;
  /** Methods Cloudly serves, sorted. */
  served: string[];
  /** Calls Cloudly makes (to a relay, a node controller or an admin socket), sorted. */
  called: string[];
}

/** Where the definitions of a method's request and answer are in the document. */
export const requestSchemaRef = (methodArg: string): string => `#/$defs/${methodArg}.request`;
export const answerSchemaRef = (methodArg: string): string => `#/$defs/${methodArg}.answer`;
