/**
 * Which upstream `@serve.zone/interfaces` releases this contracts module mirrors, in the place a
 * published package keeps its `commitinfo`. The package itself cannot be installed here, so the
 * module is the project's own implementation of two release diffs (../shared/spec, one per line of
 * releases): the backup and Corestore part follows the 31.x line up to 31.6.0, everything else the
 * 32.x line up to 32.23.0. A relay or the dashboard that imports the module can read which one it
 * speaks without guessing from shapes.
 */

export interface IContractsMirror {
  /** The upstream package. */
  package: '@serve.zone/interfaces';
  /** The release whose contracts this part implements. */
  version: string;
  /** The release the project's spec diff starts from. */
  from: string;
  /** The areas of the module that follow that release. */
  areas: readonly string[];
}

export const commitinfo = Object.freeze({
  name: '@serve.zone/cloudly contracts module',
  description: "the project's own implementation of the @serve.zone/interfaces contracts it speaks",
  mirrors: Object.freeze([
    Object.freeze({
      package: '@serve.zone/interfaces',
      version: '31.6.0',
      from: '31.4.0',
      areas: Object.freeze(['backup', 'corestore']),
    }),
    Object.freeze({
      package: '@serve.zone/interfaces',
      version: '32.23.0',
      from: '32.21.0',
      areas: Object.freeze(['everything else: clusters, ingress, services, runtime network, runtime sessions, platform bindings']),
    }),
  ] as const satisfies readonly IContractsMirror[]),
} as const);

/** The upstream release a contracts area follows: 31.6.0 for backup and Corestore, 32.23.0 for the rest. */
export const mirroredInterfacesVersion = (areaArg: string): string =>
  (areaArg === 'backup' || areaArg === 'corestore' ? commitinfo.mirrors[0].version : commitinfo.mirrors[1].version);
