import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { TUntypedContract } from '../ts/client/admin.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { IIdentity } from '../ts/interfaces/data/user.js';
import type { TMethodAccess } from '../ts/core/access.js';
import { requireDeclaredAccess } from '../ts/core/operations.js';
import { dispatchInProcess, startTestCloudly, testAdminPassword, testAdminUsername, type ITestCloudly } from './helpers/cloudly.js';

/**
 * Every served method and the access it declares. Stated here on purpose, not read from the
 * server: a method whose access changes, or a new method, must change this table too.
 */
const declaredAccess: Record<string, TMethodAccess> = {
  createOrganization: 'write', getOrganizations: 'read', deleteOrganization: 'write',
  pushImageVersion: 'relay', pullImageVersion: 'relay', getServiceImageVersions: 'read',
  supersedeHistoricalRuntimeLocalStorageClaim: 'write',
  getClusterAcmeChallenge: 'relay', getClusterRouteCertificates: 'relay', getRouteCertificates: 'read',
  getSecretGroups: 'read',
  createSecretGroup: 'write', addSecretVersion: 'write', deleteSecretGroup: 'write',
  addClusterNode: 'write', adminLoginWithUsernameAndPassword: 'public', adminPruneClusterNodeArchive: 'write',
  adoptCorestoreLegacyResources: 'write', backupServiceDatabaseClosure: 'relay', beginSecretRecipientEnrollment: 'relay',
  cancelOperation: 'write', changePassword: 'own-session', completeSecretRecipientEnrollment: 'relay',
  createCluster: 'write', createIsolatedRestore: 'write', createService: 'write', createServiceBackup: 'write',
  createUser: 'write', deleteCluster: 'write', deletePlatformBinding: 'write', deleteService: 'write',
  deleteUser: 'write', designateClusterIngress: 'write', getAuditEvents: 'read', getClusterById: 'read',
  getClusterIngressDesignation: 'read', getClusterIngressRouteTable: 'relay', getClusterNodeCorestores: 'relay',
  getClusterNodeRuntimeNetworkProjection: 'relay', getClusterNodes: 'read', getClusterOverview: 'read',
  getClusterPlatformDesiredState: 'relay', getClusterRelayRegistrations: 'read', getClusterRouteTable: 'relay',
  getClusterRouteTableResolution: 'read', getClusterRuntime: 'read', getClusterTrafficStatistics: 'read',
  getClusters: 'read', getCorestoreControlCredential: 'read', getCorestoreControlCredentialMaterial: 'relay',
  getCorestoreLegacyResources: 'read', getFleetOverview: 'read', getOperation: 'read', getOperations: 'read',
  getPlatformBindings: 'read', getRuntimeLocalStorageClaims: 'read', getRuntimeNetworkAddressPlan: 'read',
  getRuntimeNetworkProjection: 'read', getSecretRecipients: 'read', getServiceBackups: 'read',
  getServiceById: 'read', getServiceRuntimeStatus: 'read', getServices: 'read', getUsers: 'admin-only',
  logout: 'own-session', registerClusterIngress: 'relay', registerClusterRelay: 'relay',
  releaseUncertainRuntimeLocalStorageClaim: 'write', removeClusterNode: 'write', reportClusterNode: 'relay',
  reportClusterNodeRuntimeAssignments: 'relay', reportClusterPlatformObservedState: 'relay',
  reportRuntimeNetworkLeases: 'relay', reportRuntimeNetworkProjectionApplication: 'relay',
  reportRuntimeNodeSession: 'relay', resolveClusterIngressBearer: 'relay', restoreServiceBackup: 'write',
  restoreServiceDatabaseClosure: 'relay', rotateClusterRelayToken: 'write', rotateCorestoreControlCredential: 'write',
  rotateIdentitySigningKey: 'write', setClusterNodeCorestore: 'write',
  setRuntimeNetworkAddressPlan: 'write', setServiceVolumeInitialization: 'write', setUserDisabled: 'write',
  setUserRole: 'write', stepIsolatedRestore: 'write', unwatchChanges: 'read', updatePlatformBindingStatus: 'relay',
  updateService: 'write', upsertPlatformBinding: 'write', watchChanges: 'read',
  setClusterLabels: 'write', planRollout: 'read', createRollout: 'write', getRollouts: 'read', getRollout: 'read',
  pauseRollout: 'write', resumeRollout: 'write', approveRolloutWave: 'write', abortRollout: 'write',
  createBackupSchedule: 'write', updateBackupSchedule: 'write', deleteBackupSchedule: 'write', getBackupSchedules: 'read',
  verifyServiceBackup: 'write', getBackupRetentionPlan: 'read',
  drillServiceBackup: 'write',
};

type TCaller = 'admin' | 'read-only' | 'relay' | 'anonymous';
/** What the guard does with a call: lets it through to the method, or refuses it with this code. */
type TGuardOutcome = 'allowed' | 'forbidden' | 'unauthenticated';

/** The one table the guard must follow: access × caller → outcome. */
const expectedOutcome: Record<TMethodAccess, Record<TCaller, TGuardOutcome>> = {
  'read': { 'admin': 'allowed', 'read-only': 'allowed', 'relay': 'unauthenticated', 'anonymous': 'unauthenticated' },
  'own-session': { 'admin': 'allowed', 'read-only': 'allowed', 'relay': 'unauthenticated', 'anonymous': 'unauthenticated' },
  'write': { 'admin': 'allowed', 'read-only': 'forbidden', 'relay': 'unauthenticated', 'anonymous': 'unauthenticated' },
  'admin-only': { 'admin': 'allowed', 'read-only': 'forbidden', 'relay': 'unauthenticated', 'anonymous': 'unauthenticated' },
  'relay': { 'admin': 'forbidden', 'read-only': 'forbidden', 'relay': 'allowed', 'anonymous': 'forbidden' },
  'public': { 'admin': 'allowed', 'read-only': 'allowed', 'relay': 'allowed', 'anonymous': 'allowed' },
};

let t: ITestCloudly;
const dispatch = () => dispatchInProcess(t.cloudly);
let relay: CloudlyRelayClient;
let readOnly: IIdentity;
let admin: IIdentity;

before(async () => {
  t = await startTestCloudly();
  await t.admin.call('createUser', { username: 'viewer', password: 'viewer-password-0123', role: 'user' });
  // Identities of their own, so nothing this file calls can touch the helper's administrator.
  const login = async (usernameArg: string, passwordArg: string) =>
    (await dispatch()('adminLoginWithUsernameAndPassword', { username: usernameArg, password: passwordArg }) as { identity: IIdentity }).identity;
  readOnly = await login('viewer', 'viewer-password-0123');
  admin = await login(testAdminUsername, testAdminPassword);
  const { relayToken } = await t.createCluster('access');
  relay = await t.connectRelay(relayToken);
});

after(async () => {
  await t.stop();
});

/** Reads what the guard did from a call's outcome: any answer, or a refusal other than the guard's, is `allowed`. */
const guardOutcomeOf = async (callArg: () => Promise<unknown>): Promise<TGuardOutcome> => {
  try {
    await callArg();
    return 'allowed';
  } catch (error) {
    const code = (error as { errorData?: { code?: unknown } }).errorData?.code;
    if (code === 'forbidden' || code === 'unauthenticated') {
      return code;
    }
    if (typeof code === 'string') {
      return 'allowed';
    }
    throw error;
  }
};

// An empty request with `dryRun: true`: it passes the guard or not, and changes nothing when it does.
const callAs = (callerArg: TCaller, methodArg: string): Promise<unknown> => {
  switch (callerArg) {
    case 'admin': return dispatch()(methodArg, { identity: admin, dryRun: true });
    case 'read-only': return dispatch()(methodArg, { identity: readOnly, dryRun: true });
    case 'anonymous': return dispatch()(methodArg, {});
    case 'relay': return relay.fire<TUntypedContract>(methodArg, {});
  }
};

test('every served method declares an access, and the table above names exactly the served methods', () => {
  const served = Object.fromEntries([...t.cloudly.servedMethods.values()].map((entryArg) => [entryArg.method, entryArg.access]));
  assert.deepEqual(served, declaredAccess);
});

test('the caller of every served method follows from its access', () => {
  for (const entry of t.cloudly.servedMethods.values()) {
    const caller = entry.access === 'relay' ? 'relay' : entry.access === 'public' ? 'public' : 'admin';
    assert.equal(entry.caller, caller, entry.method);
  }
});

const callerNames: Record<TCaller, string> = { 'admin': 'an administrator', 'read-only': 'a read-only account', 'relay': 'a relay socket', 'anonymous': 'an anonymous caller' };

for (const callerName of ['admin', 'read-only', 'relay', 'anonymous'] as const) {
  test(`${callerNames[callerName]} reaches exactly the methods its role may call, and is refused every other`, async () => {
    const mismatches: string[] = [];
    for (const [method, access] of Object.entries(declaredAccess)) {
      const outcome = await guardOutcomeOf(() => callAs(callerName, method));
      const expected = expectedOutcome[access][callerName];
      if (outcome !== expected) {
        mismatches.push(`${method} (${access}): ${outcome}, expected ${expected}`);
      }
    }
    assert.deepEqual(mismatches, []);
  });
}

test('a declaration without an access stops the start with a sentence saying what to add', () => {
  assert.throws(
    () => requireDeclaredAccess({ kind: 'admin-query', method: 'getSomethingNew' }),
    /method getSomethingNew declares no valid access \(got undefined\): add access: 'read' \| 'own-session' \| 'write' \| 'admin-only' \| 'relay' \| 'public' to its declaration/,
  );
  assert.throws(() => requireDeclaredAccess({ kind: 'relay-query', method: 'getRelayThing', access: 'read' }), /declares 'relay'/);
  assert.throws(() => requireDeclaredAccess({ kind: 'admin-mutation', method: 'setThing', access: 'relay' }), /administrator's one of/);
  assert.equal(requireDeclaredAccess({ kind: 'admin-mutation', method: 'setThing', access: 'write' }), 'write');
});
