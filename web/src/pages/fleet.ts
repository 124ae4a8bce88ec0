import { html, nothing, type TemplateResult } from 'lit';
import { relayTokenUsage } from '../secret.js';
import type { ICluster } from '../../../ts/interfaces/data/cluster.js';
import type { IClusterOverview, IFleetClusterSummary } from '../../../ts/interfaces/requests/overview.js';
import type { IChangeEvent } from '../../../ts/interfaces/requests/watch.js';
import { api, ApiError } from '../api.js';
import { LivePage, clusterOfChange } from '../live.js';
import { CloudlyActionDialog, coalesce, refusalView, type CloudlyPager, mayChange, changeTitle, changeDescribedBy } from '../widgets.js';
import { validateClusterName } from '../../../ts/interfaces/data/cluster.js';
import { methodNotServedReason } from '../../../ts/interfaces/data/refusal.js';
import { describeDryRun, formReasonsView } from '../forms.js';
import { labelsText, selectorReasons } from '../rollouts.js';

export type TRelayState = 'connected' | 'unregistered' | 'missing';
// `unknown`: the cluster is not current (its relay gone past the grace, or its reports stale), whatever the last verdict said.
export const runtimeStates = ['converged', 'converging', 'waiting', 'refused', 'unjudged', 'unknown'] as const;
export type TRuntimeCount = Record<(typeof runtimeStates)[number], number>;

export interface IFleetRow {
  cluster: ICluster;
  relay: TRelayState | null;
  nodes: number | null;
  services: TRuntimeCount | null;
  /** Backups that need attention: running and failed. */
  backups: { running: number; failed: number } | null;
  error?: unknown;
}

export const relayStateOf = (relayArg: IClusterOverview['relay']): TRelayState => {
  if (!relayArg.connected && relayArg.socketsOpenHere.length === 0) {
    return 'missing';
  }
  return relayArg.registration ? 'connected' : 'unregistered';
};

export const relayStateText: Record<TRelayState, string> = {
  connected: 'connected',
  unregistered: 'connected, unregistered',
  missing: 'missing',
};

const countServices = (overviewArg: IClusterOverview): TRuntimeCount => {
  const counts: TRuntimeCount = { converged: 0, converging: 0, waiting: 0, refused: 0, unjudged: 0, unknown: 0 };
  for (const entry of overviewArg.services) {
    counts[entry.unknown ? 'unknown' : entry.runtimeStatus ? entry.runtimeStatus.state : 'unjudged'] += 1;
  }
  return counts;
};

const isFleetSummary = (valueArg: unknown): valueArg is IFleetClusterSummary => {
  const value = valueArg as Partial<IFleetClusterSummary> | null;
  return !!value && typeof value.cluster?.id === 'string' && typeof value.relay?.state === 'string'
    && typeof value.nodeCount === 'number' && typeof value.services?.byRuntimeState === 'object' && typeof value.backups?.running === 'number';
};

const rowOfSummary = (summaryArg: IFleetClusterSummary): IFleetRow => ({
  cluster: summaryArg.cluster,
  relay: summaryArg.relay.state,
  nodes: summaryArg.nodeCount,
  services: { ...summaryArg.services.byRuntimeState, unknown: summaryArg.services.byRuntimeState.unknown ?? 0 },
  backups: { ...summaryArg.backups },
});

const rowOfOverview = (overviewArg: IClusterOverview): IFleetRow => {
  const backups = { running: 0, failed: 0 };
  for (const entry of overviewArg.services) {
    const state = (entry.latestBackup as { state?: string } | null)?.state;
    if (state === 'running' || state === 'failed') {
      backups[state] += 1;
    }
  }
  return {
    cluster: overviewArg.cluster,
    relay: relayStateOf(overviewArg.relay),
    nodes: overviewArg.nodes.length,
    services: countServices(overviewArg),
    backups,
  };
};

/** Overviews fetched side by side, a few at a time. */
const overviewConcurrency = 6;

/**
 * The fleet: one page of clusters with relay state, node count, services by runtime state and
 * backups running or failed. Uses `getFleetOverview` (one call per page) when Cloudly serves it; otherwise the page is assembled from
 * `getClusters` (paged) and one `getClusterOverview` per cluster on the page, rows filled in as
 * they arrive.
 */
export class CloudlyFleetPage extends LivePage {
  static properties = {
    rows: { state: true },
    error: { state: true },
    loading: { state: true },
    nextCursor: { state: true },
    pageSize: { state: true },
    newClusterName: { state: true },
    selector: { state: true },
    selectorInput: { state: true },
  };

  declare rows: IFleetRow[];
  declare error: unknown;
  declare loading: boolean;
  declare nextCursor: string | undefined;
  declare pageSize: number;
  /** The name typed into "New cluster"; null while the form is closed. */
  declare newClusterName: string | null;
  /** The label selector the list is filtered by (applied), and the one being typed. */
  declare selector: string;
  declare selectorInput: string;
  private cursor: string | undefined = undefined;
  private static fleetOverviewServed: boolean | null = null;
  private loadSerial = 0;
  private readonly dirtyClusters = new Set<string>();
  private readonly refreshDirty = coalesce(() => void this.refreshClusters());
  private readonly reloadSoon = coalesce(() => void this.load());

  constructor() {
    super();
    this.rows = [];
    this.loading = true;
    this.pageSize = 50;
    this.newClusterName = null;
    this.selector = '';
    this.selectorInput = '';
  }

  /** Creates a cluster after its dry run; its relay token is shown once, with a Copy button. */
  private createCluster(): void {
    const name = this.newClusterName ?? '';
    CloudlyActionDialog.open({
      title: `Create cluster ${name}`,
      intro: html`<p>A new cluster named <strong>${name}</strong>. Its relay token is shown once, after creation: copy it to the relay.</p>`,
      dryRun: () => api.call('createCluster', { name, dryRun: true }),
      describe: (answerArg) => describeDryRun(answerArg),
      run: () => api.call('createCluster', { name }),
      result: (answerArg) => html`<p>Cluster <a href=${`#/cluster/${encodeURIComponent(answerArg.cluster?.id ?? '')}`} data-created-cluster=${answerArg.cluster?.id ?? ''}>${answerArg.cluster?.name}</a> created.</p>
        <cloudly-one-time-secret .secret=${answerArg.relayToken ?? ''} label="Relay token"></cloudly-one-time-secret>
        ${answerArg.relayToken ? relayTokenUsage(answerArg.relayToken) : nothing}`,
      confirmLabel: 'Create cluster',
      onDone: () => {
        this.newClusterName = null;
        void this.load();
      },
    });
  }

  private newClusterView(): TemplateResult {
    if (this.newClusterName === null) {
      return html`<button type="button" data-action="new-cluster" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()} @click=${() => { this.newClusterName = ''; }}>New cluster…</button>`;
    }
    const reasons = this.newClusterName === '' ? [] : validateClusterName(this.newClusterName);
    return html`<form class="inline-form" aria-label="New cluster" @submit=${(event: Event) => { event.preventDefault(); if (this.newClusterName && reasons.length === 0) { this.createCluster(); } }}>
      <label for="new-cluster-name">Cluster name</label>
      <input id="new-cluster-name" name="name" .value=${this.newClusterName} @input=${(event: Event) => { this.newClusterName = (event.target as HTMLInputElement).value; }}>
      <button type="submit" class="primary" data-action="create-cluster" ?disabled=${this.newClusterName === '' || reasons.length > 0}>Review…</button>
      <button type="button" @click=${() => { this.newClusterName = null; }}>Cancel</button>
      ${formReasonsView(reasons)}
    </form>`;
  }

  connectedCallback(): void {
    super.connectedCallback();
    void this.load();
  }

  private async load(): Promise<void> {
    const serial = ++this.loadSerial;
    this.loading = true;
    try {
      if (CloudlyFleetPage.fleetOverviewServed !== false) {
        try {
          const answer = await api.call('getFleetOverview', { limit: this.pageSize, ...this.selection() });
          if (!Array.isArray(answer.clusters) || !answer.clusters.every(isFleetSummary)) {
            // An answer of another shape than the one this page was written for: assemble it instead.
            throw new ApiError('getFleetOverview', 'invalid-request', 'unexpected answer', [methodNotServedReason], null);
          }
          CloudlyFleetPage.fleetOverviewServed = true;
          if (serial === this.loadSerial) {
            this.rows = answer.clusters.map((entry) => rowOfSummary(entry));
            this.nextCursor = answer.nextCursor;
            this.error = undefined;
          }
          return;
        } catch (error) {
          if (!(error instanceof ApiError) || !error.notServed) {
            throw error;
          }
          CloudlyFleetPage.fleetOverviewServed = false;
        }
      }
      const answer = await api.call('getClusters', { limit: this.pageSize, ...this.selection() });
      if (serial !== this.loadSerial) {
        return;
      }
      this.rows = answer.clusters.map((cluster) => ({ cluster, relay: null, nodes: null, services: null, backups: null }));
      this.nextCursor = answer.nextCursor;
      this.error = undefined;
      this.loading = false;
      await this.fillOverviews(answer.clusters.map((cluster) => cluster.id), serial);
    } catch (error) {
      if (serial === this.loadSerial) {
        this.error = error;
      }
    } finally {
      if (serial === this.loadSerial) {
        this.loading = false;
      }
    }
  }

  private async fillOverviews(clusterIdsArg: string[], serialArg: number): Promise<void> {
    const queue = [...clusterIdsArg];
    const worker = async () => {
      for (let clusterId = queue.shift(); clusterId !== undefined; clusterId = queue.shift()) {
        let row: IFleetRow | null = null;
        try {
          const { overview } = await api.call('getClusterOverview', { clusterId });
          row = rowOfOverview(overview);
        } catch (error) {
          const existing = this.rows.find((entry) => entry.cluster.id === clusterId);
          if (existing) {
            row = { ...existing, error };
          }
        }
        if (serialArg !== this.loadSerial || !row) {
          return;
        }
        this.rows = this.rows.map((entry) => (entry.cluster.id === clusterId ? row! : entry));
      }
    };
    await Promise.all(Array.from({ length: overviewConcurrency }, () => worker()));
  }

  private async refreshClusters(): Promise<void> {
    const ids = [...this.dirtyClusters].filter((id) => this.rows.some((row) => row.cluster.id === id));
    this.dirtyClusters.clear();
    if (CloudlyFleetPage.fleetOverviewServed) {
      await this.load();
      return;
    }
    await this.fillOverviews(ids, this.loadSerial);
  }

  private marked = { rendered: false, filled: false };

  /** User Timing marks of the first render and of every row filled (read by bench/dashboard.bench.ts). */
  protected updated(): void {
    if (!this.marked.rendered && this.rows.length > 0) {
      this.marked.rendered = true;
      performance.mark('cloudly:fleet-first-render');
    }
    if (!this.marked.filled && this.rows.length > 0 && this.rows.every((row) => row.relay !== null || row.error)) {
      this.marked.filled = true;
      performance.mark('cloudly:fleet-filled');
    }
  }

  protected onChange(changeArg: IChangeEvent): void {
    if (changeArg.kind === 'CloudlyCluster' && changeArg.change !== 'updated') {
      this.reloadSoon();
      return;
    }
    const clusterId = clusterOfChange(changeArg);
    if (clusterId === null) {
      return;
    }
    if (this.rows.some((row) => row.cluster.id === clusterId)) {
      this.dirtyClusters.add(clusterId);
      this.refreshDirty();
    }
  }

  protected onResync(): Promise<void> {
    return this.load();
  }

  private onPage(eventArg: CustomEvent<{ cursor: string | undefined }>): void {
    this.cursor = eventArg.detail.cursor;
    void this.load();
  }

  /** The cursor and the label selector of the list's request (absent when none). */
  private selection(): { cursor?: string; selector?: string } {
    return { ...(this.cursor ? { cursor: this.cursor } : {}), ...(this.selector ? { selector: this.selector } : {}) };
  }

  private applySelector(): void {
    if (selectorReasons(this.selectorInput).length > 0) {
      return;
    }
    this.selector = this.selectorInput.trim();
    this.cursor = undefined;
    this.querySelector<CloudlyPager>('cloudly-pager')?.reset();
    void this.load();
  }

  private selectorView(): TemplateResult {
    const reasons = selectorReasons(this.selectorInput);
    return html`<form class="inline-form" aria-label="Filter by labels" data-selector-form @submit=${(event: Event) => { event.preventDefault(); this.applySelector(); }}>
      <label for="fleet-selector">Labels</label>
      <input id="fleet-selector" name="selector" placeholder="env=prod,tier in (a,b)" .value=${this.selectorInput}
        @input=${(event: Event) => { this.selectorInput = (event.target as HTMLInputElement).value; }}>
      <button type="submit" data-action="filter-clusters" ?disabled=${reasons.length > 0}>Filter</button>
      ${this.selector ? html`<span class="muted" data-applied-selector>showing <code>${this.selector}</code></span>` : nothing}
      ${formReasonsView(reasons)}
    </form>`;
  }

  private onPageSize(eventArg: Event): void {
    this.pageSize = Number((eventArg.target as HTMLSelectElement).value);
    this.cursor = undefined;
    this.querySelector<CloudlyPager>('cloudly-pager')?.reset();
    void this.load();
  }

  private summary(): TemplateResult {
    const relay = { connected: 0, unregistered: 0, missing: 0 };
    const services: TRuntimeCount = { converged: 0, converging: 0, waiting: 0, refused: 0, unjudged: 0, unknown: 0 };
    for (const row of this.rows) {
      if (row.relay) {
        relay[row.relay] += 1;
      }
      for (const state of runtimeStates) {
        services[state] += row.services?.[state] ?? 0;
      }
    }
    return html`<dl class="summary" aria-label="Totals on this page">
      <div><dt>Clusters on this page</dt><dd data-summary="clusters">${this.rows.length}</dd></div>
      <div><dt>Relay connected</dt><dd data-summary="relay-connected">${relay.connected}</dd></div>
      <div><dt>Connected, unregistered</dt><dd data-summary="relay-unregistered">${relay.unregistered}</dd></div>
      <div><dt>Relay missing</dt><dd data-summary="relay-missing">${relay.missing}</dd></div>
      ${runtimeStates.map((state) => html`<div><dt>Services ${state}</dt><dd data-summary=${`services-${state}`}>${services[state]}</dd></div>`)}
    </dl>`;
  }

  private row(rowArg: IFleetRow): TemplateResult {
    const services = rowArg.services;
    return html`<tr data-cluster-id=${rowArg.cluster.id}>
      <th scope="row"><a href=${`#/cluster/${encodeURIComponent(rowArg.cluster.id)}`}>${rowArg.cluster.name}</a>${rowArg.cluster.labels ? html`<br><span class="muted" data-labels>${labelsText(rowArg.cluster.labels)}</span>` : nothing}</th>
      <td class="relay" data-relay=${rowArg.relay ?? 'loading'}>
        ${rowArg.relay ? html`<span class=${`badge relay-${rowArg.relay}`}>${relayStateText[rowArg.relay]}</span>` : rowArg.error ? html`<span class="badge bad">unreadable</span>` : html`<span class="muted">…</span>`}
      </td>
      <td class="num">${rowArg.nodes ?? '…'}</td>
      ${runtimeStates.map((state) => html`<td class=${`num state-${state}`}>${services ? services[state] : '…'}</td>`)}
      <td class="backups">${rowArg.backups === null ? '…' : rowArg.backups.running + rowArg.backups.failed === 0
        ? html`<span class="muted">none</span>`
        : html`${rowArg.backups.running ? html`<span class="badge state-converging">${rowArg.backups.running} running</span> ` : nothing}${rowArg.backups.failed ? html`<span class="badge state-refused">${rowArg.backups.failed} failed</span>` : nothing}`}</td>
    </tr>`;
  }

  protected render(): TemplateResult {
    return html`<section aria-labelledby="fleet-title" class="page" data-page="fleet" data-loading=${this.loading ? 'true' : 'false'}>
      <header class="page-header">
        <h1 id="fleet-title">Fleet</h1>
        ${this.newClusterView()}
        <label class="inline">Clusters per page
          <select @change=${(event: Event) => this.onPageSize(event)} .value=${String(this.pageSize)}>
            ${[25, 50, 100, 200].map((size) => html`<option value=${size} ?selected=${size === this.pageSize}>${size}</option>`)}
          </select>
        </label>
      </header>
      ${this.selectorView()}
      ${this.error ? refusalView(this.error) : nothing}
      ${this.summary()}
      <table class="data" aria-label="Clusters">
        <thead><tr>
          <th scope="col">Cluster</th><th scope="col">Relay</th><th scope="col">Nodes</th>
          ${runtimeStates.map((state) => html`<th scope="col">${state}</th>`)}
          <th scope="col">Backups needing attention</th>
        </tr></thead>
        <tbody>
          ${this.rows.map((row) => this.row(row))}
          ${!this.loading && this.rows.length === 0 ? html`<tr><td colspan="10" class="muted">No clusters.</td></tr>` : nothing}
        </tbody>
      </table>
      <cloudly-pager label="clusters" .nextCursor=${this.nextCursor} @page=${(event: CustomEvent) => this.onPage(event)}></cloudly-pager>
    </section>`;
  }
}
customElements.define('cloudly-fleet-page', CloudlyFleetPage);
