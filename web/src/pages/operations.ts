import { html, nothing, type TemplateResult } from 'lit';
import { operationStates, type IOperation, type TOperationState } from '../../../ts/interfaces/requests/operation.js';
import type { IChangeEvent } from '../../../ts/interfaces/requests/watch.js';
import type { IIsolatedRestoreNodeState } from '../../../ts/interfaces/data/isolatedrestore.js';
import { api } from '../api.js';
import { formatBytes, formatTime } from '../format.js';
import { LivePage } from '../live.js';
import { CloudlyActionDialog, coalesce, refusalView, type CloudlyPager, markFirstRender, mayChange, changeTitle, changeDescribedBy } from '../widgets.js';
import { formatDuration, sortOperations } from '../decide.js';
import { choiceOf } from '../drafts.js';
import { operationFraction } from './service.js';
import { describeDryRun } from '../forms.js';

const pageLimit = 50;
/** How often running operations' byte progress is read (progress writes are not on the watch). */
const runningProgressReadMs = 1000;

/**
 * Operations: backups, restores and isolated restores, running and recent, with their progress,
 * who started them and how they ended; a running one can be cancelled (after its dry run). State
 * changes arrive through the watch; byte progress is read once a second while any runs.
 */
export class CloudlyOperationsPage extends LivePage {
  static properties = {
    operations: { state: true },
    nextCursor: { state: true },
    stateFilter: { state: true },
    error: { state: true },
    steps: { state: true },
  };

  declare operations: IOperation[];
  declare nextCursor: string | undefined;
  declare stateFilter: TOperationState | '';
  declare error: unknown;
  /** The isolated restore whose node state is shown (read with `stepIsolatedRestore status`); null while closed. */
  declare steps: { restoreId: string; state?: IIsolatedRestoreNodeState; error?: unknown } | null;
  /** Usernames by user id, when this account may list accounts (administrators); ids otherwise. */
  private usernames = new Map<string, string>();
  private cursor: string | undefined;
  private progressTimer: number | null = null;
  private readonly reloadSoon = coalesce(() => void this.load());
  /** Whether the first read was answered (its answer may be empty). */
  private loaded = false;

  constructor() {
    super();
    this.operations = [];
    this.stateFilter = '';
    this.steps = null;
  }

  connectedCallback(): void {
    super.connectedCallback();
    void this.load();
    void this.loadUsernames();
  }

  private async loadUsernames(): Promise<void> {
    const answer = await api.call('getUsers', { limit: 500 }).catch(() => null);
    if (answer) {
      this.usernames = new Map(answer.users.map((user) => [user.userId, user.username]));
      this.requestUpdate();
    }
  }

  disconnectedCallback(): void {
    this.stopProgress();
    super.disconnectedCallback();
  }

  private async load(): Promise<void> {
    try {
      const answer = await api.call('getOperations', {
        limit: pageLimit,
        ...(this.stateFilter ? { state: this.stateFilter } : {}),
        ...(this.cursor ? { cursor: this.cursor } : {}),
      });
      this.operations = sortOperations(answer.operations);
      this.loaded = true;
      // An answer equal to the state before (no plan, still none) re-renders nothing by itself.
      this.requestUpdate();
      this.nextCursor = answer.nextCursor;
      this.error = undefined;
    } catch (error) {
      this.error = error;
    }
    this.followProgress();
  }

  private followProgress(): void {
    const running = this.isConnected && this.operations.some((operation) => operation.state === 'running');
    if (running && this.progressTimer === null) {
      this.progressTimer = window.setInterval(() => void this.load(), runningProgressReadMs);
    } else if (!running) {
      this.stopProgress();
    }
  }

  private stopProgress(): void {
    if (this.progressTimer !== null) {
      window.clearInterval(this.progressTimer);
      this.progressTimer = null;
    }
  }

  protected onChange(changeArg: IChangeEvent): void {
    if (/operation/i.test(changeArg.kind)) {
      this.reloadSoon();
    }
  }

  protected onResync(): Promise<void> {
    return this.load();
  }

  private cancel(operationArg: IOperation): void {
    const request = { operationId: operationArg.operationId };
    CloudlyActionDialog.open({
      title: `Cancel ${operationArg.kind} ${operationArg.backupId}`,
      intro: html`<p>Cloudly stops waiting for the relay and marks the operation cancelled; the relay may still finish its own part on node <code>${operationArg.nodeId}</code>.</p>`,
      dryRun: () => api.call('cancelOperation', { ...request, dryRun: true }),
      describe: (answerArg) => html`<p>The operation would end <strong>${answerArg.operation?.state ?? 'cancelled'}</strong>.</p>`,
      run: () => api.call('cancelOperation', request),
      result: (answerArg) => html`<p>The operation is now <strong>${answerArg.operation?.state}</strong>.</p>`,
      confirmLabel: 'Cancel operation',
      onDone: () => void this.load(),
    });
  }

  /** Reads an isolated restore's state on its node (through the relay, under a fresh grant). */
  private async readRestore(restoreIdArg: string): Promise<void> {
    this.steps = { restoreId: restoreIdArg };
    try {
      const { state } = await api.call('stepIsolatedRestore', { restoreId: restoreIdArg, operation: 'status' });
      this.steps = { restoreId: restoreIdArg, state };
    } catch (error) {
      this.steps = { restoreId: restoreIdArg, error };
    }
  }

  /** Executes or cleans up an isolated restore, against the revision of the state read. */
  private stepRestore(operationArg: 'execute' | 'cleanup'): void {
    const steps = this.steps!;
    const request = { restoreId: steps.restoreId, operation: operationArg, expectedRevision: steps.state!.revision };
    CloudlyActionDialog.open({
      title: `${operationArg === 'execute' ? 'Execute' : 'Clean up'} isolated restore ${steps.restoreId}`,
      intro: html`<p>${operationArg === 'execute'
        ? 'The node restores the staged backup into the scratch resources of the mappings.'
        : 'The node removes the scratch resources and the staged archive.'} Against node state revision ${request.expectedRevision}.</p>`,
      dryRun: () => api.call('stepIsolatedRestore', { ...request, dryRun: true }),
      describe: (answerArg) => describeDryRun(answerArg),
      run: () => api.call('stepIsolatedRestore', request),
      result: (answerArg) => html`<p>The node reports phase <strong data-restore-phase=${answerArg.state?.phase ?? ''}>${answerArg.state?.phase}</strong> (revision ${answerArg.state?.revision}).</p>`,
      confirmLabel: operationArg === 'execute' ? 'Execute' : 'Clean up',
      onDone: (answerArg) => { this.steps = { restoreId: steps.restoreId, state: answerArg.state }; },
    });
  }

  private stepsView(): TemplateResult {
    const steps = this.steps!;
    const phase = steps.state?.phase;
    return html`<section class="card wide" aria-labelledby="restore-steps-title" data-restore-id=${steps.restoreId}>
      <h2 id="restore-steps-title">Isolated restore <code>${steps.restoreId}</code></h2>
      ${steps.error ? refusalView(steps.error) : !steps.state ? html`<p role="status">Asking the node…</p>` : html`
        <p>Node <strong>${steps.state.targetNodeName}</strong>: phase <strong data-restore-phase=${steps.state.phase}>${steps.state.phase}</strong>
          (revision ${steps.state.revision}), ${steps.state.stagedObjects.length} object(s) staged${steps.state.reason ? html`, <code>${steps.state.reason}</code>` : nothing}.</p>
        <div class="dialog-buttons">
          <button type="button" data-action="execute-restore" ?disabled=${!mayChange() || phase !== 'ready'} title=${changeTitle()} aria-describedby=${changeDescribedBy()} @click=${() => this.stepRestore('execute')}>Execute…</button>
          <button type="button" data-action="cleanup-restore" ?disabled=${!mayChange() || phase === 'cleaned-up'} title=${changeTitle()} aria-describedby=${changeDescribedBy()} @click=${() => this.stepRestore('cleanup')}>Clean up…</button>
          <button type="button" @click=${() => void this.readRestore(steps.restoreId)}>Read again</button>
          <button type="button" @click=${() => { this.steps = null; }}>Close</button>
        </div>`}
    </section>`;
  }

  private row(operationArg: IOperation): TemplateResult {
    const progress = operationArg.progress;
    const fraction = operationFraction(operationArg);
    const badge = operationArg.state === 'completed' ? 'state-converged' : operationArg.state === 'running' ? 'state-converging' : 'state-refused';
    const ended = operationArg.endedAt ?? null;
    // A rollout's operation: its detail is on the rollouts page, and abortRollout (there) stops it.
    const rollout = operationArg.rollout;
    return html`<tr data-operation-id=${operationArg.operationId} data-operation-state=${operationArg.state}>
      <td>${operationArg.kind}<br><code class="muted">${operationArg.method}</code></td>
      <td>${rollout
        ? html`<a href="#/rollouts" data-rollout-id=${rollout.rolloutId}>rollout <code>${rollout.rolloutId}</code></a><br><span class="muted">${rollout.state}${rollout.reverted ? ', reverted' : ''}, wave ${rollout.currentWave + 1} of ${rollout.waves}</span>`
        : html`<a href=${`#/service/${encodeURIComponent(operationArg.serviceId)}`}><code>${operationArg.serviceId}</code></a><br><span class="muted">node ${operationArg.nodeId}</span>`}</td>
      <td><code>${operationArg.backupId}</code></td>
      <td><span class=${`badge ${badge}`}>${operationArg.state}</span>${operationArg.reason ? html` <code>${operationArg.reason}</code>` : nothing}</td>
      <td>${operationArg.state === 'running'
        ? html`<label>${progress.phase}${progress.bytesTotal ? ` ${formatBytes(progress.bytesDone)} of ${formatBytes(progress.bytesTotal)}` : ''}${rollout ? ` ${rollout.targetsTotal - (rollout.targets.pending ?? 0) - (rollout.targets.updating ?? 0)} of ${rollout.targetsTotal} services` : ''}
            ${fraction === null ? html`<progress></progress>` : html`<progress max="100" .value=${Math.round(fraction * 100)}>${Math.round(fraction * 100)}%</progress>`}</label>`
        : html`${progress.bytesTotal ? formatBytes(progress.bytesDone) : '—'}`}</td>
      <td>${formatTime(operationArg.startedAt)}</td>
      <td>${ended === null ? html`<span class="muted">running ${formatDuration(Date.now() - operationArg.startedAt)}</span>` : formatDuration(ended - operationArg.startedAt)}</td>
      <td data-requested-by>${this.usernames.get(operationArg.requestedBy) ?? operationArg.requestedBy}</td>
      <td>${operationArg.state === 'running' && !rollout ? html`<button type="button" data-action="cancel-operation" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()} @click=${() => this.cancel(operationArg)}>Cancel…</button>` : nothing}
        ${operationArg.kind === 'isolated-restore' && operationArg.state === 'completed' && operationArg.result?.restoreId
          ? html`<button type="button" data-action="restore-steps" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()} @click=${() => void this.readRestore(operationArg.result!.restoreId!)}>Steps…</button>` : nothing}</td>
    </tr>`;
  }

  protected updated(): void {
    if (this.loaded) {
      markFirstRender('operations');
    }
  }

  protected render(): TemplateResult {
    const running = this.operations.filter((operation) => operation.state === 'running').length;
    return html`<section class="page" data-page="operations" aria-labelledby="operations-title">
      <header class="page-header"><h1 id="operations-title">Operations</h1>
        <span class="muted" data-running-count=${running}>${running} running</span>
        <label class="inline">State
          <select name="state" @change=${(event: Event) => {
            this.stateFilter = choiceOf(operationStates, (event.target as HTMLSelectElement).value) ?? '';
            this.cursor = undefined;
            this.querySelector<CloudlyPager>('cloudly-pager')?.reset();
            void this.load();
          }}>
            ${['', ...operationStates].map((state) => html`<option value=${state} ?selected=${state === this.stateFilter}>${state || 'any'}</option>`)}
          </select>
        </label>
      </header>
      ${this.error ? refusalView(this.error) : nothing}
      <table class="data" aria-label="Operations">
        <thead><tr><th scope="col">Kind</th><th scope="col">Service</th><th scope="col">Backup</th><th scope="col">State</th>
          <th scope="col">Progress</th><th scope="col">Started</th><th scope="col">Took</th><th scope="col">By</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
        <tbody>${this.operations.map((operation) => this.row(operation))}</tbody>
      </table>
      ${this.operations.length === 0 ? html`<p class="muted">No operations.</p>` : nothing}
      ${this.steps ? this.stepsView() : nothing}
      <cloudly-pager label="operations" .nextCursor=${this.nextCursor}
        @page=${(event: CustomEvent<{ cursor?: string }>) => { this.cursor = event.detail.cursor; void this.load(); }}></cloudly-pager>
    </section>`;
  }
}
customElements.define('cloudly-operations-page', CloudlyOperationsPage);
