import { html, nothing, type TemplateResult } from 'lit';
import type { IRollout, IRolloutPlan } from '../../../ts/interfaces/data/rollout.js';
import type { IChangeEvent } from '../../../ts/interfaces/requests/watch.js';
import { api } from '../api.js';
import { formatTime } from '../format.js';
import { LivePage } from '../live.js';
import { CloudlyActionDialog, refusalView, markFirstRender, mayChange, changeTitle, changeDescribedBy } from '../widgets.js';
import {
  describeRolloutChange,
  endedRolloutStates,
  rolloutActions,
  rolloutIdOfChange,
  rolloutRequestOfForm,
  rolloutWaveSummaries,
  withRollout,
  type IRolloutFormFields,
  type IRolloutRequestOfForm,
  type TRolloutAction,
} from '../rollouts.js';

const pageLimit = 50;

const stateBadge = (stateArg: string): string =>
  (stateArg === 'completed' || stateArg === 'passed' || stateArg === 'converged'
    ? 'state-converged'
    : stateArg === 'halted' || stateArg === 'aborted' || stateArg === 'failed' || stateArg === 'conflict'
      ? 'state-refused'
      : 'state-converging');

/**
 * Rollouts: a new one planned first (the plan as a table: each selected cluster's service, its
 * revision now and after, the verdict Cloudly predicts, and the clusters skipped with why), then
 * created after its dry run; every rollout with its waves' progress, followed live (the watch names
 * the rollout, the page reads it again with `getRollout`), and approve / pause / resume / abort.
 */
export class CloudlyRolloutsPage extends LivePage {
  static properties = {
    rollouts: { state: true },
    nextCursor: { state: true },
    error: { state: true },
    fields: { state: true },
    formReasons: { state: true },
    plan: { state: true },
    planError: { state: true },
  };

  declare rollouts: IRollout[];
  declare nextCursor: string | undefined;
  declare error: unknown;
  declare fields: IRolloutFormFields;
  declare formReasons: string[];
  /** The plan shown for confirmation, with the request it was made for (a changed form drops it). */
  declare plan: { request: IRolloutRequestOfForm; plan: IRolloutPlan } | null;
  declare planError: unknown;
  private cursor: string | undefined;
  private loaded = false;
  /** Rollouts named by the watch since the last read; each is read again once per burst. */
  private readonly changed = new Set<string>();
  private rereadTimer: number | null = null;

  constructor() {
    super();
    this.rollouts = [];
    this.fields = { selector: '', serviceName: '', image: '', replicas: '', waves: '1, 50%, 50%', approveEachWave: false, onFailure: 'halt' };
    this.formReasons = [];
    this.plan = null;
  }

  connectedCallback(): void {
    super.connectedCallback();
    void this.load();
  }

  disconnectedCallback(): void {
    if (this.rereadTimer !== null) {
      window.clearTimeout(this.rereadTimer);
      this.rereadTimer = null;
    }
    super.disconnectedCallback();
  }

  private async load(): Promise<void> {
    try {
      const answer = await api.call('getRollouts', { limit: pageLimit, ...(this.cursor ? { cursor: this.cursor } : {}) });
      this.rollouts = answer.rollouts;
      this.nextCursor = answer.nextCursor;
      this.loaded = true;
      this.error = undefined;
      this.requestUpdate();
    } catch (error) {
      this.error = error;
    }
  }

  protected onChange(changeArg: IChangeEvent): void {
    const rolloutId = rolloutIdOfChange(changeArg);
    if (rolloutId === null) {
      return;
    }
    this.changed.add(rolloutId);
    if (this.rereadTimer === null) {
      // A wave changes many services at once: one read per rollout per burst.
      this.rereadTimer = window.setTimeout(() => { this.rereadTimer = null; void this.rereadChanged(); }, 120);
    }
  }

  private async rereadChanged(): Promise<void> {
    const ids = [...this.changed];
    this.changed.clear();
    for (const rolloutId of ids) {
      try {
        const { rollout } = await api.call('getRollout', { rolloutId });
        this.rollouts = withRollout(this.rollouts, rollout);
      } catch (error) {
        this.error = error;
      }
    }
  }

  protected onResync(): Promise<void> {
    return this.load();
  }

  private setField<K extends keyof IRolloutFormFields>(keyArg: K, valueArg: IRolloutFormFields[K]): void {
    this.fields = { ...this.fields, [keyArg]: valueArg };
    // The plan shown was for the form as it was; a changed form is planned again.
    this.plan = null;
    this.planError = undefined;
  }

  private async makePlan(): Promise<void> {
    const judged = rolloutRequestOfForm(this.fields);
    this.formReasons = judged.reasons;
    this.plan = null;
    this.planError = undefined;
    if (!judged.request) {
      return;
    }
    const request = judged.request;
    try {
      const { plan } = await api.call('planRollout', { selector: request.selector, serviceName: request.serviceName, change: request.change });
      this.plan = { request, plan };
    } catch (error) {
      this.planError = error;
    }
  }

  private create(): void {
    const { request } = this.plan!;
    CloudlyActionDialog.open({
      title: `Roll out ${describeRolloutChange(request.change)} to ${request.serviceName}`,
      intro: html`<p>Over the clusters <code>${request.selector || '(every cluster)'}</code> selects, in ${request.waves.length} wave(s); on a failure Cloudly will <strong>${request.onFailure}</strong>.</p>`,
      dryRun: () => api.call('createRollout', { ...request, dryRun: true }),
      describe: () => html`<p>Cloudly accepts this rollout.</p>`,
      run: () => api.call('createRollout', request),
      result: (answerArg) => html`<p>Rollout <code data-created-rollout>${answerArg.rollout?.id}</code> is <strong>${answerArg.rollout?.state}</strong>.</p>`,
      confirmLabel: 'Start rollout',
      onDone: (answerArg) => {
        if (answerArg.rollout) {
          this.rollouts = withRollout(this.rollouts, answerArg.rollout);
        }
        this.plan = null;
      },
    });
  }

  private act(rolloutArg: IRollout, actionArg: TRolloutAction, waveArg?: number): void {
    const base = { rolloutId: rolloutArg.id, expectedGeneration: rolloutArg.generation };
    const send = (dryRunArg: boolean) => {
      const dryRun = dryRunArg ? { dryRun: true } : {};
      switch (actionArg) {
        case 'approve':
          return api.call('approveRolloutWave', { ...base, wave: waveArg!, ...dryRun });
        case 'pause':
          return api.call('pauseRollout', { ...base, ...dryRun });
        case 'resume':
          return api.call('resumeRollout', { ...base, ...dryRun });
        case 'abort':
          // Revert on abort when the rollout was created to revert on failure.
          return api.call('abortRollout', { ...base, revert: rolloutArg.onFailure === 'revert', ...dryRun });
      }
    };
    const what: Record<TRolloutAction, string> = {
      approve: `Wave ${(waveArg ?? 0) + 1} starts changing its clusters.`,
      pause: 'No further service is changed until the rollout is resumed; services already changed keep their gate.',
      resume: 'The rollout goes on changing services from where it paused.',
      abort: rolloutArg.onFailure === 'revert'
        ? 'The rollout halts, and every service it changed goes back to its previous spec at once.'
        : 'The rollout halts; services already changed keep their new spec.',
    };
    CloudlyActionDialog.open({
      title: `${actionArg === 'approve' ? `Approve wave ${(waveArg ?? 0) + 1} of` : actionArg[0].toUpperCase() + actionArg.slice(1)} rollout ${rolloutArg.id}`,
      intro: html`<p>${what[actionArg]} Against the rollout's generation ${rolloutArg.generation}.</p>`,
      dryRun: () => send(true),
      describe: () => html`<p>Cloudly accepts it.</p>`,
      run: () => send(false),
      result: (answerArg) => html`<p>The rollout is <strong>${answerArg.rollout?.state}</strong>.</p>`,
      confirmLabel: actionArg === 'approve' ? 'Approve' : actionArg[0].toUpperCase() + actionArg.slice(1),
      onDone: (answerArg) => {
        if (answerArg.rollout) {
          this.rollouts = withRollout(this.rollouts, answerArg.rollout);
        }
      },
    });
  }

  private planView(): TemplateResult {
    const { request, plan } = this.plan!;
    return html`<section class="card wide" aria-labelledby="plan-title" data-rollout-plan>
      <h2 id="plan-title">Plan: ${describeRolloutChange(plan.change)} to <code>${plan.serviceName}</code> on <code>${plan.selector || '(every cluster)'}</code></h2>
      <table class="data" aria-label="Planned changes">
        <thead><tr><th scope="col">Cluster</th><th scope="col">Service</th><th scope="col">Spec revision</th><th scope="col">Predicted verdict</th></tr></thead>
        <tbody>${plan.targets.map((target) => html`<tr data-plan-target=${target.serviceId} data-cluster-id=${target.clusterId}>
          <td><a href=${`#/cluster/${encodeURIComponent(target.clusterId)}`}>${target.clusterName}</a></td>
          <td><a href=${`#/service/${encodeURIComponent(target.serviceId)}`}><code>${target.serviceId}</code></a></td>
          <td>${target.specRevision} → ${target.newSpecRevision}</td>
          <td><span class=${`badge ${stateBadge(target.predicted.state)}`} data-predicted=${target.predicted.state}>${target.predicted.state}</span>${target.predicted.reason ? html` <code>${target.predicted.reason}</code>` : nothing}</td>
        </tr>`)}</tbody>
      </table>
      ${plan.targets.length === 0 ? html`<p class="muted">No service would change.</p>` : nothing}
      ${plan.skipped.length > 0 ? html`<h3>Skipped</h3>
        <table class="data" aria-label="Skipped clusters">
          <thead><tr><th scope="col">Cluster</th><th scope="col">Why</th></tr></thead>
          <tbody>${plan.skipped.map((skip) => html`<tr data-plan-skipped=${skip.clusterId}>
            <td>${skip.clusterName}</td><td><code>${skip.reason}</code>${skip.causes?.length ? html` <span class="muted">${skip.causes.join('; ')}</span>` : nothing}</td></tr>`)}</tbody>
        </table>` : nothing}
      <p>Waves: ${request.waves.map((wave) => `${wave.clusters ?? `${wave.percent}%`}${wave.requiresApproval ? ' (approval)' : ''}`).join(', ')}; on a failure: ${request.onFailure}.</p>
      <div class="dialog-buttons">
        <button type="button" class="primary" data-action="create-rollout" ?disabled=${!mayChange() || plan.targets.length === 0}
          title=${changeTitle()} aria-describedby=${changeDescribedBy()} @click=${() => this.create()}>Start rollout…</button>
        <button type="button" @click=${() => { this.plan = null; }}>Discard plan</button>
      </div>
    </section>`;
  }

  private formView(): TemplateResult {
    const fields = this.fields;
    const input = (keyArg: 'selector' | 'serviceName' | 'image' | 'replicas' | 'waves', labelArg: string, placeholderArg: string) => html`
      <label for=${`rollout-${keyArg}`}>${labelArg}</label>
      <input id=${`rollout-${keyArg}`} name=${keyArg} .value=${fields[keyArg]} placeholder=${placeholderArg}
        @input=${(event: Event) => this.setField(keyArg, (event.target as HTMLInputElement).value)}>`;
    return html`<form class="card wide" aria-label="Plan a rollout" data-rollout-form @submit=${(event: Event) => { event.preventDefault(); void this.makePlan(); }}>
      <h2>New rollout</h2>
      ${input('selector', 'Clusters (label selector)', 'env=prod,tier in (a,b)')}
      ${input('serviceName', 'Service name', 'web')}
      ${input('image', 'New image', 'registry.example.com/app:2')}
      ${input('replicas', 'New replica count', '')}
      ${input('waves', 'Waves (cluster counts or percentages; the first is the canary)', '1, 50%, 50%')}
      <label class="inline"><input type="checkbox" name="approveEachWave" .checked=${fields.approveEachWave}
        @change=${(event: Event) => this.setField('approveEachWave', (event.target as HTMLInputElement).checked)}> Each wave after the canary waits for approval</label>
      <label class="inline">On a failure
        <select name="onFailure" @change=${(event: Event) => this.setField('onFailure', (event.target as HTMLSelectElement).value === 'revert' ? 'revert' : 'halt')}>
          <option value="halt" ?selected=${fields.onFailure === 'halt'}>halt</option>
          <option value="revert" ?selected=${fields.onFailure === 'revert'}>revert</option>
        </select></label>
      ${this.formReasons.length > 0 ? html`<ul class="problems" role="alert" data-form-reasons>${this.formReasons.map((reason) => html`<li>${reason}</li>`)}</ul>` : nothing}
      <div class="dialog-buttons"><button type="submit" data-action="plan-rollout">Plan</button></div>
      ${this.planError ? refusalView(this.planError) : nothing}
    </form>`;
  }

  private rolloutView(rolloutArg: IRollout): TemplateResult {
    const ended = endedRolloutStates.includes(rolloutArg.state);
    return html`<section class="card wide" data-rollout-id=${rolloutArg.id} data-rollout-state=${rolloutArg.state} aria-label=${`Rollout ${rolloutArg.id}`}>
      <h2><code>${rolloutArg.id}</code>: ${describeRolloutChange(rolloutArg.change)} to <code>${rolloutArg.serviceName}</code>
        <span class=${`badge ${stateBadge(rolloutArg.state)}`} data-state>${rolloutArg.state}</span>${rolloutArg.paused && !ended ? html` <span class="badge" data-paused>paused</span>` : nothing}</h2>
      <p class="muted">Selector <code>${rolloutArg.selector || '(every cluster)'}</code>; on a failure ${rolloutArg.onFailure}; ${rolloutArg.failures} failure(s) of ${rolloutArg.gate.maxFailures} allowed; started ${formatTime(rolloutArg.createdAt)}${rolloutArg.endedAt ? html`, ended ${formatTime(rolloutArg.endedAt)}` : nothing}.</p>
      <table class="data" aria-label=${`Waves of rollout ${rolloutArg.id}`}>
        <thead><tr><th scope="col">Wave</th><th scope="col">State</th><th scope="col">Services</th><th scope="col">Progress</th><th scope="col">Failures</th></tr></thead>
        <tbody>${rolloutWaveSummaries(rolloutArg).map((wave) => html`<tr data-wave=${wave.index} data-wave-state=${wave.state}>
          <td>${wave.index === 0 ? 'canary' : `wave ${wave.index + 1}`}${wave.requiresApproval ? html` <span class="muted">(approval)</span>` : nothing}</td>
          <td><span class=${`badge ${stateBadge(wave.state)}`}>${wave.state}</span></td>
          <td>${wave.total}</td>
          <td data-wave-counts>${Object.entries(wave.counts).map(([state, count]) => `${count} ${state}`).join(', ') || '—'}
            ${wave.total > 0 ? html`<progress max=${wave.total} .value=${wave.counts.converged ?? 0}></progress>` : nothing}</td>
          <td>${wave.failures.map((failure) => html`<div data-failure=${failure.serviceId}>${failure.clusterName}: ${failure.state}${failure.reason ? html` <code>${failure.reason}</code>` : nothing}</div>`)}</td>
        </tr>`)}</tbody>
      </table>
      ${rolloutArg.skipped.length > 0 ? html`<p class="muted" data-skipped>Skipped: ${rolloutArg.skipped.map((skip) => `${skip.clusterName} (${skip.reason})`).join(', ')}</p>` : nothing}
      <div class="dialog-buttons">${rolloutActions(rolloutArg).map(({ action, wave }) => html`<button type="button" data-action=${`${action}-rollout`}
          ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()} @click=${() => this.act(rolloutArg, action, wave)}>${
          action === 'approve' ? `Approve wave ${(wave ?? 0) + 1}…` : `${action[0].toUpperCase()}${action.slice(1)}…`}</button>`)}</div>
    </section>`;
  }

  protected updated(): void {
    if (this.loaded) {
      markFirstRender('rollouts');
    }
  }

  protected render(): TemplateResult {
    return html`<section class="page" data-page="rollouts" aria-labelledby="rollouts-title">
      <header class="page-header"><h1 id="rollouts-title">Rollouts</h1></header>
      ${this.error ? refusalView(this.error) : nothing}
      ${this.formView()}
      ${this.plan ? this.planView() : nothing}
      ${this.rollouts.map((rollout) => this.rolloutView(rollout))}
      ${this.loaded && this.rollouts.length === 0 ? html`<p class="muted">No rollouts.</p>` : nothing}
      <cloudly-pager label="rollouts" .nextCursor=${this.nextCursor}
        @page=${(event: CustomEvent<{ cursor?: string }>) => { this.cursor = event.detail.cursor; void this.load(); }}></cloudly-pager>
    </section>`;
  }
}
customElements.define('cloudly-rollouts-page', CloudlyRolloutsPage);
