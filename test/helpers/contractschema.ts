import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import type { IContractSchemaDocument } from '../../ts/interfaces/schema/document.js';

/**
 * Ajv (draft 2020-12) over a contract schema document: `validatorOf('getClusters.request')`
 * checks a value against one definition. The document's own listing members (`served`, `called`,
 * and what GET /schema adds) are not schema keywords, so they are left out of what Ajv reads.
 */
export const contractValidators = (documentArg: IContractSchemaDocument) => {
  const ajv = new Ajv2020({ allErrors: true, strict: true });
  ajv.addSchema({ $schema: documentArg.$schema, $id: documentArg.$id, $defs: documentArg.$defs });
  return (definitionArg: string): ValidateFunction => {
    const validate = ajv.getSchema(`${documentArg.$id}#/$defs/${definitionArg}`);
    if (!validate) {
      throw new Error(`the schema has no definition ${definitionArg}`);
    }
    return validate;
  };
};
