import { html, nothing, type TemplateResult } from 'lit';
import type { IService, IServiceRunAs } from '../../../ts/interfaces/data/service.js';
import { judgeServiceVolumeInitializationUse } from '../../../ts/interfaces/data/servicevolumeuse.js';
import type { IServiceVolume, TServiceVolumeInitialization } from '../../../ts/interfaces/data/servicevolume.js';
import type { IServiceRuntimeStatus } from '../../../ts/interfaces/data/serviceruntimestatus.js';
import type { IServiceObservedPlacement } from '../../../ts/interfaces/data/desiredstate.js';
import type { IServiceRuntimeAssignmentView } from '../../../ts/interfaces/data/serviceruntimeassignmentview.js';
import { platformBindingCapabilities, validatePlatformBindingUpsert, type IPlatformBinding, type IPlatformBindingUpsert, type TPlatformBindingCapability } from '../../../ts/interfaces/data/platformbinding.js';
import { describeDryRun, formReasonsView, refusalWarningView, type IServiceFormSubmission } from '../forms.js';
import { choiceOf, isolatedRestoreRequestOfDraft } from '../drafts.js';
import type { IRuntimeLocalStorageClaimRecord } from '../../../ts/interfaces/data/runtimelocalstorageclaim.js';
import type { IClusterNode } from '../../../ts/interfaces/data/clusternode.js';
import type { IServiceBackupRecord } from '../../../ts/interfaces/requests/backup.js';
import type { IBackupSchedule } from '../../../ts/interfaces/data/backupschedule.js';
import { describeLastRun, lastRunBackupStates, scheduleStateOf, verificationBadgeOf } from '../backups.js';
import type { IOperation } from '../../../ts/interfaces/requests/operation.js';
import type { IChangeEvent } from '../../../ts/interfaces/requests/watch.js';
import { api, ApiError } from '../api.js';
import { explainRuntimeStatus, explainUnknown, formatBytes, formatTime } from '../format.js';
import { LivePage } from '../live.js';
import { CloudlyActionDialog, coalesce, refusalView, markFirstRender, mayChange, changeTitle, changeDescribedBy } from '../widgets.js';
import { decideBackupNodeChoices, describeAssignment, describeRunAs, serviceFormOfSpec, sortBackupsByTime, withUneditedMembersOf, writableSpecOf, type IServiceFormFields } from '../decide.js';
import type { IServiceWritableSpec } from '../../../ts/interfaces/data/service.js';

const listLimit = 20;

export const describeInitialization = (initArg: TServiceVolumeInitialization | undefined): string => {
  if (!initArg) {
    return 'not set (the service is refused until it is)';
  }
  if (initArg.kind === 'import') {
    return `import Docker volume “${initArg.source.volumeName}”`;
  }
  const owner = initArg.ownership.kind === 'explicit'
    ? `owner ${initArg.ownership.uid}:${initArg.ownership.gid}`
    : 'owner from the run-as profile';
  return `empty, ${owner}, mode ${initArg.ownership.mode.toString(8).padStart(4, '0')}`;
};

/** The fraction of an operation done, for its progress bar; null while nothing can be said. */
export const operationFraction = (operationArg: IOperation): number | null => {
  const progress = operationArg.progress;
  if (operationArg.state === 'completed' || progress.phase === 'done') {
    return 1;
  }
  if (progress.phase === 'transfer' && progress.bytesTotal) {
    return 0.1 + 0.8 * Math.min(1, progress.bytesDone / progress.bytesTotal);
  }
  // A rollout: the share of its services no longer pending or changing.
  if (operationArg.rollout && operationArg.rollout.targetsTotal > 0) {
    const open = (operationArg.rollout.targets.pending ?? 0) + (operationArg.rollout.targets.updating ?? 0);
    return 1 - open / operationArg.rollout.targetsTotal;
  }
  return { queued: 0.02, relay: 0.1, transfer: 0.1, recording: 0.95, waves: null, done: 1 }[progress.phase] ?? null;
};

const operationLabel = (operationArg: IOperation): string => {
  const progress = operationArg.progress;
  const bytes = progress.bytesTotal ? ` ${formatBytes(progress.bytesDone)} of ${formatBytes(progress.bytesTotal)}` : '';
  const kind = { 'service-backup': 'Backup', 'service-restore': 'Restore', 'isolated-restore': 'Isolated restore', 'backup-drill': 'Drill', rollout: 'Rollout' }[operationArg.kind] ?? operationArg.kind;
  return `${kind} ${operationArg.state}: ${progress.phase}${bytes}`;
};

/** How often a running operation's progress bar reads its progress (see followOperation). */
const progressReadMs = 500;
/** How often the service page reads the progress of its running backups. */
const runningProgressReadMs = 1000;

const isOperationChange = (changeArg: IChangeEvent): boolean => /operation/i.test(changeArg.kind);

/** Follows an operation through the watch (no polling) until it ends; throws its refusal when it failed. */
export const followOperation = (operationArg: IOperation, onProgressArg: (operationArg: IOperation) => void): Promise<IOperation> =>
  new Promise<IOperation>((resolve, reject) => {
    let settled = false;
    const check = async () => {
      if (settled) {
        return;
      }
      try {
        const { operation } = await api.call('getOperation', { operationId: operationArg.operationId });
        settle(operation);
      } catch (error) {
        finish();
        reject(error);
      }
    };
    const settle = (operation: IOperation) => {
      if (settled) {
        return;
      }
      onProgressArg(operation);
      if (operation.state === 'completed') {
        finish();
        resolve(operation);
      } else if (operation.state === 'failed' || operation.state === 'cancelled') {
        finish();
        const error = operation.error;
        reject(new ApiError(operation.method, error?.code ?? operation.state, `The operation ${operation.state}.`, error?.reasons ?? (operation.reason ? [operation.reason] : []), error ?? null));
      }
    };
    const onChange = (eventArg: Event) => {
      const change = (eventArg as CustomEvent<IChangeEvent>).detail;
      if (isOperationChange(change) && change.id === operationArg.operationId) {
        const document = change.document as IOperation | undefined;
        if (document && document.operationId === operationArg.operationId) {
          settle(document);
        } else {
          void check();
        }
      }
    };
    const onResync = () => void check();
    // The operation's state changes arrive through the watch; its byte progress is written to a
    // document kind the watch does not carry (not audited), so while this one operation runs and
    // its dialog is open, its progress is read every half second. Nothing else on a page polls.
    const progressTimer = window.setInterval(() => void check(), progressReadMs);
    const finish = () => {
      settled = true;
      window.clearInterval(progressTimer);
      api.removeEventListener('change', onChange);
      api.removeEventListener('resync', onResync);
    };
    api.addEventListener('change', onChange);
    api.addEventListener('resync', onResync);
    settle(operationArg);
    // The operation may have moved between the answer and the listener: read it once now.
    void check();
  });

/**
 * One service: its spec, volumes with their initialization and local storage claims, the runtime
 * status in words, backups (and running backup operations with their progress).
 */
export class CloudlyServicePage extends LivePage {
  static properties = {
    serviceId: { type: String, attribute: 'service-id' },
    service: { state: true },
    status: { state: true },
    statusError: { state: true },
    claims: { state: true },
    claimsNext: { state: true },
    backups: { state: true },
    backupsNext: { state: true },
    operations: { state: true },
    nodes: { state: true },
    error: { state: true },
    editing: { state: true },
    clusterName: { state: true },
    editingSpec: { state: true },
    bindings: { state: true },
    bindingForm: { state: true },
    isolated: { state: true },
    initializationChoice: { state: true },
    schedules: { state: true },
  };

  declare serviceId: string;
  declare service: IService | null;
  declare status: {
    status: IServiceRuntimeStatus;
    observed: { placements: IServiceObservedPlacement[]; lastReportedAt: number | null };
    unknown?: { reason: string; since: number } | null;
    assignments?: IServiceRuntimeAssignmentView[];
  } | null;
  /** The cluster's name for the breadcrumb; null until read (the id is shown meanwhile). */
  declare clusterName: string | null;
  /**
   * The open spec form: the service as it was read when "Edit service…" was pressed and the
   * fields made from it, kept while the page refreshes underneath (a live update must not put the
   * stored values back over what the operator typed); the change is a compare-and-swap on that
   * read's generation, so a change by someone else meanwhile is refused, never overwritten.
   */
  declare editingSpec: { base: IService; fields: IServiceFormFields } | null;
  /** The service's platform bindings; null when Cloudly refused or does not serve the read. */
  declare bindings: IPlatformBinding[] | null;
  /** The binding form's fields (a new binding, or the one being changed); null while closed. */
  declare bindingForm: { capability: TPlatformBindingCapability; enabled: boolean; nodeId: string; expectedGeneration: number | null } | null;
  /** The isolated restore form of one backup; null while closed. `mappings` is the JSON typed. */
  declare isolated: { backupId: string; targetNodeName: string; mappings: string } | null;
  declare statusError: unknown;
  declare claims: IRuntimeLocalStorageClaimRecord[];
  declare claimsNext: string | undefined;
  declare backups: IServiceBackupRecord[];
  declare backupsNext: string | undefined;
  declare operations: IOperation[] | null;
  declare nodes: IClusterNode[];
  declare error: unknown;
  declare editing: string | null;
  /** What the open initialization form says so far (kind and owner), judged as it changes. */
  declare initializationChoice: { serviceId: string; mountPath: string; kind: string; owner: string } | null;
  /** The backup schedules that name this service; null when Cloudly refused or does not serve the read. */
  declare schedules: IBackupSchedule[] | null;
  private claimsCursor: string | undefined;
  private backupsCursor: string | undefined;
  private readonly reloadSoon = coalesce(() => void this.load());
  private readonly reloadOperationsSoon = coalesce(() => void this.loadOperations());
  private readonly reloadSchedulesSoon = coalesce(() => void this.loadSchedules());
  private progressTimer: number | null = null;

  constructor() {
    super();
    this.service = null;
    this.status = null;
    this.claims = [];
    this.backups = [];
    this.operations = null;
    this.nodes = [];
    this.editing = null;
    this.clusterName = null;
    this.editingSpec = null;
    this.bindings = null;
    this.bindingForm = null;
    this.isolated = null;
    this.schedules = null;
  }

  protected willUpdate(changedArg: Map<string, unknown>): void {
    if (changedArg.has('serviceId') && this.serviceId) {
      this.service = null;
      this.claimsCursor = undefined;
      this.backupsCursor = undefined;
      void this.load();
    }
  }

  private async load(): Promise<void> {
    try {
      const { service } = await api.call('getServiceById', { serviceId: this.serviceId });
      this.service = service;
      this.error = undefined;
    } catch (error) {
      this.error = error;
      return;
    }
    await Promise.all([this.loadStatus(), this.loadClaims(), this.loadBackups(), this.loadOperations(), this.loadNodes(), this.loadClusterName(), this.loadBindings(), this.loadSchedules()]);
  }

  private async loadSchedules(): Promise<void> {
    const answer = await api.call('getBackupSchedules', { serviceId: this.serviceId, limit: 50 }).catch(() => null);
    this.schedules = answer?.schedules ?? null;
  }

  private async loadBindings(): Promise<void> {
    const answer = await api.call('getPlatformBindings', { serviceId: this.serviceId, limit: 100 }).catch(() => null);
    this.bindings = answer?.platformBindings ?? null;
  }

  private async loadClusterName(): Promise<void> {
    const clusterId = this.service?.clusterId;
    if (!clusterId) {
      return;
    }
    const answer = await api.call('getClusterById', { clusterId }).catch(() => null);
    this.clusterName = answer?.cluster.name ?? null;
  }

  private async loadStatus(): Promise<void> {
    try {
      this.status = await api.call('getServiceRuntimeStatus', { serviceId: this.serviceId });
      this.statusError = undefined;
    } catch (error) {
      this.statusError = error;
    }
  }

  private async loadClaims(): Promise<void> {
    try {
      const answer = await api.call('getRuntimeLocalStorageClaims',
        { serviceId: this.serviceId, limit: listLimit, ...(this.claimsCursor ? { cursor: this.claimsCursor } : {}) });
      this.claims = answer.claims;
      this.claimsNext = answer.nextCursor;
    } catch {
      this.claims = [];
    }
  }

  private async loadBackups(): Promise<void> {
    const answer = await api.call('getServiceBackups',
      { serviceId: this.serviceId, limit: listLimit, ...(this.backupsCursor ? { cursor: this.backupsCursor } : {}) }).catch(() => null);
    if (answer) {
      this.backups = answer.backups;
      this.backupsNext = answer.nextCursor;
    }
  }

  private async loadOperations(): Promise<void> {
    try {
      const answer = await api.call('getOperations', { serviceId: this.serviceId, state: 'running', limit: listLimit });
      const ended = (this.operations?.length ?? 0) > answer.operations.length;
      this.operations = answer.operations;
      if (ended) {
        void this.loadBackups();
      }
    } catch {
      // Cloudly without operations: backups answer when done.
      this.operations = null;
    }
    this.followRunning();
  }

  /**
   * While backups of this service run, their byte progress is read every second (see
   * followOperation: progress is not carried by the watch); the reads stop when none runs or the
   * page is left.
   */
  private followRunning(): void {
    const running = (this.operations?.length ?? 0) > 0 && this.isConnected;
    if (running && this.progressTimer === null) {
      this.progressTimer = window.setInterval(() => void this.loadOperations(), runningProgressReadMs);
    } else if (!running && this.progressTimer !== null) {
      window.clearInterval(this.progressTimer);
      this.progressTimer = null;
    }
  }

  disconnectedCallback(): void {
    if (this.progressTimer !== null) {
      window.clearInterval(this.progressTimer);
      this.progressTimer = null;
    }
    super.disconnectedCallback();
  }

  private async loadNodes(): Promise<void> {
    if (!this.service) {
      return;
    }
    const answer = await api.call('getClusterNodes', { clusterId: this.service.clusterId, limit: 100 }).catch(() => null);
    this.nodes = answer?.nodes ?? [];
  }

  protected onChange(changeArg: IChangeEvent): void {
    if (changeArg.kind === 'CloudlyBackupSchedule' || changeArg.kind === 'CloudlyBackupScheduleState') {
      // The state document carries no public document: any schedule's change reads this page's again.
      this.reloadSchedulesSoon();
      return;
    }
    if (isOperationChange(changeArg)) {
      const document = changeArg.document as { serviceId?: string } | undefined;
      if (!document || document.serviceId === this.serviceId) {
        this.reloadOperationsSoon();
        if (changeArg.change !== 'created') {
          void this.loadBackups();
        }
      }
      return;
    }
    if (changeArg.id === this.serviceId) {
      this.reloadSoon();
      return;
    }
    const document = changeArg.document as { serviceId?: string } | undefined;
    if (document?.serviceId === this.serviceId) {
      this.reloadSoon();
    }
  }

  protected onResync(): Promise<void> {
    return this.load();
  }

  // ---- actions ----

  private setInitialization(volumeArg: IServiceVolume, formArg: HTMLFormElement): void {
    const data = new FormData(formArg);
    const kind = String(data.get('kind'));
    let initialization: TServiceVolumeInitialization | null = null;
    if (kind === 'empty') {
      const mode = Number.parseInt(String(data.get('mode') ?? ''), 8);
      initialization = String(data.get('owner')) === 'explicit'
        ? { kind: 'empty', ownership: { kind: 'explicit', uid: Number(data.get('uid')), gid: Number(data.get('gid')), mode } }
        : { kind: 'empty', ownership: { kind: 'run-as', mode } };
    } else if (kind === 'import') {
      initialization = { kind: 'import', source: { kind: 'docker-volume', volumeName: String(data.get('volumeName') ?? '') } };
    }
    const request = {
      serviceId: this.serviceId,
      mountPath: volumeArg.mountPath,
      expected: volumeArg.initialization ?? null,
      initialization,
    };
    CloudlyActionDialog.open({
      title: `Set the initialization of ${volumeArg.mountPath}`,
      intro: html`<p>From <strong>${describeInitialization(volumeArg.initialization)}</strong> to
        <strong>${initialization ? describeInitialization(initialization) : 'none (cleared)'}</strong>.</p>`,
      dryRun: () => api.call('setServiceVolumeInitialization', { ...request, dryRun: true }),
      describe: (answerArg) => {
        const volume = answerArg.service?.volumes.find((candidate) => candidate.mountPath === volumeArg.mountPath);
        return html`<p>The volume would read: <strong>${describeInitialization(volume?.initialization)}</strong> (service generation ${answerArg.service?.generation}).</p>`;
      },
      change: () => ({ before: { initialization: volumeArg.initialization }, after: { initialization: initialization ?? undefined } }),
      run: () => api.call('setServiceVolumeInitialization', request),
      confirmLabel: 'Set initialization',
      onDone: () => {
        this.editing = null;
        void this.load();
      },
    });
  }

  /** Replaces the spec, compare-and-swap on the generation read (a change meanwhile is refused `conflict`). */
  private updateService(formSpecArg: IServiceWritableSpec): void {
    const service = this.editingSpec!.base;
    // The form does not edit the environment, secrets, readiness target or network policy: they go back as read.
    const specArg = withUneditedMembersOf(service, formSpecArg);
    const request = { serviceId: service.id, expectedGeneration: service.generation, service: specArg };
    CloudlyActionDialog.open({
      title: `Change ${service.name}`,
      intro: html`<p>Replaces the spec read at generation ${service.generation}; a change by someone else since then is refused.</p>`,
      dryRun: () => api.call('updateService', { ...request, dryRun: true }),
      describe: (answerArg) => html`<p>The service would move to spec revision <strong>${answerArg.service?.specRevision ?? '—'}</strong>
        (now ${service.specRevision}${answerArg.service?.specRevision === service.specRevision ? ': the runtime is unchanged' : ''}).</p>
        ${refusalWarningView(answerArg.service)}`,
      change: () => ({ before: writableSpecOf(service), after: specArg }),
      run: () => api.call('updateService', request),
      result: (answerArg) => html`<p>Stored at generation ${answerArg.service?.generation}, spec revision ${answerArg.service?.specRevision}.</p>`,
      confirmLabel: 'Save changes',
      onDone: () => {
        this.editingSpec = null;
        void this.load();
      },
    });
  }

  private deleteService(): void {
    const service = this.service!;
    const request = { serviceId: service.id, expectedGeneration: service.generation };
    CloudlyActionDialog.open({
      title: `Delete ${service.name}`,
      intro: html`<p>The service leaves the cluster's desired state; it is removed once its relay reports it stopped
        (at once when no node runs it). Its backups stay.</p>`,
      dryRun: () => api.call('deleteService', { ...request, dryRun: true }),
      describe: (answerArg) => html`<p>${answerArg.deleted ? 'Cloudly would remove it at once.' : 'Cloudly would mark it for removal and wait for its nodes to stop it.'}</p>`,
      run: () => api.call('deleteService', request),
      result: (answerArg) => html`<p>${answerArg.deleted ? 'Deleted.' : 'Marked for removal: it goes when its nodes report it stopped.'}</p>`,
      confirmLabel: 'Delete service',
      onDone: (answerArg) => {
        if (answerArg.deleted) {
          location.hash = `#/cluster/${encodeURIComponent(service.clusterId)}`;
        } else {
          void this.load();
        }
      },
    });
  }

  /**
   * Reads a backup's stored closure back and hashes it against its receipt. The dry run reads
   * and hashes too (it records nothing), so the dialog shows the outcome before anything is kept.
   */
  private verifyBackup(backupArg: IServiceBackupRecord): void {
    const request = { backupId: backupArg.backupId };
    const outcome = (answerArg: { backup: IServiceBackupRecord }) => {
      const badge = verificationBadgeOf(answerArg.backup, formatTime);
      return html`<p>Verification: <span class=${`badge ${badge.className}`} data-verify-outcome=${badge.outcome}>${badge.outcome}</span> — ${badge.detail}.</p>`;
    };
    CloudlyActionDialog.open({
      title: `Verify backup ${backupArg.backupId}`,
      intro: html`<p>Cloudly reads the backup's stored closure back from its blob store and hashes it against the receipt recorded when the bytes arrived.</p>`,
      dryRun: () => api.call('verifyServiceBackup', { ...request, dryRun: true }),
      describe: (answerArg) => html`${outcome(answerArg)}<p class="hint">Confirm records this outcome on the backup (read again).</p>`,
      run: () => api.call('verifyServiceBackup', request),
      result: outcome,
      confirmLabel: 'Verify and record',
      onDone: () => void this.loadBackups(),
    });
  }

  /** Restores a backup onto the node it was taken on; the operation's progress is followed. */
  private restoreBackup(backupArg: IServiceBackupRecord): void {
    const request = { backupId: backupArg.backupId, nodeId: backupArg.nodeId, mutationId: crypto.randomUUID() };
    CloudlyActionDialog.open({
      title: `Restore backup ${backupArg.backupId}`,
      intro: html`<p>The relay writes the backup's ${backupArg.snapshots.length} snapshot(s) back into <strong>${this.service?.name}</strong> on node
        <strong>${backupArg.nodeId}</strong>, over what is there now.</p>`,
      dryRun: () => api.call('restoreServiceBackup', { ...request, dryRun: true }),
      describe: (answerArg) => describeDryRun(answerArg),
      run: async (progressArg) => {
        progressArg(null, 'Starting the restore…');
        const answer = await api.call('restoreServiceBackup', request);
        return answer.operation
          ? { ...answer, operation: await followOperation(answer.operation, (operationArg) => progressArg(operationFraction(operationArg), operationLabel(operationArg))) }
          : answer;
      },
      result: (answerArg) => html`<p>Restore ${answerArg.operation?.state ?? 'done'}${answerArg.operation?.result?.restored ? `: ${answerArg.operation.result.restored.length} snapshot(s) restored` : ''}.</p>`,
      confirmLabel: 'Restore',
      // A restore overwrites the service's data on the node: never one click away.
      typeToConfirm: { name: this.service?.name ?? backupArg.serviceId, what: `the data of ${this.service?.name ?? backupArg.serviceId} on node ${backupArg.nodeId}` },
      onDone: () => void this.loadOperations(),
    });
  }

  private startIsolatedRestore(): void {
    const draft = isolatedRestoreRequestOfDraft(this.isolated!);
    if (!draft.ok) {
      return;
    }
    const request = { ...draft.request, mutationId: crypto.randomUUID() };
    CloudlyActionDialog.open({
      title: `Isolated restore of ${request.backupId}`,
      intro: html`<p>The backup is restored into a scratch namespace on node <strong>${request.targetNodeName}</strong>; the running service is not touched.</p>`,
      dryRun: () => api.call('createIsolatedRestore', { ...request, dryRun: true }),
      describe: (answerArg) => describeDryRun(answerArg),
      run: async (progressArg) => {
        progressArg(null, 'Starting the isolated restore…');
        const answer = await api.call('createIsolatedRestore', request);
        return answer.operation
          ? { restoreId: answer.restoreId, operation: await followOperation(answer.operation, (operationArg) => progressArg(operationFraction(operationArg), operationLabel(operationArg))) }
          : answer;
      },
      result: (answerArg) => html`<p>Isolated restore <code>${answerArg.restoreId}</code> ${answerArg.operation?.state ?? 'started'}.</p>`,
      confirmLabel: 'Start isolated restore',
      onDone: () => { this.isolated = null; },
    });
  }

  private isolatedRestoreView(): TemplateResult {
    const form = this.isolated!;
    const draft = isolatedRestoreRequestOfDraft(form);
    const reasons = draft.ok ? [] : draft.reasons;
    return html`<form class="inline-form isolated-form" aria-label="Isolated restore" @submit=${(event: Event) => { event.preventDefault(); if (reasons.length === 0) { this.startIsolatedRestore(); } }}>
      <h3>Isolated restore of <code>${form.backupId}</code></h3>
      <label for="isolated-node">Target node</label>
      <input id="isolated-node" .value=${form.targetNodeName} @input=${(event: Event) => { this.isolated = { ...form, targetNodeName: (event.target as HTMLInputElement).value }; }}>
      <label for="isolated-mappings">Resource mappings (JSON)</label>
      <textarea id="isolated-mappings" rows="4" .value=${form.mappings} @input=${(event: Event) => { this.isolated = { ...form, mappings: (event.target as HTMLTextAreaElement).value }; }}></textarea>
      <button type="submit" class="primary" data-action="review-isolated-restore" ?disabled=${reasons.length > 0}>Review…</button>
      <button type="button" @click=${() => { this.isolated = null; }}>Cancel</button>
      ${formReasonsView(reasons)}
    </form>`;
  }

  // ---- platform bindings ----

  private bindingUpsert(): IPlatformBindingUpsert {
    const form = this.bindingForm!;
    return { serviceId: this.serviceId, capability: form.capability, enabled: form.enabled, nodeId: form.nodeId === '' ? null : form.nodeId };
  }

  private saveBinding(): void {
    const platformBinding = this.bindingUpsert();
    const request = { platformBinding, expectedGeneration: this.bindingForm!.expectedGeneration };
    CloudlyActionDialog.open({
      title: `${request.expectedGeneration === null ? 'Create' : 'Change'} the ${platformBinding.capability} binding`,
      intro: html`<p>${platformBinding.enabled ? 'Enabled' : 'Disabled'}, on ${platformBinding.nodeId ? html`node <strong>${platformBinding.nodeId}</strong>` : 'no node yet'}.</p>`,
      dryRun: () => api.call('upsertPlatformBinding', { ...request, dryRun: true }),
      describe: (answerArg) => html`<p>Cloudly would store binding <code>${answerArg.platformBinding?.id ?? '—'}</code> (generation ${answerArg.platformBinding?.generation ?? '—'}).</p>`,
      change: () => {
        const stored = request.expectedGeneration === null ? undefined
          : this.bindings?.find((binding) => binding.capability === platformBinding.capability && binding.generation === request.expectedGeneration);
        return { before: stored ? { serviceId: stored.serviceId, capability: stored.capability, enabled: stored.enabled, nodeId: stored.nodeId ?? null } : undefined, after: platformBinding };
      },
      run: () => api.call('upsertPlatformBinding', request),
      result: (answerArg) => html`<p>Binding <code>${answerArg.platformBinding?.id}</code> stored.</p>`,
      confirmLabel: 'Save binding',
      onDone: () => {
        this.bindingForm = null;
        void this.loadBindings();
      },
    });
  }

  private deleteBinding(bindingArg: IPlatformBinding): void {
    const request = { platformBindingId: bindingArg.id, expectedGeneration: bindingArg.generation };
    CloudlyActionDialog.open({
      title: `Delete the ${bindingArg.capability} binding`,
      intro: html`<p>The binding leaves the cluster's desired state; the data on the node is not removed.</p>`,
      dryRun: () => api.call('deletePlatformBinding', { ...request, dryRun: true }),
      describe: (answerArg) => describeDryRun(answerArg),
      run: () => api.call('deletePlatformBinding', request),
      confirmLabel: 'Delete binding',
      onDone: () => void this.loadBindings(),
    });
  }

  private bindingsView(serviceArg: IService): TemplateResult {
    const form = this.bindingForm;
    const reasons = form ? validatePlatformBindingUpsert(this.bindingUpsert(), 'platformBinding') : [];
    const nodeIds = [...new Set([...this.nodes.map((node) => node.id), ...(serviceArg.runtime.placement?.nodeIds ?? [])])];
    return html`<section class="card wide" aria-labelledby="bindings-title">
      <h2 id="bindings-title">Platform bindings</h2>
      ${this.bindings === null ? html`<p class="muted">Cloudly did not answer the bindings of this service.</p>` : html`
      <table class="data" aria-labelledby="bindings-title">
        <thead><tr><th scope="col">Capability</th><th scope="col">Node</th><th scope="col">Enabled</th><th scope="col">Status</th><th scope="col">Adopted from</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
        <tbody>${this.bindings.map((binding) => html`<tr data-binding-capability=${binding.capability}>
          <th scope="row">${binding.capability}</th><td>${binding.nodeId ?? html`<span class="muted">unplaced</span>`}</td><td>${binding.enabled ? 'yes' : 'no'}</td>
          <td>${binding.status}${binding.statusReason ? html` <code>${binding.statusReason}</code>` : nothing}</td>
          <td>${binding.corestoreLegacyAdoption ? 'legacy Corestore resource' : html`<span class="muted">—</span>`}</td>
          <td class="actions"><button type="button" data-action="edit-binding" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()} @click=${() => { this.bindingForm = { capability: binding.capability, enabled: binding.enabled, nodeId: binding.nodeId ?? '', expectedGeneration: binding.generation }; }}>Change…</button>
            <button type="button" class="danger" data-action="delete-binding" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()} @click=${() => this.deleteBinding(binding)}>Delete…</button></td>
        </tr>`)}</tbody>
      </table>
      ${this.bindings.length === 0 ? html`<p class="muted">No bindings: the service has no database or bucket from the platform.</p>` : nothing}`}
      ${form ? html`<form class="inline-form" aria-label="Platform binding" @submit=${(event: Event) => { event.preventDefault(); if (reasons.length === 0) { this.saveBinding(); } }}>
          <label for="binding-capability">Capability</label>
          <select id="binding-capability" ?disabled=${form.expectedGeneration !== null} @change=${(event: Event) => { this.bindingForm = { ...form, capability: choiceOf(platformBindingCapabilities, (event.target as HTMLSelectElement).value) ?? form.capability }; }}>
            ${platformBindingCapabilities.map((capability) => html`<option value=${capability} ?selected=${capability === form.capability}>${capability}</option>`)}
          </select>
          <label for="binding-node">Node</label>
          <select id="binding-node" @change=${(event: Event) => { this.bindingForm = { ...form, nodeId: (event.target as HTMLSelectElement).value }; }}>
            <option value="" ?selected=${form.nodeId === ''}>none yet</option>
            ${nodeIds.map((nodeId) => html`<option value=${nodeId} ?selected=${nodeId === form.nodeId}>${nodeId}</option>`)}
          </select>
          <label class="inline"><input type="checkbox" .checked=${form.enabled} @change=${(event: Event) => { this.bindingForm = { ...form, enabled: (event.target as HTMLInputElement).checked }; }}> enabled</label>
          <button type="submit" class="primary" data-action="save-binding" ?disabled=${reasons.length > 0}>Review…</button>
          <button type="button" @click=${() => { this.bindingForm = null; }}>Cancel</button>
          ${formReasonsView(reasons)}
        </form>`
        : this.bindings === null ? nothing : html`<button type="button" data-action="new-binding" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()} @click=${() => { this.bindingForm = { capability: 'database', enabled: true, nodeId: nodeIds[0] ?? '', expectedGeneration: null }; }}>New binding…</button>`}
    </section>`;
  }

  private startBackup(formArg: HTMLFormElement): void {
    const service = this.service!;
    const nodeId = String(new FormData(formArg).get('nodeId') ?? '');
    const request = { clusterId: service.clusterId, nodeId, serviceId: service.id, backupId: `backup-${crypto.randomUUID()}` };
    CloudlyActionDialog.open({
      title: `Back up ${service.name}`,
      intro: html`<p>A backup of <strong>${service.name}</strong> taken on node <strong>${nodeId}</strong> by the cluster's relay.</p>`,
      dryRun: () => api.call('createServiceBackup', { ...request, dryRun: true }),
      describe: () => html`<p>Cloudly accepts the order: it would ask the relay for the backup of this service on ${nodeId}.</p>`,
      run: async (progressArg) => {
        progressArg(null, 'Starting the backup…');
        const answer = await api.call('createServiceBackup', request);
        if (answer.operation) {
          const done = await followOperation(answer.operation, (operationArg) => progressArg(operationFraction(operationArg), operationLabel(operationArg)));
          return { operation: done, backup: done.result?.backup };
        }
        return answer;
      },
      result: (answerArg) => html`<p>Backup <code>${answerArg.backup?.backupId ?? request.backupId}</code> completed
        ${answerArg.backup ? html`with ${answerArg.backup.snapshots.length} snapshot(s)` : nothing}.</p>`,
      confirmLabel: 'Start backup',
      onDone: () => void this.loadBackups(),
    });
  }

  // ---- views ----

  private specView(serviceArg: IService): TemplateResult {
    const runtime = serviceArg.runtime as unknown as Record<string, any>;
    return html`<section class="card" aria-labelledby="spec-title">
      <h2 id="spec-title">Spec</h2>
      <dl class="facts">
        <div><dt>Cluster</dt><dd><a href=${`#/cluster/${encodeURIComponent(serviceArg.clusterId)}`}>${serviceArg.clusterId}</a></dd></div>
        <div><dt>Organization</dt><dd>${serviceArg.organizationId}</dd></div>
        <div><dt>Image</dt><dd><code>${runtime.image}</code></dd></div>
        <div><dt>Replicas</dt><dd>${runtime.replicas}</dd></div>
        <div><dt>Placement</dt><dd>${runtime.placement?.nodeIds?.length ? runtime.placement.nodeIds.join(', ') : 'any node'}</dd></div>
        <div><dt>Ports</dt><dd>${serviceArg.ports?.length ? serviceArg.ports.map((port) => `${port.name} ${port.port}/${port.protocol}`).join(', ') : 'none'}</dd></div>
        <div><dt>Routes</dt><dd>${serviceArg.routes?.length ? serviceArg.routes.map((route) => `${route.hostname} → ${route.targetPort}`).join(', ') : 'none'}</dd></div>
        <div><dt>Runs as</dt><dd data-run-as>${describeRunAs(serviceArg.runtime.profile?.runAs)}</dd></div>
        <div><dt>Spec revision</dt><dd>${serviceArg.specRevision} (generation ${serviceArg.generation})</dd></div>
        <div><dt>Updated</dt><dd>${formatTime(serviceArg.updatedAt)}</dd></div>
      </dl>
      ${this.editingSpec
        ? html`<cloudly-service-form mode="edit" cluster-id=${serviceArg.clusterId} .nodeIds=${this.nodes.map((node) => node.id)}
            .initial=${this.editingSpec.fields}
            @spec=${(event: CustomEvent<IServiceFormSubmission>) => this.updateService(event.detail.spec)} @cancel=${() => { this.editingSpec = null; }}></cloudly-service-form>`
        : html`<div class="dialog-buttons">
            <button type="button" data-action="edit-service" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()} @click=${() => { this.editingSpec = { base: serviceArg, fields: serviceFormOfSpec(writableSpecOf(serviceArg)) }; }}>Edit service…</button>
            <button type="button" class="danger" data-action="delete-service" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()} @click=${() => this.deleteService()}>Delete service…</button>
          </div>`}
    </section>`;
  }

  private statusView(): TemplateResult {
    const status = this.status?.status ?? null;
    const unknown = this.status?.unknown ?? null;
    const state = unknown ? 'unknown' : status?.state ?? 'unjudged';
    return html`<section class="card" aria-labelledby="status-title">
      <h2 id="status-title">Runtime status</h2>
      ${this.statusError ? refusalView(this.statusError) : html`
        <p><span class=${`badge state-${state}`} data-runtime-state=${state}>${unknown ? 'unknown' : status?.state ?? 'not judged'}</span>
          ${unknown ? html`<code>${unknown.reason}</code>` : status?.reason ? html`<code>${status.reason}</code>` : nothing}</p>
        <p class="explanation">${unknown ? explainUnknown(unknown, status) : explainRuntimeStatus(status)}</p>
        ${status ? html`<p class="muted">Spec revision ${status.specRevision}, since ${formatTime(status.changedAt)}; relay last reported ${formatTime(this.status?.observed.lastReportedAt)}.</p>` : nothing}
        ${this.assignmentsView(this.status?.assignments ?? [])}`}
    </section>`;
  }

  /** One row per replica slot: where it is assigned and what is known of it (a dark cluster's slots read stale). */
  private assignmentsView(viewsArg: IServiceRuntimeAssignmentView[]): TemplateResult | typeof nothing {
    if (viewsArg.length === 0) {
      return nothing;
    }
    return html`<h3 id="assignments-title">Replica slots</h3>
      <table class="data" aria-labelledby="assignments-title">
        <thead><tr><th scope="col">Slot</th><th scope="col">Node</th><th scope="col">Condition</th><th scope="col">Address</th><th scope="col">Node session</th><th scope="col">What is known</th></tr></thead>
        <tbody>${viewsArg.map((view) => {
          const described = describeAssignment(view, formatTime);
          return html`<tr data-assignment-slot=${view.replica} data-assignment-condition=${view.condition}>
            <th scope="row">${view.replica}</th><td>${view.nodeId ?? '—'}</td>
            <td><span class=${`badge state-${described.tone}`}>${view.condition}</span></td>
            <td>${view.lease ? html`<code>${view.lease.address}</code>${view.lease.confirmed ? nothing : html` <span class="muted">(not applied yet)</span>`}` : '—'}</td>
            <td>${view.session ? html`<code>${view.session.id}</code> gen ${view.session.generation}` : '—'}</td>
            <td>${described.sentence}</td>
          </tr>`;
        })}</tbody>
      </table>`;
  }

  /**
   * The form's warning, before any call: the same judgement the CLI makes
   * (ts/interfaces/data/servicevolumeuse.ts), e.g. an owner from run-as for a service without one.
   */
  private initializationWarning(volumeArg: IServiceVolume, runAsArg: IServiceRunAs | null): TemplateResult | typeof nothing {
    const current = volumeArg.initialization;
    const choice = this.initializationChoice?.serviceId === this.serviceId && this.initializationChoice.mountPath === volumeArg.mountPath
      ? this.initializationChoice
      : { kind: current?.kind ?? 'empty', owner: current?.kind === 'empty' && current.ownership.kind === 'explicit' ? 'explicit' : 'run-as' };
    const sketch: TServiceVolumeInitialization | null = choice.kind === 'clear'
      ? null
      : choice.kind === 'import'
        ? { kind: 'import', source: { kind: 'docker-volume', volumeName: 'volume' } }
        : { kind: 'empty', ownership: choice.owner === 'explicit' ? { kind: 'explicit', uid: 0, gid: 0, mode: 0o750 } : { kind: 'run-as', mode: 0o750 } };
    const use = judgeServiceVolumeInitializationUse(sketch, runAsArg);
    return use.usable ? nothing : html`<p class="warning" role="status" data-initialization-warning=${use.reason}>This service cannot use this
      initialization: ${use.why} (<code>${use.reason}</code>). Instead: ${use.instead}.</p>`;
  }

  private volumeForm(volumeArg: IServiceVolume, runAsArg: IServiceRunAs | null): TemplateResult {
    const current = volumeArg.initialization;
    const ownership = current?.kind === 'empty' ? current.ownership : null;
    return html`<form class="volume-form" aria-label=${`Initialization of ${volumeArg.mountPath}`}
        @change=${(event: Event) => {
          const data = new FormData(event.currentTarget as HTMLFormElement);
          this.initializationChoice = { serviceId: this.serviceId, mountPath: volumeArg.mountPath, kind: String(data.get('kind')), owner: String(data.get('owner')) };
        }}
        @submit=${(event: Event) => { event.preventDefault(); this.setInitialization(volumeArg, event.target as HTMLFormElement); }}>
      <label>Initialization
        <select name="kind">
          <option value="empty" ?selected=${!current || current.kind === 'empty'}>empty directory</option>
          <option value="import" ?selected=${current?.kind === 'import'}>import a Docker volume</option>
          <option value="clear">none (clear)</option>
        </select>
      </label>
      <label>Owner
        <select name="owner"><option value="run-as" ?selected=${ownership?.kind !== 'explicit'}>from run-as</option><option value="explicit" ?selected=${ownership?.kind === 'explicit'}>explicit uid/gid</option></select>
      </label>
      <label>uid <input name="uid" type="number" min="0" value=${ownership?.kind === 'explicit' ? ownership.uid : 1000}></label>
      <label>gid <input name="gid" type="number" min="0" value=${ownership?.kind === 'explicit' ? ownership.gid : 1000}></label>
      <label>mode (octal) <input name="mode" type="text" inputmode="numeric" pattern="[0-7]{3,4}" value=${ownership ? ownership.mode.toString(8).padStart(4, '0') : '0750'}></label>
      <label>Docker volume <input name="volumeName" type="text" value=${current?.kind === 'import' ? current.source.volumeName : ''}></label>
      ${this.initializationWarning(volumeArg, runAsArg)}
      <button type="submit" class="primary" data-action="set-initialization">Review…</button>
      <button type="button" @click=${() => { this.editing = null; }}>Cancel</button>
    </form>`;
  }

  private volumesView(serviceArg: IService): TemplateResult {
    return html`<section class="card wide" aria-labelledby="volumes-title">
      <h2 id="volumes-title">Volumes (${serviceArg.volumes.length})</h2>
      ${serviceArg.volumes.length === 0 ? html`<p class="muted">No volumes.</p>` : html`
      <table class="data" aria-labelledby="volumes-title">
        <thead><tr><th scope="col">Mount path</th><th scope="col">Driver</th><th scope="col">Access</th><th scope="col">Initialization</th><th scope="col"></th></tr></thead>
        <tbody>${serviceArg.volumes.map((volume) => html`<tr data-mount-path=${volume.mountPath}>
          <th scope="row"><code>${volume.mountPath}</code></th><td>${volume.driver}</td><td>${volume.readOnly ? 'read-only' : 'read-write'}</td>
          <td>${describeInitialization(volume.initialization)}</td>
          <td><button type="button" data-action="edit-initialization" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()} @click=${() => { this.editing = volume.mountPath; }}>Set initialization…</button></td>
        </tr>${this.editing === volume.mountPath ? html`<tr><td colspan="5">${this.volumeForm(volume, serviceArg.runtime.profile?.runAs ?? null)}</td></tr>` : nothing}`)}</tbody>
      </table>`}
      <h3 id="claims-title">Local storage claims</h3>
      ${this.claims.length === 0 ? html`<p class="muted">No claims issued.</p>` : html`
      <table class="data" aria-labelledby="claims-title">
        <thead><tr><th scope="col">Claim</th><th scope="col">Node</th><th scope="col">Generation</th><th scope="col">Delivery</th><th scope="col">Node state</th><th scope="col">Issued</th></tr></thead>
        <tbody>${this.claims.map((record) => {
          const claim = record.claim as unknown as Record<string, any>;
          return html`<tr>
            <td><code>${claim.claimId ?? claim.id ?? '—'}</code></td><td>${claim.nodeId ?? '—'}</td><td>${claim.generation ?? '—'}</td>
            <td>${record.delivery}${record.lastDeliveryError ? html` <span class="muted">(${record.lastDeliveryError})</span>` : nothing}</td>
            <td>${record.nodeState ?? '—'}${record.answerStatus === 'historical' && record.nodeClaim
              ? html` <span class="badge state-refused" data-claim-historical=${record.nodeClaim.generation}>node holds generation ${record.nodeClaim.generation}: newer than Cloudly issued, nothing more is pushed until an administrator supersedes it (<code>supersedeHistoricalRuntimeLocalStorageClaim</code>)</span>`
              : nothing}</td><td>${formatTime(record.issuedAt)}</td>
          </tr>`;
        })}</tbody>
      </table>`}
      <cloudly-pager label="claims" .nextCursor=${this.claimsNext}
        @page=${(event: CustomEvent<{ cursor?: string }>) => { this.claimsCursor = event.detail.cursor; void this.loadClaims(); }}></cloudly-pager>
    </section>`;
  }

  private backupState(backupArg: IServiceBackupRecord): TemplateResult {
    // Backups recorded before operations carry no state: they were recorded when done.
    const state = (backupArg as { state?: string }).state ?? 'completed';
    const failure = (backupArg as { failureReason?: string }).failureReason;
    const badge = state === 'completed' ? 'state-converged' : state === 'running' ? 'state-converging' : 'state-refused';
    return html`<span class=${`badge ${badge}`} data-backup-state=${state}>${state}</span>${failure ? html` <code>${failure}</code>` : nothing}`;
  }

  private verificationView(backupArg: IServiceBackupRecord): TemplateResult {
    const badge = verificationBadgeOf(backupArg, formatTime);
    return html`<span class=${`badge ${badge.className}`} data-verification=${badge.outcome} title=${badge.detail}>${badge.outcome === 'not-verified' ? 'not verified' : badge.outcome}</span>${
      badge.verifiedAt !== null ? html` <span class="muted" data-verified-at>${formatTime(badge.verifiedAt)}</span>` : nothing}${
      badge.outcome === 'mismatch' || badge.outcome === 'missing' ? html`<div class="muted">${badge.detail}</div>` : nothing}`;
  }

  /** The schedules that name this service: when they run next and what their last run did. */
  private schedulesView(): TemplateResult {
    const schedules = this.schedules;
    if (schedules === null || schedules.length === 0) {
      return html`<p class="muted" data-service-schedules="none">No backup schedule names this service (a schedule over its cluster or organization is listed under <a href="#/backups">Backups</a>).</p>`;
    }
    return html`<ul class="service-schedules" aria-label="Backup schedules of this service">${schedules.map((schedule) => {
      const state = scheduleStateOf(schedule);
      const lastRun = describeLastRun(schedule.status?.lastRun);
      const ordered = lastRunBackupStates(schedule.status?.lastRun, this.backups);
      return html`<li data-service-schedule=${schedule.scheduleId} data-schedule-state=${state.state}>
        Schedule <a href="#/backups"><code>${schedule.scheduleId}</code></a> <code>${schedule.cron}</code> (UTC):
        ${state.state === 'enabled' ? html`next run ${schedule.status?.nextRunAt !== undefined ? formatTime(schedule.status.nextRunAt) : '—'}` : html`<strong>${state.text}</strong>`};
        last run: ${lastRun.text}${ordered.length > 0 ? html` (${ordered.map((backup) => `${backup.backupId}: ${backup.state}${backup.failureReason ? ` ${backup.failureReason}` : ''}`).join(', ')})` : nothing}.
      </li>`;
    })}</ul>`;
  }

  /** The backup's newest restore drill: its outcome, when and onto which node (docs/api/backups.md, "Restore drills"). */
  private drillBadge(backupArg: IServiceBackupRecord): TemplateResult | typeof nothing {
    const drill = backupArg.drill;
    if (!drill) {
      return nothing;
    }
    const badge = drill.outcome === 'ok' ? 'state-converged' : drill.outcome === 'running' ? 'state-converging' : 'state-refused';
    const when = formatTime(drill.finishedAt ?? drill.startedAt);
    const cleanup = drill.outcome !== 'running' && !drill.cleanedUp ? ', cleanup owed' : '';
    return html` <span class=${`badge ${badge}`} data-drill-outcome=${drill.outcome}
      title=${`restore drill ${drill.drillId}${drill.reason ? `: ${drill.reason}` : ''}`}>drill ${drill.outcome} ${when} on ${drill.nodeId}${cleanup}</span>`;
  }

  private backupsView(serviceArg: IService): TemplateResult {
    const choices = decideBackupNodeChoices(this.nodes.map((node) => node.id), serviceArg.runtime.placement?.nodeIds ?? [], this.status?.observed.placements ?? []);
    const nodeIds = choices.nodeIds;
    return html`<section class="card wide" aria-labelledby="backups-title">
      <h2 id="backups-title">Backups</h2>
      ${this.schedulesView()}
      <form class="inline-form" aria-label="Start a backup" @submit=${(event: Event) => { event.preventDefault(); this.startBackup(event.target as HTMLFormElement); }}>
        <label>Node <select name="nodeId">${nodeIds.map((nodeId) => html`<option value=${nodeId} ?selected=${nodeId === choices.defaultNodeId}>${nodeId}</option>`)}</select></label>
        <button type="submit" data-action="start-backup" ?disabled=${!mayChange() || nodeIds.length === 0} title=${changeTitle()} aria-describedby=${changeDescribedBy()}>Start backup…</button>
      </form>
      ${this.operations?.length ? html`<ul class="operations" aria-label="Running backups">${this.operations.map((operation) => {
        const fraction = operationFraction(operation);
        return html`<li data-operation-id=${operation.operationId}><label>${operationLabel(operation)}
          ${fraction === null ? html`<progress></progress>` : html`<progress max="100" .value=${Math.round(fraction * 100)}>${Math.round(fraction * 100)}%</progress>`}</label></li>`;
      })}</ul>` : nothing}
      <table class="data" aria-labelledby="backups-title">
        <thead><tr><th scope="col">Backup</th><th scope="col">Node</th><th scope="col">Taken</th><th scope="col">Snapshots</th><th scope="col">Closure</th><th scope="col">State</th><th scope="col">Verified</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
        <tbody>${sortBackupsByTime(this.backups).map((backup) => html`<tr data-backup-id=${backup.backupId}>
          <td><code>${backup.backupId}</code></td><td>${backup.nodeId}</td><td>${formatTime(backup.createdAt)}</td>
          <td>${backup.snapshots.length}</td><td>${backup.closure ? `stored ${formatTime(backup.closure.storedAt)}` : html`<span class="muted">none</span>`}</td>
          <td>${this.backupState(backup)}${this.drillBadge(backup)}</td>
          <td>${this.verificationView(backup)}</td>
          <td class="actions">${((backup as { state?: string }).state ?? 'completed') === 'completed' ? html`
            <button type="button" data-action="verify-backup" ?disabled=${!mayChange() || !backup.closure} title=${!mayChange() ? changeTitle() : backup.closure ? nothing : 'No stored closure to verify.'}
              aria-describedby=${changeDescribedBy()} @click=${() => this.verifyBackup(backup)}>Verify…</button>
            <button type="button" data-action="restore-backup" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()} @click=${() => this.restoreBackup(backup)}>Restore…</button>
            <button type="button" data-action="isolated-restore" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()} @click=${() => { this.isolated = { backupId: backup.backupId, targetNodeName: backup.nodeId, mappings: '[]' }; }}>Isolated restore…</button>` : nothing}</td>
        </tr>`)}</tbody>
      </table>
      ${this.backups.length === 0 ? html`<p class="muted">No backups recorded.</p>` : nothing}
      ${this.isolated ? this.isolatedRestoreView() : nothing}
      <cloudly-pager label="backups" .nextCursor=${this.backupsNext}
        @page=${(event: CustomEvent<{ cursor?: string }>) => { this.backupsCursor = event.detail.cursor; void this.loadBackups(); }}></cloudly-pager>
    </section>`;
  }

  protected updated(): void {
    if (this.service !== null) {
      markFirstRender('service');
    }
  }

  protected render(): TemplateResult {
    const service = this.service;
    return html`<section class="page" data-page="service" aria-labelledby="service-title">
      <nav class="crumbs" aria-label="Breadcrumb"><a href="#/fleet">Fleet</a> ›
        ${service ? html`<a href=${`#/cluster/${encodeURIComponent(service.clusterId)}`} data-crumb="cluster">${this.clusterName ?? service.clusterId}</a> ›` : nothing} <span aria-current="page">${service?.name ?? 'service'}</span></nav>
      <header class="page-header"><h1 id="service-title">${service?.name ?? 'Service'}</h1>
        ${service ? html`<span class="muted">id <code>${service.id}</code></span>` : nothing}</header>
      ${this.error ? refusalView(this.error) : nothing}
      ${service ? html`<div class="grid">${this.specView(service)}${this.statusView()}${this.volumesView(service)}${this.bindingsView(service)}${this.backupsView(service)}</div>`
        : this.error ? nothing : html`<p role="status">Loading…</p>`}
    </section>`;
  }
}
customElements.define('cloudly-service-page', CloudlyServicePage);

