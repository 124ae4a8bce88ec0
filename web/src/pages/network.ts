import { html, nothing, type TemplateResult } from 'lit';
import type { IRuntimeNetworkAddressPlan } from '../../../ts/interfaces/data/runtimenetworkaddressplan.js';
import type { IClusterAddressLease } from '../../../ts/interfaces/data/desiredstate.js';
import type { IChangeEvent } from '../../../ts/interfaces/requests/watch.js';
import { api } from '../api.js';
import { LivePage } from '../live.js';
import { CloudlyActionDialog, coalesce, refusalView, markFirstRender, mayChange, changeTitle, changeDescribedBy } from '../widgets.js';
import { formReasonsView } from '../forms.js';
import { addressPlanFormOf, addressPlanRequestOfForm, type IAddressPlanForm } from '../drafts.js';

/** Clusters whose leases the page reads (one page of `getClusters`). */
const leaseClusterLimit = 50;

/**
 * The runtime network's address plan: what the authority owns (prefixes), the workload pools,
 * the VPN prefixes, hubs and platform endpoints. Edited in a form (a field per member, lists one
 * entry a line), checked as typed by the contract's validator; the revision written is always the one after the plan read (Cloudly's
 * compare-and-swap token), so a plan changed meanwhile is refused `conflict`.
 */
export class CloudlyNetworkPage extends LivePage {
  static properties = {
    plan: { state: true },
    error: { state: true },
    draft: { state: true },
    leases: { state: true },
  };

  declare plan: IRuntimeNetworkAddressPlan | null;
  declare error: unknown;
  /** The form being edited; null while the editor is closed. */
  declare draft: IAddressPlanForm | null;
  /** The workload leases of the first clusters (up to `leaseClusterLimit`), with the names to show; null until read. */
  declare leases: { clusters: number; more: boolean; rows: Array<IClusterAddressLease & { clusterName: string; serviceName: string }> } | null;
  private readonly reloadSoon = coalesce(() => void this.load());
  /** Whether the first read was answered (its answer may be empty). */
  private loaded = false;

  constructor() {
    super();
    this.plan = null;
    this.draft = null;
    this.leases = null;
  }

  connectedCallback(): void {
    super.connectedCallback();
    void this.load();
  }

  private async load(): Promise<void> {
    try {
      const [{ plan }] = await Promise.all([api.call('getRuntimeNetworkAddressPlan', {}), this.loadLeases()]);
      this.plan = plan;
      this.loaded = true;
      // An answer equal to the state before (no plan, still none) re-renders nothing by itself.
      this.requestUpdate();
      this.error = undefined;
    } catch (error) {
      this.error = error;
    }
  }

  /**
   * Who holds which workload address: each cluster's leases (`getClusterRouteTableResolution`),
   * named by cluster and service. A cluster that cannot be read is left out, the rest shown.
   */
  private async loadLeases(): Promise<void> {
    const listed = await api.call('getClusters', { limit: leaseClusterLimit }).catch(() => null);
    if (!listed) {
      this.leases = null;
      return;
    }
    const { clusters, nextCursor } = listed;
    const perCluster = await Promise.all(clusters.map(async (cluster) => {
      const [resolution, services] = await Promise.all([
        api.call('getClusterRouteTableResolution', { clusterId: cluster.id }).catch(() => null),
        api.call('getServices', { clusterId: cluster.id, limit: 200 }).catch(() => null),
      ]);
      const names = new Map((services?.services ?? []).map((service) => [service.id, service.name]));
      return (resolution?.leases ?? []).map((lease) => ({ ...lease, clusterName: cluster.name, serviceName: names.get(lease.serviceId) ?? lease.serviceId }));
    }));
    this.leases = { clusters: clusters.length, more: Boolean(nextCursor), rows: perCluster.flat() };
  }

  protected onChange(changeArg: IChangeEvent): void {
    // Leases follow the plan, the nodes' confirmations and services coming and going.
    if (/addressplan|runtimenetwork/i.test(changeArg.kind) || (/^CloudlyService$|^CloudlyCluster$/.test(changeArg.kind) && changeArg.change !== 'updated')) {
      this.reloadSoon();
    }
  }

  protected onResync(): Promise<void> {
    return this.load();
  }

  private openEditor(): void {
    // The next revision is filled in: the operator edits the plan, not the token.
    this.draft = addressPlanFormOf(this.plan);
  }

  private save(): void {
    if (!this.draft) {
      return;
    }
    const draft = addressPlanRequestOfForm(this.draft);
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

  /** One field of the plan form; a list is a textarea, one entry a line. */
  private planField(nameArg: Exclude<keyof IAddressPlanForm, 'revision'>, labelArg: string, placeholderArg = '', multilineArg = false): TemplateResult {
    const id = `plan-${nameArg}`;
    const value = this.draft?.[nameArg] ?? '';
    const onInput = (event: Event) => {
      if (this.draft) {
        this.draft = { ...this.draft, [nameArg]: (event.target as HTMLInputElement).value };
      }
    };
    return html`<label for=${id}>${labelArg}</label>
      ${multilineArg
        ? html`<textarea id=${id} name=${nameArg} rows="3" spellcheck="false" placeholder=${placeholderArg} .value=${value} @input=${onInput}></textarea>`
        : html`<input id=${id} name=${nameArg} spellcheck="false" placeholder=${placeholderArg} .value=${value} @input=${onInput}>`}`;
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

  /** Every address the plan and the leases give out, with what holds it: hubs, platform endpoints, services' replicas. */
  private addressesView(): TemplateResult {
    const rows: Array<{ address: string; holder: TemplateResult; where: string; state: string }> = [
      ...(this.plan?.hubs ?? []).map((hub) => ({ address: hub.address, holder: html`VPN hub`, where: `cluster ${hub.clusterId}`, state: 'planned' })),
      ...(this.plan?.platformEndpoints ?? []).map((endpoint) => ({ address: endpoint.address, holder: html`platform endpoint <strong>${endpoint.id}</strong> (${endpoint.port}/${endpoint.protocol})`, where: 'the hosts that carry it', state: 'planned' })),
      ...(this.leases?.rows ?? []).map((lease) => ({
        address: lease.address,
        holder: html`service <a href=${`#/service/${encodeURIComponent(lease.serviceId)}`}>${lease.serviceName}</a>, replica ${lease.replica}`,
        where: `node ${lease.nodeId} of cluster ${lease.clusterName}`,
        state: lease.confirmed ? 'leased, applied by the node' : 'leased, not yet applied by the node',
      })),
    ];
    return html`<section class="card wide" aria-labelledby="addresses-title" data-addresses>
      <h2 id="addresses-title">Who holds which address (${rows.length})</h2>
      ${this.leases?.more ? html`<p class="muted">Leases of the first ${this.leases.clusters} clusters.</p>` : nothing}
      ${rows.length === 0 ? html`<p class="muted">No address is planned or leased yet.</p>` : html`<table class="data" aria-labelledby="addresses-title">
        <thead><tr><th scope="col">Address</th><th scope="col">Held by</th><th scope="col">Where</th><th scope="col">State</th></tr></thead>
        <tbody>${rows.map((row) => html`<tr data-address=${row.address}><th scope="row"><code>${row.address}</code></th><td>${row.holder}</td><td>${row.where}</td><td>${row.state}</td></tr>`)}</tbody>
      </table>`}
    </section>`;
  }

  protected updated(): void {
    if (this.loaded) {
      markFirstRender('network');
    }
  }

  protected render(): TemplateResult {
    const draft = this.draft === null ? null : addressPlanRequestOfForm(this.draft);
    const judged = draft === null ? null : { reasons: draft.ok ? [] : draft.reasons };
    return html`<section class="page" data-page="network" aria-labelledby="network-title">
      <header class="page-header"><h1 id="network-title">Address plan</h1></header>
      ${this.error ? refusalView(this.error) : nothing}
      <section class="card wide" aria-label="Current plan">
        ${this.plan ? this.planView(this.plan) : html`<p data-plan-revision="none">No address plan has been written: services that need a workload address wait.</p>`}
        ${judged && this.draft ? html`<form class="plan-form" aria-label="Edit the address plan" @submit=${(event: Event) => { event.preventDefault(); if (judged.reasons.length === 0) { this.save(); } }}>
            <p data-plan-form-revision=${this.draft.revision}>Writes revision <strong>${this.draft.revision}</strong>${this.plan ? ` (the plan read is revision ${this.plan.revision}; a change meanwhile is refused)` : ' (the first plan)'}.</p>
            <div class="form-grid">
              ${this.planField('authorityId', 'Authority id')}
              ${this.planField('prefixes', 'Prefixes the authority owns (one a line)', '192.0.2.0/24', true)}
              ${this.planField('pools', 'Workload pools (one a line: id prefix)', 'workloads 192.0.2.128/25', true)}
              ${this.planField('hubPrefix', 'VPN hub prefix', '192.0.2.0/28')}
              ${this.planField('peerPrefix', 'VPN peer prefix', '192.0.2.64/26')}
              ${this.planField('hubs', 'Hubs (one a line: cluster id, address)', 'cluster-1 192.0.2.1', true)}
              ${this.planField('platformEndpoints', 'Platform endpoints (one a line: id address:port/protocol)', 'corestore 192.0.2.17:3000/tcp', true)}
            </div>
            ${formReasonsView(judged.reasons)}
            <div class="dialog-buttons">
              <button type="submit" class="primary" data-action="review-plan" ?disabled=${judged.reasons.length > 0}>Review…</button>
              <button type="button" @click=${() => { this.draft = null; }}>Cancel</button>
            </div>
          </form>`
          : html`<button type="button" data-action="edit-plan" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()} @click=${() => this.openEditor()}>${this.plan ? 'Change the plan…' : 'Write the first plan…'}</button>`}
      </section>
      ${this.addressesView()}
    </section>`;
  }
}
customElements.define('cloudly-network-page', CloudlyNetworkPage);
