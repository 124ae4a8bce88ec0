import { html, nothing, type TemplateResult } from 'lit';
import type { IBackupSchedule } from '../../../ts/interfaces/data/backupschedule.js';
import type { IChangeEvent } from '../../../ts/interfaces/requests/watch.js';
import { api } from '../api.js';
import { formatTime } from '../format.js';
import { LivePage } from '../live.js';
import { CloudlyActionDialog, refusalView, markFirstRender, coalesce, mayChange, changeTitle, changeDescribedBy } from '../widgets.js';
import {
  emptyScheduleForm,
  scheduleFormOf,
  scheduleSpecOfForm,
  scheduleTargetKinds,
  specOfSchedule,
  type IScheduleFormFields,
  type TScheduleTargetKind,
  describeLastRun,
  describeRetention,
  describeRetentionReason,
  describeScheduleTarget,
  isBackupsPageChange,
  retentionRowsOf,
  scheduleStateOf,
  type IRetentionRow,
} from '../backups.js';

const pageLimit = 50;

const stateBadge: Record<string, string> = { enabled: 'state-converged', disabled: 'state-refused', pending: 'state-waiting' };
const runBadge: Record<string, string> = { ordered: 'state-converged', 'partly-skipped': 'state-waiting', skipped: 'state-refused', never: '' };

/** A schedule's retention dry run as read, or the refusal. */
interface IRetentionView {
  readAt: number;
  rows?: IRetentionRow[];
  keep?: number;
  remove?: number;
  error?: unknown;
}

/**
 * Backup schedules (docs/api/backups.md): each schedule's target, cron (UTC) and jitter, whether
 * it is enabled (or disabled, with the controller's reason), its next run and what its last run
 * ordered or skipped, and its retention; **Retention dry run** asks `getBackupRetentionPlan` what
 * retention would remove now and why (it writes nothing, so a read-only account may ask too).
 * Followed live: a schedule's spec, its state, and its backups (the plan is read again when open).
 */
export class CloudlyBackupsPage extends LivePage {
  static properties = {
    schedules: { state: true },
    nextCursor: { state: true },
    error: { state: true },
    plans: { state: true },
    names: { state: true },
    fields: { state: true },
    editing: { state: true },
    formReasons: { state: true },
  };

  declare schedules: IBackupSchedule[];
  declare nextCursor: string | undefined;
  declare error: unknown;
  /** The retention dry runs shown, by schedule id. */
  declare plans: Record<string, IRetentionView>;
  /** Names of the services and clusters the schedules target, by id, as read (a deleted one keeps its id). */
  declare names: Record<string, string>;
  declare fields: IScheduleFormFields;
  /** The schedule the form edits (as read when **Edit…** was pressed), or null: the form creates one. */
  declare editing: IBackupSchedule | null;
  declare formReasons: string[];
  private cursor: string | undefined;
  private loaded = false;
  private readonly reread = coalesce(() => void this.onResync());

  constructor() {
    super();
    this.schedules = [];
    this.plans = {};
    this.names = {};
    this.fields = emptyScheduleForm();
    this.editing = null;
    this.formReasons = [];
  }

  connectedCallback(): void {
    super.connectedCallback();
    void this.load();
  }

  private async load(): Promise<void> {
    try {
      const answer = await api.call('getBackupSchedules', { limit: pageLimit, ...(this.cursor ? { cursor: this.cursor } : {}) });
      this.schedules = answer.schedules;
      this.nextCursor = answer.nextCursor;
      this.loaded = true;
      this.error = undefined;
    } catch (error) {
      this.error = error;
      return;
    }
    await this.loadNames();
  }

  private async loadNames(): Promise<void> {
    const reads = this.schedules.map(async ({ target }) => {
      if ('serviceId' in target && !this.names[target.serviceId]) {
        const answer = await api.call('getServiceById', { serviceId: target.serviceId }).catch(() => null);
        return answer ? [target.serviceId, answer.service.name] as const : null;
      }
      if ('clusterId' in target && !this.names[target.clusterId]) {
        const answer = await api.call('getClusterById', { clusterId: target.clusterId }).catch(() => null);
        return answer ? [target.clusterId, answer.cluster.name] as const : null;
      }
      return null;
    });
    const found = (await Promise.all(reads)).filter((entry) => entry !== null);
    if (found.length > 0) {
      this.names = { ...this.names, ...Object.fromEntries(found) };
    }
  }

  private async readPlan(scheduleIdArg: string): Promise<void> {
    try {
      const plan = await api.call('getBackupRetentionPlan', { scheduleId: scheduleIdArg });
      this.plans = { ...this.plans, [scheduleIdArg]: { readAt: Date.now(), ...retentionRowsOf(plan.services) } };
    } catch (error) {
      this.plans = { ...this.plans, [scheduleIdArg]: { readAt: Date.now(), error } };
    }
  }

  protected onChange(changeArg: IChangeEvent): void {
    if (isBackupsPageChange(changeArg)) {
      this.reread();
    }
  }

  protected async onResync(): Promise<void> {
    await Promise.all([this.load(), ...Object.keys(this.plans).map((scheduleId) => this.readPlan(scheduleId))]);
  }

  private setField<K extends keyof IScheduleFormFields>(keyArg: K, valueArg: IScheduleFormFields[K]): void {
    this.fields = { ...this.fields, [keyArg]: valueArg };
    this.formReasons = [];
  }

  private resetForm(): void {
    this.fields = emptyScheduleForm();
    this.editing = null;
    this.formReasons = [];
  }

  /** Creates a schedule, or changes the one being edited against the generation it was read at. */
  private review(): void {
    const judged = scheduleSpecOfForm(this.fields);
    this.formReasons = judged.reasons;
    if (!judged.spec) {
      return;
    }
    const schedule = judged.spec;
    const editing = this.editing;
    if (editing) {
      const request = { scheduleId: editing.scheduleId, expectedGeneration: editing.generation, schedule };
      CloudlyActionDialog.open({
        title: `Change backup schedule ${editing.scheduleId}`,
        intro: html`<p>Against the schedule's generation ${editing.generation}; the controller looks at it afresh (a disabled schedule is judged again).</p>`,
        dryRun: () => api.call('updateBackupSchedule', { ...request, dryRun: true }),
        change: () => ({ before: specOfSchedule(editing), after: schedule }),
        run: () => api.call('updateBackupSchedule', request),
        result: (answerArg) => html`<p>Schedule <code>${answerArg.schedule.scheduleId}</code> is at generation ${answerArg.schedule.generation}.</p>`,
        confirmLabel: 'Change schedule',
        onDone: () => { this.resetForm(); void this.load(); },
      });
      return;
    }
    CloudlyActionDialog.open({
      title: 'New backup schedule',
      intro: html`<p>Backs up ${describeScheduleTarget(schedule.target, (idArg) => this.names[idArg] ?? idArg)} at <code>${schedule.cron}</code> (UTC).</p>`,
      dryRun: () => api.call('createBackupSchedule', { schedule, dryRun: true }),
      change: () => ({ before: undefined, after: schedule }),
      run: () => api.call('createBackupSchedule', { schedule }),
      result: (answerArg) => html`<p>Schedule <code data-created-schedule>${answerArg.schedule.scheduleId}</code> created.</p>`,
      confirmLabel: 'Create schedule',
      onDone: () => { this.resetForm(); void this.load(); },
    });
  }

  private deleteSchedule(scheduleArg: IBackupSchedule): void {
    const request = { scheduleId: scheduleArg.scheduleId, expectedGeneration: scheduleArg.generation };
    CloudlyActionDialog.open({
      title: `Delete backup schedule ${scheduleArg.scheduleId}`,
      intro: html`<p>It orders no more backups and its retention ends; the backups it made stay. Against the schedule's generation ${scheduleArg.generation}.</p>`,
      dryRun: () => api.call('deleteBackupSchedule', { ...request, dryRun: true }),
      describe: () => html`<p>Cloudly would delete the schedule.</p>`,
      run: () => api.call('deleteBackupSchedule', request),
      result: () => html`<p>Schedule <code>${scheduleArg.scheduleId}</code> deleted.</p>`,
      confirmLabel: 'Delete schedule',
      onDone: () => {
        this.schedules = this.schedules.filter((schedule) => schedule.scheduleId !== scheduleArg.scheduleId);
      },
    });
  }

  private formView(): TemplateResult {
    const fields = this.fields;
    const input = (keyArg: Exclude<keyof IScheduleFormFields, 'targetKind' | 'verify'>, labelArg: string, placeholderArg = '') => html`
      <label for=${`schedule-${keyArg}`}>${labelArg}</label>
      <input id=${`schedule-${keyArg}`} name=${keyArg} .value=${fields[keyArg]} placeholder=${placeholderArg}
        @input=${(event: Event) => this.setField(keyArg, (event.target as HTMLInputElement).value)}>`;
    return html`<form class="card wide" aria-label=${this.editing ? `Change schedule ${this.editing.scheduleId}` : 'New backup schedule'} data-schedule-form
        @submit=${(event: Event) => { event.preventDefault(); this.review(); }}>
      <h2>${this.editing ? html`Change schedule <code>${this.editing.scheduleId}</code>` : 'New backup schedule'}</h2>
      <label for="schedule-targetKind">Backs up</label>
      <select id="schedule-targetKind" name="targetKind" @change=${(event: Event) => this.setField('targetKind', (event.target as HTMLSelectElement).value as TScheduleTargetKind)}>
        ${scheduleTargetKinds.map((kind) => html`<option value=${kind} ?selected=${fields.targetKind === kind}>${kind === 'service' ? 'one service' : `every service of a ${kind}`}</option>`)}
      </select>
      ${input('targetId', `The ${fields.targetKind}'s id`)}
      ${fields.targetKind === 'service' ? input('nodeId', 'On node (empty: its placement node)') : nothing}
      ${input('cron', 'Cron (five fields, UTC)', '0 2 * * *')}
      ${input('jitterSeconds', 'Jitter (seconds, empty: 0)')}
      ${input('startingDeadlineSeconds', 'Starting deadline (seconds, empty: none)')}
      <label class="inline"><input type="checkbox" name="verify" .checked=${fields.verify}
        @change=${(event: Event) => this.setField('verify', (event.target as HTMLInputElement).checked)}> Verify each new backup</label>
      <fieldset><legend>Retention (empty: keep every backup)</legend>
        ${input('keepLast', 'Keep last')}${input('keepDaily', 'Daily')}${input('keepWeekly', 'Weekly')}${input('keepMonthly', 'Monthly')}
      </fieldset>
      ${this.formReasons.length > 0 ? html`<ul class="problems" role="alert" data-form-reasons>${this.formReasons.map((reason) => html`<li>${reason}</li>`)}</ul>` : nothing}
      <div class="dialog-buttons">
        <button type="submit" class="primary" data-action="review-schedule" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()}>Review…</button>
        ${this.editing ? html`<button type="button" data-action="cancel-edit" @click=${() => this.resetForm()}>Cancel</button>` : nothing}
      </div>
    </form>`;
  }

  private targetView(scheduleArg: IBackupSchedule): TemplateResult {
    const target = scheduleArg.target;
    const text = describeScheduleTarget(target, (idArg) => this.names[idArg] ?? idArg);
    if ('serviceId' in target) {
      return html`<a href=${`#/service/${encodeURIComponent(target.serviceId)}`}>${text}</a>`;
    }
    if ('clusterId' in target) {
      return html`<a href=${`#/cluster/${encodeURIComponent(target.clusterId)}`}>${text}</a>`;
    }
    return html`${text}`;
  }

  private planView(scheduleArg: IBackupSchedule, planArg: IRetentionView): TemplateResult {
    if (planArg.error) {
      return html`<div data-retention-plan=${scheduleArg.scheduleId}>${refusalView(planArg.error)}</div>`;
    }
    const rows = planArg.rows ?? [];
    return html`<div data-retention-plan=${scheduleArg.scheduleId}>
      <h3>Retention dry run <span class="muted">(read ${formatTime(planArg.readAt)}; nothing removed)</span></h3>
      <p data-retention-counts>${planArg.keep} kept, ${planArg.remove} would be removed.</p>
      ${rows.length === 0 ? html`<p class="muted">The schedule has made no backup yet.</p>` : html`<table class="data" aria-label=${`Retention of ${scheduleArg.scheduleId}`}>
        <thead><tr><th scope="col">Service</th><th scope="col">Backup</th><th scope="col">Taken</th><th scope="col">Would</th><th scope="col">Why</th></tr></thead>
        <tbody>${rows.map((row) => html`<tr data-retention-backup=${row.backupId} data-retention-action=${row.action}>
          <td><a href=${`#/service/${encodeURIComponent(row.serviceId)}`}><code>${row.serviceId}</code></a></td>
          <td><code>${row.backupId}</code></td>
          <td>${formatTime(row.createdAt)}</td>
          <td><span class=${`badge ${row.action === 'keep' ? 'state-converged' : 'state-refused'}`}>${row.action === 'keep' ? 'keep' : 'remove'}</span></td>
          <td>${row.reasons.map((reason) => html`<div><code>${reason}</code> <span class="muted">${describeRetentionReason(reason)}</span></div>`)}</td>
        </tr>`)}</tbody>
      </table>`}
    </div>`;
  }

  private scheduleView(scheduleArg: IBackupSchedule): TemplateResult {
    const state = scheduleStateOf(scheduleArg);
    const lastRun = describeLastRun(scheduleArg.status?.lastRun);
    const status = scheduleArg.status;
    const plan = this.plans[scheduleArg.scheduleId];
    return html`<section class="card wide" data-schedule-id=${scheduleArg.scheduleId} data-schedule-state=${state.state} aria-label=${`Backup schedule ${scheduleArg.scheduleId}`}>
      <h2><code>${scheduleArg.scheduleId}</code> <span class=${`badge ${stateBadge[state.state]}`} data-state title=${state.text}>${state.state}</span>
        ${state.state === 'disabled' ? html` <code data-disabled-reason>${status?.disabledReason}</code>` : nothing}</h2>
      <dl class="facts">
        <dt>Backs up</dt><dd>${this.targetView(scheduleArg)}</dd>
        <dt>When (UTC)</dt><dd><code data-cron>${scheduleArg.cron}</code>${scheduleArg.jitterSeconds ? html` <span class="muted">plus up to ${scheduleArg.jitterSeconds} s jitter</span>` : nothing}
          ${scheduleArg.startingDeadlineSeconds !== undefined ? html`<span class="muted">; a missed run may start up to ${scheduleArg.startingDeadlineSeconds} s late</span>` : nothing}</dd>
        <dt>Next run</dt><dd data-next-run>${status?.nextRunAt !== undefined ? formatTime(status.nextRunAt) : state.state === 'disabled' ? '— (disabled)' : '—'}</dd>
        <dt>Last run</dt><dd data-last-run=${lastRun.outcome}>${status?.lastRun ? html`${formatTime(status.lastRun.occurrenceAt)} (fired ${formatTime(status.lastRun.firedAt)}): ` : nothing}
          <span class=${`badge ${runBadge[lastRun.outcome]}`}>${lastRun.outcome}</span> ${lastRun.text}</dd>
        ${status ? html`<dt>So far</dt><dd>${status.firedOccurrences} fired, ${status.skippedServices} service(s) skipped, ${status.missedOccurrences} occurrence(s) missed</dd>` : nothing}
        <dt>Verification</dt><dd>${scheduleArg.verify ? 'each new backup is verified' : 'not verified by the schedule'}</dd>
        <dt>Retention</dt><dd data-retention>${describeRetention(scheduleArg.retention)}</dd>
      </dl>
      <div class="dialog-buttons">
        ${scheduleArg.retention ? html`<button type="button" data-action="retention-plan"
          @click=${() => void this.readPlan(scheduleArg.scheduleId)}>${plan ? 'Read the retention dry run again' : 'Retention dry run'}</button>` : nothing}
        <button type="button" data-action="edit-schedule" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()}
          @click=${() => { this.editing = scheduleArg; this.fields = scheduleFormOf(scheduleArg); this.formReasons = []; this.querySelector('[data-schedule-form]')?.scrollIntoView(); }}>Edit…</button>
        <button type="button" data-action="delete-schedule" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()}
          @click=${() => this.deleteSchedule(scheduleArg)}>Delete…</button>
      </div>
      ${plan ? this.planView(scheduleArg, plan) : nothing}
    </section>`;
  }

  protected updated(): void {
    if (this.loaded) {
      markFirstRender('backups');
    }
  }

  protected render(): TemplateResult {
    return html`<section class="page" data-page="backups" aria-labelledby="backups-title">
      <header class="page-header"><h1 id="backups-title">Backup schedules</h1></header>
      <p class="muted">Schedules order backups by themselves (docs/api/backups.md); each backup, with its verification, is listed on its service's page.</p>
      ${this.error ? refusalView(this.error) : nothing}
      ${this.formView()}
      ${this.schedules.map((schedule) => this.scheduleView(schedule))}
      ${this.loaded && this.schedules.length === 0 ? html`<p class="muted">No backup schedules.</p>` : nothing}
      <cloudly-pager label="backup schedules" .nextCursor=${this.nextCursor}
        @page=${(event: CustomEvent<{ cursor?: string }>) => { this.cursor = event.detail.cursor; void this.load(); }}></cloudly-pager>
    </section>`;
  }
}
customElements.define('cloudly-backups-page', CloudlyBackupsPage);
