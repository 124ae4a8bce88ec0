import { CloudlyRefusal } from '../core/refusal.js';
import type { IOperation, IReq_Admin_GetOperation } from '../interfaces/requests/operation.js';
import type { IIdentity } from '../interfaces/data/user.js';

/** What `followOperation` needs: anything that can call `getOperation` with an identity added. */
export interface IOperationReader {
  call<T extends IReq_Admin_GetOperation>(methodArg: T['method'], requestArg: Omit<T['request'], 'identity'>): Promise<T['response']>;
}

/** A reader for a bare fire function (requests carry the identity themselves). */
export const operationReaderOf = (
  fireArg: (methodArg: string, requestArg: Record<string, unknown>) => Promise<unknown>,
  identityArg: () => IIdentity,
): IOperationReader => ({
  call: async (methodArg, requestArg) => fireArg(methodArg, { ...requestArg, identity: identityArg() }) as never,
});

/**
 * Polls `getOperation` until the operation has ended, calling `onProgressArg` with every answer
 * read (for a progress bar). Answers the ended operation; throws when `timeoutMsArg` passes first.
 */
export const followOperation = async (
  readerArg: IOperationReader,
  operationIdArg: string,
  optionsArg: { timeoutMs?: number; pollMs?: number; onProgress?: (operationArg: IOperation) => void } = {},
): Promise<IOperation> => {
  const deadline = Date.now() + (optionsArg.timeoutMs ?? 60_000);
  for (;;) {
    const { operation } = await readerArg.call<IReq_Admin_GetOperation>('getOperation', { operationId: operationIdArg });
    optionsArg.onProgress?.(operation);
    if (operation.state !== 'running') {
      return operation;
    }
    if (Date.now() > deadline) {
      throw new Error(`operation ${operationIdArg} still running after ${optionsArg.timeoutMs ?? 60_000} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, optionsArg.pollMs ?? 50));
  }
};

/**
 * What the blocking call used to answer: the result of a completed operation, or the refusal a
 * failed or cancelled one recorded, thrown as the same refusal (a CloudlyRefusal) the call would have thrown.
 */
export const outcomeOf = <TResult = NonNullable<IOperation['result']>>(operationArg: IOperation): TResult => {
  if (operationArg.state === 'completed') {
    return operationArg.result as TResult;
  }
  if (operationArg.state === 'running') {
    throw new Error(`operation ${operationArg.operationId} is still running`);
  }
  throw new CloudlyRefusal(`operation ${operationArg.operationId} ${operationArg.state}`, operationArg.error ?? { code: 'internal', retryable: true, reasons: [operationArg.reason ?? operationArg.state] });
};
