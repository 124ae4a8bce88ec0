/**
 * Which upstream `@serve.zone/interfaces` releases this contracts module mirrors, in the place a
 * published package keeps its `commitinfo`. The package itself cannot be installed here, so the
 * module is the project's own implementation of two release diffs (../shared/spec): one of the
 * 31.x line (31.4.0 → 31.6.0) and one of the 32.x line (32.21.0 → 32.23.0, whose own commitinfo
 * moves to 32.23.0). Each diff describes its own areas; an area neither describes is the project's
 * own definition and tracks no upstream release. A relay or the dashboard that imports the module
 * (or reads `contracts` in GET /schema) can tell which release each area speaks without guessing
 * from shapes.
 */

/** An area of the contract and the upstream files its diff changes. */
export interface IContractsMirrorArea {
  /** The project's name for the area (the key `mirroredInterfacesVersion` takes). */
  area: string;
  /** The upstream package files the diff changes for this area (paths inside the package). */
  upstream: readonly string[];
}

export interface IContractsMirror {
  /** The upstream package. */
  package: '@serve.zone/interfaces';
  /** The release whose contracts these areas implement. */
  version: string;
  /** The release the project's spec diff starts from. */
  from: string;
  /** The areas of the module that follow that release. */
  areas: readonly IContractsMirrorArea[];
}

const mirrorArea = (areaArg: string, upstreamArg: readonly string[]): IContractsMirrorArea =>
  Object.freeze({ area: areaArg, upstream: Object.freeze([...upstreamArg]) });

const mirrors = Object.freeze([
  Object.freeze({
    package: '@serve.zone/interfaces',
    version: '31.6.0',
    from: '31.4.0',
    areas: Object.freeze([
      mirrorArea('cluster-node-corestore', ['ts/data/clusternode.ts']),
      mirrorArea('corestore-allocation', ['ts/data/corestore.ts', 'ts/data/index.ts']),
      mirrorArea('isolated-restore', ['ts/data/isolatedrestore.ts']),
      mirrorArea('backup', ['ts/requests/backup.ts']),
      mirrorArea('cluster-relay-registrations', ['ts/requests/cluster.ts']),
    ]),
  }),
  Object.freeze({
    package: '@serve.zone/interfaces',
    version: '32.23.0',
    from: '32.21.0',
    areas: Object.freeze([
      mirrorArea('runtime-network', ['readme.md']),
      mirrorArea('service-runtime-status', ['readme.md']),
      mirrorArea('service-volume-initialization', ['readme.md']),
      mirrorArea('runtime-local-storage-claims', ['readme.md']),
      mirrorArea('cluster-ingress', ['readme.md', 'ts/data/clusteringress.ts', 'ts/data/clusteringressdesignation.ts']),
      mirrorArea('corestore-legacy-adoption', ['readme.md']),
    ]),
  }),
] as const satisfies readonly IContractsMirror[]);

/**
 * The module's commitinfo: the upstream package it implements, the newest release it tracks (the
 * 32.x diff's own commitinfo version) and, in `mirrors`, which release each area follows.
 */
export const commitinfo = Object.freeze({
  name: '@serve.zone/interfaces',
  version: '32.23.0',
  description: "Cloudly's own implementation of the @serve.zone/interfaces contracts it speaks (the package is not installed)",
  mirrors,
} as const);

/**
 * The upstream release an area follows (`31.6.0`, `32.23.0`), or `null` for an area neither
 * spec diff describes (the project's own definition).
 */
export const mirroredInterfacesVersion = (areaArg: string): string | null =>
  commitinfo.mirrors.find((mirror) => mirror.areas.some((entry) => entry.area === areaArg))?.version ?? null;
