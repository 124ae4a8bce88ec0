import {
  readServiceDataArray,
  readServiceDataField,
  readServiceDataRecord,
  reasonsForUnknownKeys,
  validateDirectoryModeBits,
  validateServiceMountPath,
  validateServiceOwnerId,
  validateServiceRunAsOwner,
} from '../private/servicecontract.js';
import { sha256Hex } from '../private/canonicaljson.js';
import { collectValidatorReasons } from '../private/dataproperties.js';
import type { IServiceRunAs } from './service.js';

/**
 * How a service volume starts, declared by the service beside the mount path it belongs to.
 * It is a fact about the volume's data, so it lives on the volume, never on the runtime spec.
 */

export const serviceVolumeInitializationContract = Object.freeze({
  /** Directory permission bits a stated mode may hold; the setuid bit (0o4000) is refused. */
  directoryModeBits: 0o3777,
} as const);

/** Owner of an empty root stated as numbers. */
export interface IServiceVolumeExplicitOwnership {
  kind: 'explicit';
  uid: number;
  gid: number;
  mode: number;
}

/** Owner of an empty root taken from the runtime spec's `profile.runAs`; the mode is still stated. */
export interface IServiceVolumeRunAsOwnership {
  kind: 'run-as';
  mode: number;
}

export type TServiceVolumeOwnership = IServiceVolumeExplicitOwnership | IServiceVolumeRunAsOwnership;

/** An existing Docker volume on the claim node's host, named exactly as Docker lists it. */
export interface IServiceVolumeDockerVolumeSource {
  kind: 'docker-volume';
  volumeName: string;
}

export type TServiceVolumeInitialization =
  | { kind: 'empty'; ownership: TServiceVolumeOwnership }
  | { kind: 'import'; source: IServiceVolumeDockerVolumeSource };

/**
 * One volume of a service. Project's own definition of everything except `initialization`:
 * `id` is derived by Cloudly from the mount path (the volume's identity), `driver` names the
 * storage kind (`local` is a node-local directory, the only kind a local storage claim can
 * express), and the option members exist so that a service carrying them is refused by name
 * rather than silently stripped.
 */
export interface IServiceVolume {
  id: string;
  mountPath: string;
  readOnly: boolean;
  driver: string;
  driverOptions?: Record<string, string>;
  mountOptions?: string[];
  /** Server-managed: written only by `setServiceVolumeInitialization`. */
  initialization?: TServiceVolumeInitialization;
}

/** A volume as `createService` / `updateService` take it: no server-managed members. */
export type TServiceWritableVolume = Omit<IServiceVolume, 'id' | 'initialization'>;

/**
 * The volume id Cloudly derives from a mount path: the mount path is the volume's identity, so the
 * id stays with it across updates and a local storage claim can name it. Project's own definition.
 */
export const getServiceVolumeId = (mountPathArg: string): string => `vol-${sha256Hex(mountPathArg).slice(0, 32)}`;

/** The driver value that means a node-local directory. Project's own definition. */
export const serviceVolumeLocalDirectoryDriver = 'local';

/** Bounds of a writable volume's driver and option members. Project's own limits. */
export const serviceWritableVolumeLimits = Object.freeze({
  maximumDriverLength: 128,
  maximumDriverOptions: 64,
  maximumDriverOptionNameLength: 256,
  maximumDriverOptionValueLength: 4096,
  maximumMountOptions: 64,
  maximumMountOptionLength: 256,
} as const);

/** Docker's own volume name rule, plus a length bound. Project's own limit. */
export const maximumServiceDockerVolumeNameLength = 255;
const dockerVolumeNamePattern = /^[A-Za-z0-9][A-Za-z0-9_.-]+$/;

export const serviceVolumeInitializationErrorCodes = Object.freeze([
  'volume-not-found',
  'conflict',
  'volume-initialization-invalid',
  'volume-initialization-bound',
] as const);

export type TServiceVolumeInitializationErrorCode = (typeof serviceVolumeInitializationErrorCodes)[number];

/** Error data of every `setServiceVolumeInitialization` refusal. */
export interface IServiceVolumeInitializationErrorData {
  code: TServiceVolumeInitializationErrorCode;
  retryable: false;
  /** Every reason the value was refused; present for `volume-initialization-invalid`. */
  reasons?: string[];
}

const validateOwnership = (valueArg: unknown, pathArg: string): string[] => {
  const record = readServiceDataRecord(valueArg);
  if (record === null) {
    return [`${pathArg} must be a plain object`];
  }
  const kind = readServiceDataField(record, 'kind');
  if (kind === 'explicit') {
    return [
      ...reasonsForUnknownKeys(record, ['kind', 'uid', 'gid', 'mode'], pathArg),
      ...validateServiceOwnerId(readServiceDataField(record, 'uid'), `${pathArg}.uid`),
      ...validateServiceOwnerId(readServiceDataField(record, 'gid'), `${pathArg}.gid`),
      ...validateDirectoryModeBits(
        readServiceDataField(record, 'mode'),
        serviceVolumeInitializationContract.directoryModeBits,
        `${pathArg}.mode`,
      ),
    ];
  }
  if (kind === 'run-as') {
    return [
      ...reasonsForUnknownKeys(record, ['kind', 'mode'], pathArg),
      ...validateDirectoryModeBits(
        readServiceDataField(record, 'mode'),
        serviceVolumeInitializationContract.directoryModeBits,
        `${pathArg}.mode`,
      ),
    ];
  }
  return [`${pathArg}.kind must be 'explicit' or 'run-as'`];
};

const validateDockerVolumeSource = (valueArg: unknown, pathArg: string): string[] => {
  const record = readServiceDataRecord(valueArg);
  if (record === null) {
    return [`${pathArg} must be a plain object`];
  }
  const reasons = reasonsForUnknownKeys(record, ['kind', 'volumeName'], pathArg);
  if (readServiceDataField(record, 'kind') !== 'docker-volume') {
    reasons.push(`${pathArg}.kind must be 'docker-volume'`);
  }
  const volumeName = readServiceDataField(record, 'volumeName');
  if (typeof volumeName !== 'string') {
    reasons.push(`${pathArg}.volumeName must be a string`);
  } else if (volumeName.length > maximumServiceDockerVolumeNameLength) {
    reasons.push(`${pathArg}.volumeName must be at most ${maximumServiceDockerVolumeNameLength} characters`);
  } else if (!dockerVolumeNamePattern.test(volumeName)) {
    reasons.push(`${pathArg}.volumeName must be a Docker volume name ([A-Za-z0-9][A-Za-z0-9_.-]+)`);
  }
  return reasons;
};

/** Every reason a value is not a valid `TServiceVolumeInitialization`; empty when it is. */
export const validateServiceVolumeInitialization = (
  valueArg: unknown,
  pathArg = 'initialization',
): string[] =>
  collectValidatorReasons(pathArg, () => {
    const record = readServiceDataRecord(valueArg);
    if (record === null) {
      return [`${pathArg} must be a plain object`];
    }
    const kind = readServiceDataField(record, 'kind');
    if (kind === 'empty') {
      return [
        ...reasonsForUnknownKeys(record, ['kind', 'ownership'], pathArg),
        ...validateOwnership(readServiceDataField(record, 'ownership'), `${pathArg}.ownership`),
      ];
    }
    if (kind === 'import') {
      return [
        ...reasonsForUnknownKeys(record, ['kind', 'source'], pathArg),
        ...validateDockerVolumeSource(readServiceDataField(record, 'source'), `${pathArg}.source`),
      ];
    }
    return [`${pathArg}.kind must be 'empty' or 'import'`];
  });

/** Detached copy of a valid initialization; throws with every reason otherwise. */
export const snapshotServiceVolumeInitialization = (valueArg: unknown): TServiceVolumeInitialization => {
  const reasons = validateServiceVolumeInitialization(valueArg);
  if (reasons.length > 0) {
    throw new TypeError(`service volume initialization refused: ${reasons.join('; ')}`);
  }
  const value = valueArg as TServiceVolumeInitialization;
  if (value.kind === 'import') {
    return { kind: 'import', source: { kind: 'docker-volume', volumeName: value.source.volumeName } };
  }
  const ownership = value.ownership;
  return ownership.kind === 'explicit'
    ? { kind: 'empty', ownership: { kind: 'explicit', uid: ownership.uid, gid: ownership.gid, mode: ownership.mode } }
    : { kind: 'empty', ownership: { kind: 'run-as', mode: ownership.mode } };
};

/** Owner and mode of an empty claim root. */
export interface IServiceVolumeClaimOwnership {
  uid: number;
  gid: number;
  mode: number;
}

export type TServiceVolumeClaimInitializationRefusal = 'volume-initialization-unknown' | 'volume-ownership-unknown';

/** What the derive rule decided for a claim's first generation. */
export type TServiceVolumeClaimInitializationDerivation =
  | { refused: false; initialization: 'empty'; initialOwnership: IServiceVolumeClaimOwnership }
  | { refused: false; initialization: 'import'; initialOwnership: null }
  | { refused: true; reason: TServiceVolumeClaimInitializationRefusal };

/**
 * The one rule that turns a volume's initialization into a claim's `initialization` and
 * `initialOwnership`. Nothing here is a default: an absent initialization and a `run-as` owner
 * without a numeric `runAs` are refused. It decides a claim's first generation only; later
 * generations carry that claim's own values. Throws for a value the contract refuses, because a
 * stored initialization has always been validated.
 */
export const deriveServiceVolumeClaimInitialization = (
  initializationArg: TServiceVolumeInitialization | undefined,
  runAsArg: IServiceRunAs | null,
): TServiceVolumeClaimInitializationDerivation => {
  if (initializationArg === undefined) {
    return { refused: true, reason: 'volume-initialization-unknown' };
  }
  const initialization = snapshotServiceVolumeInitialization(initializationArg);
  if (initialization.kind === 'import') {
    return { refused: false, initialization: 'import', initialOwnership: null };
  }
  const ownership = initialization.ownership;
  if (ownership.kind === 'explicit') {
    return {
      refused: false,
      initialization: 'empty',
      initialOwnership: { uid: ownership.uid, gid: ownership.gid, mode: ownership.mode },
    };
  }
  if (runAsArg === null) {
    return { refused: true, reason: 'volume-ownership-unknown' };
  }
  const runAsReasons = collectValidatorReasons('runAs', () => validateServiceRunAsOwner(runAsArg, 'runAs'));
  if (runAsReasons.length > 0) {
    throw new TypeError(`runAs refused: ${runAsReasons.join('; ')}`);
  }
  return {
    refused: false,
    initialization: 'empty',
    initialOwnership: { uid: runAsArg.user, gid: runAsArg.group, mode: ownership.mode },
  };
};

/** Every reason a value is not a valid writable volume (`TServiceWritableVolume`). */
export const validateServiceWritableVolume = (valueArg: unknown, pathArg = 'volume'): string[] =>
  collectValidatorReasons(pathArg, () => {
    const record = readServiceDataRecord(valueArg);
    if (record === null) {
      return [`${pathArg} must be a plain object`];
    }
    const reasons: string[] = [];
    if (Object.hasOwn(record, 'initialization')) {
      reasons.push(`${pathArg}.initialization is server-managed: set it with setServiceVolumeInitialization`);
    }
    if (Object.hasOwn(record, 'id')) {
      reasons.push(`${pathArg}.id is server-managed: Cloudly derives it from the mount path`);
    }
    reasons.push(
      ...reasonsForUnknownKeys(
        record,
        ['mountPath', 'readOnly', 'driver', 'driverOptions', 'mountOptions', 'initialization', 'id'],
        pathArg,
      ),
    );
    reasons.push(...validateServiceMountPath(readServiceDataField(record, 'mountPath'), `${pathArg}.mountPath`));
    if (typeof readServiceDataField(record, 'readOnly') !== 'boolean') {
      reasons.push(`${pathArg}.readOnly must be a boolean`);
    }
    const limits = serviceWritableVolumeLimits;
    const driver = readServiceDataField(record, 'driver');
    if (typeof driver !== 'string' || driver.length === 0 || driver.length > limits.maximumDriverLength) {
      reasons.push(`${pathArg}.driver must be a string of 1-${limits.maximumDriverLength} characters`);
    }
    if (Object.hasOwn(record, 'driverOptions')) {
      const options = readServiceDataRecord(readServiceDataField(record, 'driverOptions'));
      const entries = options === null ? null : Object.entries(options);
      if (
        entries === null
        || entries.length > limits.maximumDriverOptions
        || entries.some(([key, item]) => key.length > limits.maximumDriverOptionNameLength
          || typeof item !== 'string' || item.length > limits.maximumDriverOptionValueLength)
      ) {
        reasons.push(`${pathArg}.driverOptions must map at most ${limits.maximumDriverOptions} names to strings`);
      }
    }
    if (Object.hasOwn(record, 'mountOptions')) {
      const options = readServiceDataArray(readServiceDataField(record, 'mountOptions'), limits.maximumMountOptions);
      if (options === null || !options.every((item) => typeof item === 'string' && item.length <= limits.maximumMountOptionLength)) {
        reasons.push(`${pathArg}.mountOptions must be at most ${limits.maximumMountOptions} strings`);
      }
    }
    return reasons;
  });
