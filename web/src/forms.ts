import { html, nothing, type TemplateResult } from 'lit';
import { validateServiceWritableSpec, type IServiceWritableSpec } from '../../ts/interfaces/data/service.js';
import { LightElement } from './widgets.js';
import { serviceSpecOfForm, volumeInitializationsOfForm, volumeRefusalsOf, type IPlannedVolumeInitialization, type IServiceFormFields } from './decide.js';

/**
 * Forms that check as the operator types, with the contract's own validators (ts/interfaces), so
 * the reasons shown before a request are the ones Cloudly would answer. A form with reasons
 * cannot be submitted; Cloudly still judges the dry run (facts the form cannot know: a taken
 * name, a missing node).
 */

/** The reasons a form has now, listed under it; empty renders nothing. */
export const formReasonsView = (reasonsArg: string[]): TemplateResult =>
  reasonsArg.length === 0
    ? html``
    : html`<ul class="form-reasons" data-form-reasons aria-live="polite">${reasonsArg.map((reason) => html`<li>${reason}</li>`)}</ul>`;

/** Any answer of a dry run in words: an orchestration answers where it halted. */
export const describeDryRun = (answerArg: unknown): TemplateResult => {
  const halted = (answerArg as { haltedBefore?: unknown } | null)?.haltedBefore;
  return typeof halted === 'string'
    ? html`<p>Cloudly checked the request and would go on with <code>${halted}</code>; nothing was written.</p>`
    : html`<p>Cloudly accepts the request; nothing was written by the dry run.</p>`;
};

const emptyFields = (clusterIdArg: string): IServiceFormFields => ({
  name: '', organizationId: '', clusterId: clusterIdArg, image: '', replicas: '1', runAs: '',
  placementNodeIds: [], ports: '', routes: '', volumes: '', initializations: '',
});

/** What the service form submits: the spec, and (a new service's) volume initializations to set once it exists. */
export interface IServiceFormSubmission {
  spec: IServiceWritableSpec;
  initializations: IPlannedVolumeInitialization[];
}

/**
 * The warning of a review whose dry run answered a service the runtime would refuse because of
 * a volume, with the reason and what to do instead; nothing when it would not.
 */
export const refusalWarningView = (
  serviceArg: Parameters<typeof volumeRefusalsOf>[0] | undefined,
  plannedArg: readonly IPlannedVolumeInitialization[] = [],
): TemplateResult | typeof nothing => {
  const refusals = serviceArg ? volumeRefusalsOf(serviceArg, plannedArg) : [];
  return refusals.length === 0 ? nothing : html`<div class="warning" role="status" data-would-be-refused>
    <p><strong>Cloudly would store it, but the runtime would refuse this service:</strong></p>
    <ul>${refusals.map((refusal) => html`<li data-refusal-reason=${refusal.reason}>Volume <code>${refusal.mountPath}</code>: ${refusal.why}
      (<code>${refusal.reason}</code>). Instead: ${refusal.instead}.</li>`)}</ul>
  </div>`;
};

/**
 * A service's spec: name, organization, image, replicas, run-as, placement, ports, routes and
 * volumes. Fires `spec` with the writable spec when submitted without reasons; `cancel` on Cancel.
 */
export class CloudlyServiceForm extends LightElement {
  static properties = {
    fields: { state: true },
    nodeIds: { attribute: false },
    mode: { type: String },
    clusterId: { type: String, attribute: 'cluster-id' },
  };

  declare fields: IServiceFormFields;
  declare nodeIds: string[];
  declare mode: 'create' | 'edit';
  declare clusterId: string;

  constructor() {
    super();
    this.nodeIds = [];
    this.mode = 'create';
    this.clusterId = '';
  }

  /** The fields the form was last started from (see `initial`). */
  private startedFrom: IServiceFormFields | null = null;

  /**
   * Starts the form from these fields. Lit sets an object property again on every render of the
   * page around the form, and a page re-renders on every live update: the same object again
   * leaves what was typed since as it is; only another object starts the form over.
   */
  public set initial(fieldsArg: IServiceFormFields) {
    if (fieldsArg === this.startedFrom) {
      return;
    }
    this.startedFrom = fieldsArg;
    this.fields = { ...fieldsArg, placementNodeIds: [...fieldsArg.placementNodeIds] };
  }

  protected willUpdate(): void {
    if (!this.fields) {
      this.fields = emptyFields(this.clusterId);
    }
  }

  /** The spec the fields make and every reason it is not valid yet (the form's and the contract's). */
  public judge(): { spec: IServiceWritableSpec; initializations: IPlannedVolumeInitialization[]; reasons: string[] } {
    const { spec, reasons } = serviceSpecOfForm(this.fields);
    const planned = this.mode === 'create'
      ? volumeInitializationsOfForm(this.fields.initializations, spec.volumes.map((volume) => volume.mountPath))
      : { initializations: [], reasons: [] };
    return { spec, initializations: planned.initializations, reasons: [...reasons, ...validateServiceWritableSpec(spec, 'service'), ...planned.reasons] };
  }

  private set(nameArg: keyof IServiceFormFields, valueArg: string): void {
    this.fields = { ...this.fields, [nameArg]: valueArg };
  }

  private togglePlacement(nodeIdArg: string, onArg: boolean): void {
    const placement = this.fields.placementNodeIds.filter((nodeId) => nodeId !== nodeIdArg);
    this.fields = { ...this.fields, placementNodeIds: onArg ? [...placement, nodeIdArg] : placement };
  }

  private submit(eventArg: Event): void {
    eventArg.preventDefault();
    const { spec, initializations, reasons } = this.judge();
    if (reasons.length === 0) {
      this.dispatchEvent(new CustomEvent<IServiceFormSubmission>('spec', { detail: { spec, initializations } }));
    }
  }

  private text(nameArg: keyof IServiceFormFields, labelArg: string, extraArg: { placeholder?: string; multiline?: boolean; hint?: string } = {}): TemplateResult {
    const id = `service-form-${nameArg}`;
    const value = String(this.fields[nameArg]);
    const onInput = (event: Event) => this.set(nameArg, (event.target as HTMLInputElement).value);
    return html`<label for=${id}>${labelArg}</label>
      ${extraArg.multiline
        ? html`<textarea id=${id} name=${nameArg} rows="3" placeholder=${extraArg.placeholder ?? ''} .value=${value} @input=${onInput}></textarea>`
        : html`<input id=${id} name=${nameArg} placeholder=${extraArg.placeholder ?? ''} .value=${value} @input=${onInput}>`}
      ${extraArg.hint ? html`<span class="hint">${extraArg.hint}</span>` : nothing}`;
  }

  protected render(): TemplateResult {
    const { spec, initializations, reasons } = this.judge();
    // Nodes the spec names that the cluster no longer lists stay visible (and selectable off).
    const nodeIds = [...new Set([...this.nodeIds, ...this.fields.placementNodeIds])];
    return html`<form class="service-form" aria-label=${this.mode === 'create' ? 'New service' : 'Edit service'} @submit=${(event: Event) => this.submit(event)}>
      <div class="form-grid">
        ${this.text('name', 'Name')}
        ${this.text('organizationId', 'Organization id', { placeholder: 'org-1' })}
        ${this.text('image', 'Image', { placeholder: 'registry.example.com/team/app:1.2.3' })}
        ${this.text('replicas', 'Replicas')}
        ${this.text('runAs', 'Run as (user:group)', { placeholder: 'empty: the image default', hint: 'Needed for a volume owned "from run-as".' })}
        <fieldset class="placement"><legend>Placement (none checked: any node)</legend>
          ${nodeIds.length === 0 ? html`<span class="muted">The cluster has no nodes.</span>` : nodeIds.map((nodeId) => html`<label class="inline">
            <input type="checkbox" name="placement" value=${nodeId} .checked=${this.fields.placementNodeIds.includes(nodeId)}
              @change=${(event: Event) => this.togglePlacement(nodeId, (event.target as HTMLInputElement).checked)}> ${nodeId}</label>`)}
        </fieldset>
        ${this.text('ports', 'Ports (one a line)', { multiline: true, placeholder: 'http 8080/tcp' })}
        ${this.text('routes', 'Routes (one a line)', { multiline: true, placeholder: 'app.example.com http' })}
        ${this.text('volumes', 'Volumes (mount paths, one a line; :ro for read-only)', { multiline: true, placeholder: '/data' })}
        ${this.mode === 'create' ? this.text('initializations', 'Volume initialization (one a line per volume)', {
          multiline: true,
          placeholder: '/data empty run-as 0750',
          hint: '"/data empty run-as 0750" (owner from run-as), "/data empty 1000:1000 0750" (explicit uid:gid), or "/data import <docker volume>". Set right after the service is created.',
        }) : nothing}
      </div>
      ${formReasonsView(reasons)}
      ${reasons.length === 0 && this.mode === 'create' ? refusalWarningView({ runtime: spec.runtime, volumes: spec.volumes }, initializations) : nothing}
      <div class="dialog-buttons">
        <button type="submit" class="primary" data-action="review-service" ?disabled=${reasons.length > 0}>Review…</button>
        <button type="button" @click=${() => this.dispatchEvent(new CustomEvent('cancel'))}>Cancel</button>
      </div>
    </form>`;
  }
}
customElements.define('cloudly-service-form', CloudlyServiceForm);
