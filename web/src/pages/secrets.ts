import { html, nothing, type TemplateResult } from 'lit';
import type { ICluster } from '../../../ts/interfaces/data/cluster.js';
import type { ISecretGroup, ISecretVersionMetadata, ISecretVersionWritable } from '../../../ts/interfaces/data/secret.js';
import type { IChangeEvent } from '../../../ts/interfaces/requests/watch.js';
import { sealSecretVersionCopies } from '../../../ts/client/secrets.js';
import { api } from '../api.js';
import { formatTime } from '../format.js';
import { LivePage } from '../live.js';
import { CloudlyActionDialog, refusalView, markFirstRender, mayChange, changeTitle, changeDescribedBy, coalesce } from '../widgets.js';
import {
  clustersNeedingReseal,
  describeSealState,
  isSecretsChange,
  secretGroupRequestOfForm,
  secretValueBytesOf,
  versionsNeedingReseal,
  withSecretGroup,
  type ISecretGroupFormFields,
} from '../secrets.js';

const pageLimit = 50;
const clusterLimit = 200;

const sealBadge: Record<string, string> = { sealed: 'state-converged', 'reseal-required': 'state-waiting', 'recipient-gone': 'state-refused' };

/**
 * Whether this browser can seal here: WebCrypto's `subtle` exists only in a secure context
 * (https, or http on localhost), and the value must never travel unsealed instead.
 */
const sealingUnavailable = (): string | null =>
  (globalThis.crypto?.subtle === undefined
    ? 'This page is not a secure context (https, or http on localhost), so the browser offers no WebCrypto: values cannot be sealed here. Open the dashboard over https, or use `cloudly secrets set`.'
    : null);

/** Which value form is open: a new version of a group, or the re-seal of one version. */
interface IValueForm {
  groupId: string;
  reseal: string | null;
  reason: string | null;
}

/**
 * Secret groups (docs/secrets.md, section 7): metadata only — versions, and per cluster whether
 * each copy is sealed to its current recipient. A value is typed here, sealed in this browser to
 * every cluster's enrolled recipient (`sealSecretVersionCopies` of ts/client/secrets.ts, the CLI's
 * own code) and only the sealed copies are sent: Cloudly cannot read it, and neither can this page
 * once the dialog closes (the typed text is cleared and the bytes wiped after sealing).
 */
export class CloudlySecretsPage extends LivePage {
  static properties = {
    groups: { state: true },
    nextCursor: { state: true },
    clusters: { state: true },
    error: { state: true },
    fields: { state: true },
    formReasons: { state: true },
    valueForm: { state: true },
  };

  declare groups: ISecretGroup[];
  declare nextCursor: string | undefined;
  declare clusters: ICluster[];
  declare error: unknown;
  declare fields: ISecretGroupFormFields;
  declare formReasons: string[];
  declare valueForm: IValueForm | null;
  private cursor: string | undefined;
  private loaded = false;
  private readonly reread = coalesce(() => void this.load());

  constructor() {
    super();
    this.groups = [];
    this.clusters = [];
    this.fields = { key: '', environment: '', tags: '', clusterIds: [], retainedVersions: '' };
    this.formReasons = [];
    this.valueForm = null;
  }

  connectedCallback(): void {
    super.connectedCallback();
    void this.load();
    void this.loadClusters();
  }

  private async load(): Promise<void> {
    try {
      const answer = await api.call('getSecretGroups', { limit: pageLimit, ...(this.cursor ? { cursor: this.cursor } : {}) });
      this.groups = answer.groups;
      this.nextCursor = answer.nextCursor;
      this.loaded = true;
      this.error = undefined;
    } catch (error) {
      this.error = error;
    }
  }

  private async loadClusters(): Promise<void> {
    const answer = await api.call('getClusters', { limit: clusterLimit }).catch(() => null);
    if (answer) {
      this.clusters = answer.clusters;
    }
  }

  protected onChange(changeArg: IChangeEvent): void {
    if (isSecretsChange(changeArg)) {
      this.reread();
    }
  }

  protected async onResync(): Promise<void> {
    await Promise.all([this.load(), this.loadClusters()]);
  }

  private clusterName(clusterIdArg: string): string {
    return this.clusters.find((cluster) => cluster.id === clusterIdArg)?.name ?? clusterIdArg;
  }

  private setField<K extends keyof ISecretGroupFormFields>(keyArg: K, valueArg: ISecretGroupFormFields[K]): void {
    this.fields = { ...this.fields, [keyArg]: valueArg };
    this.formReasons = [];
  }

  private toggleCluster(clusterIdArg: string, onArg: boolean): void {
    const others = this.fields.clusterIds.filter((clusterId) => clusterId !== clusterIdArg);
    this.setField('clusterIds', onArg ? [...others, clusterIdArg] : others);
  }

  private createGroup(): void {
    const judged = secretGroupRequestOfForm(this.fields);
    this.formReasons = judged.reasons;
    if (!judged.request) {
      return;
    }
    const group = judged.request;
    CloudlyActionDialog.open({
      title: `Create secret group ${group.key}`,
      intro: html`<p>Environment <code>${group.environment}</code>; every version will be sealed for ${group.clusterIds.map((clusterId) => this.clusterName(clusterId)).join(', ')}. The group holds no value yet: add its first version after.</p>`,
      dryRun: () => api.call('createSecretGroup', { group, dryRun: true }),
      change: () => ({ before: undefined, after: group }),
      run: () => api.call('createSecretGroup', { group }),
      result: (answerArg) => html`<p>Group <code data-created-group>${answerArg.group.id}</code> created.</p>`,
      confirmLabel: 'Create group',
      onDone: (answerArg) => {
        this.groups = withSecretGroup(this.groups, answerArg.group);
        this.fields = { key: '', environment: '', tags: '', clusterIds: [], retainedVersions: '' };
      },
    });
  }

  private deleteGroup(groupArg: ISecretGroup): void {
    const request = { secretGroupId: groupArg.id, expectedGeneration: groupArg.generation };
    CloudlyActionDialog.open({
      title: `Delete secret group ${groupArg.key}`,
      intro: html`<p>Every version's sealed copies are removed (${groupArg.versions.length} version(s)); Cloudly refuses while a service names one of them. Against the group's generation ${groupArg.generation}.</p>`,
      dryRun: () => api.call('deleteSecretGroup', { ...request, dryRun: true }),
      describe: () => html`<p>Cloudly would delete the group.</p>`,
      run: () => api.call('deleteSecretGroup', request),
      result: () => html`<p>Group <code>${groupArg.key}</code> deleted.</p>`,
      confirmLabel: 'Delete group',
      onDone: () => {
        this.groups = this.groups.filter((group) => group.id !== groupArg.id);
      },
    });
  }

  /**
   * Seals what was typed and opens the dialog: the dry run and the real call send the same sealed
   * copies. The typed text is cleared at once and the bytes wiped once sealed, whatever happens.
   */
  private sealAndReview(groupArg: ISecretGroup, resealArg: string | null, inputArg: HTMLInputElement): void {
    const unavailable = sealingUnavailable();
    if (unavailable) {
      this.valueForm = { groupId: groupArg.id, reseal: resealArg, reason: unavailable };
      return;
    }
    const judged = secretValueBytesOf(inputArg.value);
    if (judged.bytes === null) {
      this.valueForm = { groupId: groupArg.id, reseal: resealArg, reason: judged.reason };
      return;
    }
    inputArg.value = '';
    this.valueForm = null;
    const bytes = judged.bytes;
    const valueBytes = bytes.length;
    let sealed: Promise<ISecretVersionWritable> | null = null;
    const copies = (): Promise<ISecretVersionWritable> => {
      sealed ??= sealSecretVersionCopies(api, groupArg, bytes, resealArg === null ? {} : { reseal: resealArg })
        .finally(() => bytes.fill(0));
      return sealed;
    };
    const send = async (dryRunArg: boolean) => api.call('addSecretVersion', {
      secretGroupId: groupArg.id,
      expectedGeneration: groupArg.generation,
      version: await copies(),
      ...(dryRunArg ? { dryRun: true } : {}),
    });
    const resealed = resealArg === null ? null : groupArg.versions.find((version) => version.secretVersionId === resealArg) ?? null;
    CloudlyActionDialog.open({
      title: resealed ? `Re-seal version ${resealed.version} of ${groupArg.key}` : `Add version ${(groupArg.versions[0]?.version ?? 0) + 1} to ${groupArg.key}`,
      intro: html`<p>The ${valueBytes}-byte value was sealed in this browser to the current recipient of ${groupArg.clusterIds.map((clusterId) => this.clusterName(clusterId)).join(', ')};
        only the sealed copies are sent. ${resealed ? 'The version keeps its id, so services naming it need no change; the value must be the one it holds.' : 'Services name the new version by its id to use it.'}</p>`,
      dryRun: () => send(true),
      describe: () => html`<p>Cloudly accepts the sealed copies.</p>`,
      run: () => send(false),
      result: (answerArg) => html`<p>Group <code>${answerArg.group.key}</code> now keeps ${answerArg.group.versions.length} version(s); newest
        <code data-version-id>${answerArg.group.versions[0]?.secretVersionId}</code>.</p>`,
      confirmLabel: resealed ? 'Re-seal' : 'Add version',
      onDone: (answerArg) => {
        this.groups = withSecretGroup(this.groups, answerArg.group);
      },
    });
  }

  private valueFormView(groupArg: ISecretGroup, resealArg: string | null): TemplateResult {
    const id = `secret-value-${groupArg.id}-${resealArg ?? 'new'}`;
    const form = this.valueForm;
    return html`<form class="inline-form" data-value-form=${resealArg ?? 'new'} aria-label=${resealArg ? `Re-seal ${resealArg}` : `New version of ${groupArg.key}`}
        @submit=${(event: Event) => { event.preventDefault(); this.sealAndReview(groupArg, resealArg, (event.target as HTMLFormElement).querySelector('input')!); }}>
      <label for=${id}>${resealArg ? 'The value this version holds' : 'Value'} (sealed in this browser; Cloudly never sees it)</label>
      <input id=${id} name="secret-value" type="password" autocomplete="off" spellcheck="false" data-secret-value>
      <button type="submit" class="primary" data-action="seal-value">Seal and review…</button>
      <button type="button" @click=${() => { this.valueForm = null; }}>Cancel</button>
      ${form?.reason ? html`<p class="problems" role="alert" data-value-reason>${form.reason}</p>` : nothing}
    </form>`;
  }

  private versionRow(groupArg: ISecretGroup, versionArg: ISecretVersionMetadata): TemplateResult {
    const needing = clustersNeedingReseal(versionArg);
    const formOpen = this.valueForm?.groupId === groupArg.id && this.valueForm.reseal === versionArg.secretVersionId;
    return html`<tr data-version=${versionArg.secretVersionId}>
      <td>${versionArg.version}</td>
      <td><code>${versionArg.secretVersionId}</code></td>
      <td>${versionArg.valueBytes} bytes</td>
      <td>${formatTime(versionArg.createdAt)} <span class="muted">by ${versionArg.createdBy}</span>${versionArg.resealedAt ? html`<br><span class="muted">re-sealed ${formatTime(versionArg.resealedAt)}</span>` : nothing}</td>
      <td>${versionArg.clusters.map((cluster) => html`<div data-copy=${cluster.clusterId} data-copy-state=${cluster.state}>
        ${this.clusterName(cluster.clusterId)} <span class=${`badge ${sealBadge[cluster.state] ?? ''}`} title=${describeSealState(cluster.state)}>${cluster.state}</span></div>`)}</td>
      <td>${needing.length > 0 ? html`<button type="button" data-action="reseal-version" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()}
          @click=${() => { this.valueForm = { groupId: groupArg.id, reseal: versionArg.secretVersionId, reason: null }; }}>Re-seal…</button>` : nothing}
        ${formOpen ? this.valueFormView(groupArg, versionArg.secretVersionId) : nothing}</td>
    </tr>`;
  }

  private groupView(groupArg: ISecretGroup): TemplateResult {
    const resealCount = versionsNeedingReseal(groupArg);
    const newFormOpen = this.valueForm?.groupId === groupArg.id && this.valueForm.reseal === null;
    return html`<section class="card wide" data-secret-group=${groupArg.id} aria-label=${`Secret group ${groupArg.key}`}>
      <h2><code>${groupArg.key}</code> <span class="badge">${groupArg.environment}</span>
        ${resealCount > 0 ? html` <span class="badge state-waiting" data-reseal-required>${resealCount} version(s) to re-seal</span>` : nothing}</h2>
      <p class="muted">Tags: ${groupArg.tags.length > 0 ? groupArg.tags.join(', ') : 'none'}; sealed for ${groupArg.clusterIds.map((clusterId) => this.clusterName(clusterId)).join(', ')};
        keeps the newest ${groupArg.retainedVersions} version(s); generation ${groupArg.generation}; updated ${formatTime(groupArg.updatedAt)}.</p>
      ${groupArg.versions.length === 0 ? html`<p class="muted" data-no-versions>No version yet.</p>` : html`<table class="data" aria-label=${`Versions of ${groupArg.key}`}>
        <thead><tr><th scope="col">Version</th><th scope="col">Id</th><th scope="col">Value</th><th scope="col">Added</th><th scope="col">Copies per cluster</th><th scope="col"></th></tr></thead>
        <tbody>${groupArg.versions.map((version) => this.versionRow(groupArg, version))}</tbody>
      </table>`}
      ${newFormOpen ? this.valueFormView(groupArg, null) : nothing}
      <div class="dialog-buttons">
        <button type="button" data-action="add-version" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()}
          @click=${() => { this.valueForm = { groupId: groupArg.id, reseal: null, reason: null }; }}>Add version…</button>
        <button type="button" data-action="delete-group" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()}
          @click=${() => this.deleteGroup(groupArg)}>Delete group…</button>
      </div>
    </section>`;
  }

  private formView(): TemplateResult {
    const fields = this.fields;
    const input = (keyArg: 'key' | 'environment' | 'tags' | 'retainedVersions', labelArg: string, placeholderArg: string) => html`
      <label for=${`secret-group-${keyArg}`}>${labelArg}</label>
      <input id=${`secret-group-${keyArg}`} name=${keyArg} .value=${fields[keyArg]} placeholder=${placeholderArg}
        @input=${(event: Event) => this.setField(keyArg, (event.target as HTMLInputElement).value)}>`;
    return html`<form class="card wide" aria-label="New secret group" data-secret-group-form
        @submit=${(event: Event) => { event.preventDefault(); this.createGroup(); }}>
      <h2>New secret group</h2>
      ${input('key', 'Key', 'db-password')}
      ${input('environment', 'Environment', 'production')}
      ${input('tags', 'Tags (separated by commas)', 'team:payments')}
      ${input('retainedVersions', 'Versions kept (empty: 10)', '10')}
      <fieldset><legend>Clusters every version is sealed for</legend>
        ${this.clusters.length === 0 ? html`<p class="muted">No cluster yet.</p>` : nothing}
        ${this.clusters.map((cluster) => html`<label class="inline"><input type="checkbox" name="clusterIds" value=${cluster.id} data-cluster-choice=${cluster.id}
          .checked=${fields.clusterIds.includes(cluster.id)} @change=${(event: Event) => this.toggleCluster(cluster.id, (event.target as HTMLInputElement).checked)}> ${cluster.name}</label>`)}
      </fieldset>
      ${this.formReasons.length > 0 ? html`<ul class="problems" role="alert" data-form-reasons>${this.formReasons.map((reason) => html`<li>${reason}</li>`)}</ul>` : nothing}
      <div class="dialog-buttons"><button type="submit" class="primary" data-action="create-group" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()}>Review…</button></div>
    </form>`;
  }

  protected updated(): void {
    if (this.loaded) {
      markFirstRender('secrets');
    }
  }

  protected render(): TemplateResult {
    const unavailable = sealingUnavailable();
    return html`<section class="page" data-page="secrets" aria-labelledby="secrets-title">
      <header class="page-header"><h1 id="secrets-title">Secrets</h1></header>
      <p class="muted">A value is sealed in this browser to the enrolled recipient of every cluster its group names; Cloudly stores and delivers only the sealed copies and cannot read them (docs/secrets.md). It shows what each version is sealed for, never a value.</p>
      ${unavailable ? html`<p class="refusal" role="alert" data-sealing-unavailable>${unavailable}</p>` : nothing}
      ${this.error ? refusalView(this.error) : nothing}
      ${this.formView()}
      ${this.groups.map((group) => this.groupView(group))}
      ${this.loaded && this.groups.length === 0 ? html`<p class="muted">No secret groups.</p>` : nothing}
      <cloudly-pager label="secret groups" .nextCursor=${this.nextCursor}
        @page=${(event: CustomEvent<{ cursor?: string }>) => { this.cursor = event.detail.cursor; void this.load(); }}></cloudly-pager>
    </section>`;
  }
}
customElements.define('cloudly-secrets-page', CloudlySecretsPage);
