import { html, nothing, type TemplateResult } from 'lit';
import type { IAuditEvent, IAuditEventFilter } from '../../../ts/interfaces/data/audit.js';
import { api } from '../api.js';
import { formatTime } from '../format.js';
import { LivePage } from '../live.js';
import { coalesce, refusalView, type CloudlyPager, markFirstRender } from '../widgets.js';

const knownKinds = ['CloudlyCluster', 'CloudlyClusterNode', 'CloudlyClusterRelayRegistration', 'CloudlyClusterIngressSlot', 'CloudlyService',
  'CloudlyServiceBackup', 'CloudlyPlatformBinding', 'CloudlyRuntimeLocalStorageClaim', 'CloudlyServiceRuntimeStatus', 'CloudlyOperation', 'CloudlyAdminUser'];

/** The audit log, newest first, filtered and paged; the first page follows new changes live. */
export class CloudlyAuditPage extends LivePage {
  static properties = {
    events: { state: true },
    nextCursor: { state: true },
    error: { state: true },
    loading: { state: true },
  };

  declare events: IAuditEvent[];
  declare nextCursor: string | undefined;
  declare error: unknown;
  declare loading: boolean;
  private filter: IAuditEventFilter = {};
  private cursor: string | undefined;
  private readonly reloadSoon = coalesce(() => void this.load(), 200);
  private serial = 0;

  constructor() {
    super();
    this.events = [];
    this.loading = true;
  }

  connectedCallback(): void {
    super.connectedCallback();
    void this.load();
  }

  private async load(): Promise<void> {
    const serial = ++this.serial;
    this.loading = true;
    try {
      const answer = await api.call('getAuditEvents', {
        limit: 50,
        ...(this.cursor ? { cursor: this.cursor } : {}),
        ...(Object.keys(this.filter).length ? { filter: this.filter } : {}),
      });
      if (serial === this.serial) {
        this.events = answer.events;
        this.nextCursor = answer.nextCursor;
        this.error = undefined;
      }
    } catch (error) {
      if (serial === this.serial) {
        this.error = error;
      }
    } finally {
      if (serial === this.serial) {
        this.loading = false;
      }
    }
  }

  protected onChange(): void {
    // New events land on the first page only (newest first).
    if (this.cursor === undefined) {
      this.reloadSoon();
    }
  }

  protected onResync(): Promise<void> {
    return this.load();
  }

  private applyFilter(formArg: HTMLFormElement): void {
    const data = new FormData(formArg);
    const filter: IAuditEventFilter = {};
    for (const key of ['targetKind', 'targetId', 'actorId', 'method'] as const) {
      const value = String(data.get(key) ?? '').trim();
      if (value) {
        filter[key] = value;
      }
    }
    for (const key of ['since', 'until'] as const) {
      const value = String(data.get(key) ?? '');
      if (value) {
        const ms = new Date(`${value}Z`).getTime();
        if (Number.isFinite(ms)) {
          filter[key] = ms;
        }
      }
    }
    this.filter = filter;
    this.cursor = undefined;
    this.querySelector<CloudlyPager>('cloudly-pager')?.reset();
    void this.load();
  }

  protected updated(): void {
    if (!this.loading && this.events.length > 0) {
      markFirstRender('audit');
    }
  }

  protected render(): TemplateResult {
    return html`<section class="page" data-page="audit" aria-labelledby="audit-title" data-loading=${this.loading ? 'true' : 'false'}>
      <header class="page-header"><h1 id="audit-title">Audit log</h1></header>
      <form class="filters" aria-label="Filter the audit log" @submit=${(event: Event) => { event.preventDefault(); this.applyFilter(event.target as HTMLFormElement); }}>
        <label>Kind <input name="targetKind" list="audit-kinds" autocomplete="off"></label>
        <datalist id="audit-kinds">${knownKinds.map((kind) => html`<option value=${kind}></option>`)}</datalist>
        <label>Target id <input name="targetId" autocomplete="off"></label>
        <label>Actor id <input name="actorId" autocomplete="off"></label>
        <label>Method <input name="method" autocomplete="off"></label>
        <label>Since (UTC) <input name="since" type="datetime-local" step="1"></label>
        <label>Until (UTC) <input name="until" type="datetime-local" step="1"></label>
        <button type="submit" class="primary" data-action="filter">Filter</button>
        <button type="button" data-action="clear-filter" @click=${(event: Event) => { const form = (event.target as HTMLElement).closest('form')!; form.reset(); this.applyFilter(form); }}>Clear</button>
      </form>
      ${this.error ? refusalView(this.error) : nothing}
      <table class="data" aria-label="Audit events">
        <thead><tr><th scope="col">When</th><th scope="col">Actor</th><th scope="col">Method</th><th scope="col">Target</th><th scope="col">Outcome</th><th scope="col">Generation</th></tr></thead>
        <tbody>${this.events.map((event) => html`<tr data-audit-method=${event.method} data-target-kind=${event.target.kind} data-target-id=${event.target.id}>
          <td>${formatTime(event.at)}</td>
          <td>${event.actor.kind} <code>${event.actor.id}</code></td>
          <td><code>${event.method}</code></td>
          <td>${event.target.kind} <code>${event.target.id}</code></td>
          <td>${event.outcome}</td>
          <td>${event.generationBefore} → ${event.generationAfter ?? 'removed'}</td>
        </tr>`)}</tbody>
      </table>
      ${!this.loading && this.events.length === 0 ? html`<p class="muted">No events match.</p>` : nothing}
      <cloudly-pager label="audit events" .nextCursor=${this.nextCursor}
        @page=${(event: CustomEvent<{ cursor?: string }>) => { this.cursor = event.detail.cursor; void this.load(); }}></cloudly-pager>
    </section>`;
  }
}
customElements.define('cloudly-audit-page', CloudlyAuditPage);
