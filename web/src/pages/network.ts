import { html, nothing, type TemplateResult } from 'lit';
import type { IRuntimeNetworkAddressPlan } from '../../../ts/interfaces/data/runtimenetworkaddressplan.js';
import type { IChangeEvent } from '../../../ts/interfaces/requests/watch.js';
import { api } from '../api.js';
import { LivePage } from '../live.js';
import { CloudlyActionDialog, coalesce, refusalView, markFirstRender, mayChange, changeTitle, changeDescribedBy } from '../widgets.js';
import { formReasonsView } from '../forms.js';
import { addressPlanRequestOfDraft } from '../drafts.js';

/** The plan an authority without one starts from in the editor: every member present, nothing assumed. */
const skeletonPlan = (): IRuntimeNetworkAddressPlan => ({
  authorityId: 'authority-1',
  revision: 1,
  prefixes: [],
  pools: [],
  vpn: { hubPrefix: '', peerPrefix: '' },
  hubs: [],
  platformEndpoints: [],
});

/**
 * The runtime network's address plan: what the authority owns (prefixes), the workload pools,
 * the VPN prefixes, hubs and platform endpoints. Edited as JSON, checked as typed by the
 * contract's validator; the revision written is always the one after the plan read (Cloudly's
 * compare-and-swap token), so a plan changed meanwhile is refused `conflict`.
 */
export class CloudlyNetworkPage extends LivePage {
  static properties = {
    plan: { state: true },
    error: { state: true },
    draft: { state: true },
  };

  declare plan: IRuntimeNetworkAddressPlan | null;
  declare error: unknown;
  /** The JSON being edited; null while the editor is closed. */
  declare draft: string | null;
  private readonly reloadSoon = coalesce(() => void this.load());
  /** Whether the first read was answered (its answer may be empty). */
  private loaded = false;

  constructor() {
    super();
    this.plan = null;
    this.draft = null;
  }

  connectedCallback(): void {
    super.connectedCallback();
    void this.load();
  }

  private async load(): Promise<void> {
    try {
      this.plan = (await api.call('getRuntimeNetworkAddressPlan', {})).plan;
      this.loaded = true;
      // An answer equal to the state before (no plan, still none) re-renders nothing by itself.
      this.requestUpdate();
      this.error = undefined;
    } catch (error) {
      this.error = error;
    }
  }

  protected onChange(changeArg: IChangeEvent): void {
    if (/addressplan|runtimenetwork/i.test(changeArg.kind)) {
      this.reloadSoon();
    }
  }

  protected onResync(): Promise<void> {
    return this.load();
  }

  private openEditor(): void {
    // The next revision is filled in: the operator edits the plan, not the token.
    const base = this.plan ? { ...this.plan, revision: this.plan.revision + 1 } : skeletonPlan();
    this.draft = JSON.stringify(base, null, 2);
  }

  private save(): void {
    const draft = addressPlanRequestOfDraft(this.draft ?? '');
    if (!draft.ok) {
      return;
    }
    const request = draft.request;
    const revision = request.plan.revision;
    CloudlyActionDialog.open({
      title: `Write address plan revision ${revision}`,
      intro: html`<p>${this.plan ? `Replaces revision ${this.plan.revision}.` : 'The first plan of this authority.'} Cloudly refuses a plan that takes away an address still leased.</p>`,
      dryRun: () => api.call('setRuntimeNetworkAddressPlan', { ...request, dryRun: true }),
      describe: (answerArg) => html`<p>Cloudly would admit revision <strong>${answerArg.plan?.revision ?? revision}</strong>${answerArg.replayed ? ' (the same plan as stored)' : ''}.</p>`,
      change: () => ({ before: this.plan ?? undefined, after: request.plan }),
      run: () => api.call('setRuntimeNetworkAddressPlan', request),
      result: (answerArg) => html`<p>Revision ${answerArg.plan?.revision} stored.</p>`,
      confirmLabel: 'Write plan',
      onDone: () => {
        this.draft = null;
        void this.load();
      },
    });
  }

  private planView(planArg: IRuntimeNetworkAddressPlan): TemplateResult {
    return html`<dl class="facts" data-plan-revision=${planArg.revision}>
      <div><dt>Authority</dt><dd><code>${planArg.authorityId}</code>, revision ${planArg.revision}</dd></div>
      <div><dt>Prefixes</dt><dd>${planArg.prefixes.join(', ') || 'none'}</dd></div>
      <div><dt>Workload pools</dt><dd>${planArg.pools.length ? planArg.pools.map((pool) => `${pool.id} ${pool.prefix}`).join(', ') : 'none'}</dd></div>
      <div><dt>VPN</dt><dd>hubs ${planArg.vpn.hubPrefix}, peers ${planArg.vpn.peerPrefix}</dd></div>
      <div><dt>Hubs</dt><dd>${planArg.hubs.length ? planArg.hubs.map((hub) => `${hub.clusterId} at ${hub.address}`).join(', ') : 'none'}</dd></div>
      <div><dt>Platform endpoints</dt><dd>${planArg.platformEndpoints.length ? planArg.platformEndpoints.map((endpoint) => `${endpoint.id} ${endpoint.address}:${endpoint.port}/${endpoint.protocol}`).join(', ') : 'none'}</dd></div>
    </dl>`;
  }

  protected updated(): void {
    if (this.loaded) {
      markFirstRender('network');
    }
  }

  protected render(): TemplateResult {
    const draft = this.draft === null ? null : addressPlanRequestOfDraft(this.draft);
    const judged = draft === null ? null : { reasons: draft.ok ? [] : draft.reasons };
    return html`<section class="page" data-page="network" aria-labelledby="network-title">
      <header class="page-header"><h1 id="network-title">Address plan</h1></header>
      ${this.error ? refusalView(this.error) : nothing}
      <section class="card wide" aria-label="Current plan">
        ${this.plan ? this.planView(this.plan) : html`<p data-plan-revision="none">No address plan has been written: services that need a workload address wait.</p>`}
        ${judged ? html`<form aria-label="Edit the address plan" @submit=${(event: Event) => { event.preventDefault(); if (judged.reasons.length === 0) { this.save(); } }}>
            <label for="plan-json">Plan (JSON; the revision is the next one)</label>
            <textarea id="plan-json" rows="18" spellcheck="false" .value=${this.draft ?? ''} @input=${(event: Event) => { this.draft = (event.target as HTMLTextAreaElement).value; }}></textarea>
            ${formReasonsView(judged.reasons)}
            <div class="dialog-buttons">
              <button type="submit" class="primary" data-action="review-plan" ?disabled=${judged.reasons.length > 0}>Review…</button>
              <button type="button" @click=${() => { this.draft = null; }}>Cancel</button>
            </div>
          </form>`
          : html`<button type="button" data-action="edit-plan" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()} @click=${() => this.openEditor()}>${this.plan ? 'Change the plan…' : 'Write the first plan…'}</button>`}
      </section>
    </section>`;
  }
}
customElements.define('cloudly-network-page', CloudlyNetworkPage);
