import { html, nothing, type TemplateResult } from 'lit';
import { relayTokenUsage } from '../secret.js';
import type { IClusterOverview, IClusterOverviewService } from '../../../ts/interfaces/requests/overview.js';
import type { IChangeEvent } from '../../../ts/interfaces/requests/watch.js';
import type { IClusterNode } from '../../../ts/interfaces/data/clusternode.js';
import type { TClusterCorestoreLegacyResourceInventory, ICorestoreLegacyResourceSelection } from '../../../ts/interfaces/data/corestorelegacy.js';
import type { ICorestoreLegacyResourceAdoptionPlanEntry } from '../../../ts/interfaces/platform/corestorelegacy.js';
import type { IClusterResolvedRouteTable, IClusterUnresolvedRoute } from '../../../ts/interfaces/data/desiredstate.js';
import { api } from '../api.js';
import type { TAdminCallRequest } from '../../../ts/interfaces/requests/methodmap.js';
import { choiceOf, designationRequestOfDraft, requestOfDraft } from '../drafts.js';
import { platformBindingCapabilities } from '../../../ts/interfaces/data/platformbinding.js';
import { explainRuntimeStatus, explainUnknown, formatTime } from '../format.js';
import { LivePage, clusterOfChange } from '../live.js';
import { CloudlyActionDialog, coalesce, copyText, localPager, pageSlice, refusalView, markFirstRender, mayChange, changeTitle, changeDescribedBy } from '../widgets.js';
import { relayStateOf, relayStateText } from './fleet.js';
import { isClusterNodeId, isClusterNodeName, maximumClusterNodeNameLength } from '../../../ts/interfaces/data/clusternode.js';
import type { IServiceWritableSpec } from '../../../ts/interfaces/data/service.js';
import { describeDryRun, formReasonsView, refusalWarningView, type IServiceFormSubmission } from '../forms.js';
import { labelsOfText, labelsText } from '../rollouts.js';
import { countNodeReports, describeRelayKind, describeUnresolvedRoute } from '../decide.js';

const pageSize = 25;

/**
 * One cluster: relay connection and registration, ingress designation and what its routes wait
 * for, nodes with host addresses and Corestore endpoints, services with their runtime state.
 * Actions: designate the ingress, rotate the relay token, adopt a node's legacy resources.
 */
export class CloudlyClusterPage extends LivePage {
  static properties = {
    clusterId: { type: String, attribute: 'cluster-id' },
    overview: { state: true },
    error: { state: true },
    nodePage: { state: true },
    servicePage: { state: true },
    ingressChoice: { state: true },
    inventory: { state: true },
    routes: { state: true },
    newNode: { state: true },
    newService: { state: true },
    labelsDraft: { state: true },
  };

  declare clusterId: string;
  declare overview: IClusterOverview | null;
  declare error: unknown;
  declare nodePage: number;
  declare servicePage: number;
  declare ingressChoice: string;
  /** The route table and the routes left out with their reasons; null while unread or when not served. */
  declare routes: { table: IClusterResolvedRouteTable; unresolved: IClusterUnresolvedRoute[] } | null;
  declare inventory: { nodeId: string; answer?: { inventory: TClusterCorestoreLegacyResourceInventory; inventorySha256: string | null }; error?: unknown; selected: Set<string> } | null;
  /** The "Add node" form's fields; null while it is closed. */
  declare newNode: { name: string; nodeId: string } | null;
  /** Whether the "New service" form is open. */
  declare newService: boolean;
  /** The labels being typed (`key=value` pairs); null while the labels form is closed. */
  declare labelsDraft: string | null;
  private loadSerial = 0;
  private readonly reloadSoon = coalesce(() => void this.load());

  constructor() {
    super();
    this.overview = null;
    this.nodePage = 0;
    this.servicePage = 0;
    this.ingressChoice = '';
    this.inventory = null;
    this.newNode = null;
    this.newService = false;
    this.labelsDraft = null;
  }

  protected willUpdate(changedArg: Map<string, unknown>): void {
    if (changedArg.has('clusterId') && this.clusterId) {
      this.overview = null;
      this.inventory = null;
      // A service chosen on another cluster's page is not one of this cluster's.
      this.ingressChoice = '';
      void this.load();
    }
  }

  private async load(): Promise<void> {
    const serial = ++this.loadSerial;
    try {
      const [{ overview }, routes] = await Promise.all([
        api.call('getClusterOverview', { clusterId: this.clusterId }),
        // Older Cloudly without the route resolution read: readiness is then derived (below).
        api.call('getClusterRouteTableResolution', { clusterId: this.clusterId })
          .catch(() => null),
      ]);
      if (serial === this.loadSerial) {
        this.overview = overview;
        this.routes = routes;
        this.error = undefined;
      }
    } catch (error) {
      if (serial === this.loadSerial) {
        this.error = error;
      }
    }
  }

  protected onChange(changeArg: IChangeEvent): void {
    if (clusterOfChange(changeArg) === this.clusterId || (changeArg.kind === 'CloudlyServiceRuntimeStatus'
      && this.overview?.services.some((entry) => entry.service.id === changeArg.id))) {
      this.reloadSoon();
    }
  }

  protected onResync(): Promise<void> {
    return this.load();
  }

  // ---- actions ----

  private designateIngress(): void {
    const overview = this.overview!;
    const serviceId = this.ingressChoice || overview.services[0]?.service.id;
    const entry = overview.services.find((candidate) => candidate.service.id === serviceId);
    if (!entry) {
      return;
    }
    const mutationId = crypto.randomUUID();
    let request: TAdminCallRequest<'designateClusterIngress'> | null = null;
    // The runtime is read when the dialog opens; one that is not Pallet's is said, and nothing is sent.
    const buildRequest = async (): Promise<TAdminCallRequest<'designateClusterIngress'>> => {
      if (!request) {
        const { runtime } = await api.call('getClusterRuntime', { clusterId: this.clusterId });
        request = requestOfDraft(designationRequestOfDraft({
          mutationId,
          clusterId: this.clusterId,
          ingressService: { id: entry.service.id, specRevision: entry.service.specRevision },
          runtime,
          current: overview.ingressDesignation,
        }));
      }
      return request;
    };
    CloudlyActionDialog.open({
      title: `Designate ${entry.service.name} as the ingress`,
      intro: html`<p>Cluster <strong>${overview.cluster.name}</strong>: the ingress service becomes
        <strong>${entry.service.name}</strong> (spec revision ${entry.service.specRevision}), replacing
        ${overview.ingressDesignation ? html`designation generation ${overview.ingressDesignation.generation}` : 'no designation'}.</p>`,
      dryRun: async () => api.call('designateClusterIngress', { ...(await buildRequest()), dryRun: true }),
      describe: (answerArg) => html`<p>Cloudly would accept designation generation <strong>${answerArg.designation?.generation}</strong>
        of service <strong>${overview.services.find((candidate) => candidate.service.id === answerArg.designation?.ingressServiceId)?.service.name ?? answerArg.designation?.ingressServiceId}</strong>${answerArg.replayed ? ' (a replay of an accepted mutation)' : ''}.</p>`,
      change: (answerArg) => {
        const nameOf = (serviceIdArg: string | undefined) => overview.services.find((candidate) => candidate.service.id === serviceIdArg)?.service.name ?? serviceIdArg;
        const current = overview.ingressDesignation;
        return {
          before: current ? { ingressService: nameOf(current.ingressServiceId), generation: current.generation } : undefined,
          after: { ingressService: nameOf(answerArg.designation?.ingressServiceId), generation: answerArg.designation?.generation },
        };
      },
      run: async () => api.call('designateClusterIngress', await buildRequest()),
      result: (answerArg) => html`<p>Designation generation ${answerArg.designation?.generation} accepted.</p>`,
      confirmLabel: 'Designate',
      onDone: () => void this.load(),
    });
  }

  /** Replaces the cluster's labels, on the generation read, after its dry run. */
  private setLabels(labelsArg: Record<string, string>): void {
    const cluster = this.overview!.cluster;
    const request = { clusterId: cluster.id, labels: labelsArg, expectedGeneration: cluster.generation };
    CloudlyActionDialog.open({
      title: `Set the labels of ${cluster.name}`,
      intro: html`<p>The cluster's labels become <code>${labelsText(labelsArg) || '(none)'}</code>, against its generation ${cluster.generation}.</p>`,
      dryRun: () => api.call('setClusterLabels', { ...request, dryRun: true }),
      describe: (answerArg) => describeDryRun(answerArg),
      change: () => ({ before: cluster.labels ?? {}, after: labelsArg }),
      run: () => api.call('setClusterLabels', request),
      result: (answerArg) => html`<p>Labels now <code data-labels-set>${labelsText(answerArg.cluster?.labels) || '(none)'}</code>.</p>`,
      confirmLabel: 'Set labels',
      onDone: () => {
        this.labelsDraft = null;
        void this.load();
      },
    });
  }

  private labelsView(overviewArg: IClusterOverview): TemplateResult {
    const current = labelsText(overviewArg.cluster.labels);
    const judged = this.labelsDraft === null ? null : labelsOfText(this.labelsDraft);
    return html`<section class="card" aria-labelledby="labels-title" data-cluster-labels>
      <h2 id="labels-title">Labels</h2>
      <p data-labels=${current}>${current ? html`<code>${current}</code>` : html`<span class="muted">No labels.</span>`}</p>
      ${judged === null
        ? html`<button type="button" data-action="edit-labels" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()}
            @click=${() => { this.labelsDraft = current; }}>Edit labels…</button>`
        : html`<form aria-label="Edit labels" @submit=${(event: Event) => { event.preventDefault(); if (judged.labels) { this.setLabels(judged.labels); } }}>
            <label for="cluster-labels">Labels (key=value, separated by commas)</label>
            <input id="cluster-labels" name="labels" .value=${this.labelsDraft ?? ''} @input=${(event: Event) => { this.labelsDraft = (event.target as HTMLInputElement).value; }}>
            <button type="submit" class="primary" data-action="review-labels" ?disabled=${!judged.labels}>Review…</button>
            <button type="button" @click=${() => { this.labelsDraft = null; }}>Cancel</button>
            ${formReasonsView(judged.reasons)}
          </form>`}
    </section>`;
  }

  private rotateRelayToken(): void {
    const cluster = this.overview!.cluster;
    const request = { clusterId: cluster.id, expectedGeneration: cluster.generation };
    CloudlyActionDialog.open({
      title: `Rotate the relay token of ${cluster.name}`,
      intro: html`<p>The current token stops working at once: the relay must be given the new one.</p>`,
      dryRun: () => api.call('rotateClusterRelayToken', { ...request, dryRun: true }),
      describe: (answerArg) => html`<p>The relay token would move to generation <strong>${answerArg.cluster?.relayTokenGeneration}</strong>;
        the relay's open sockets keep running until they reconnect with the old token, which is then refused.</p>`,
      run: () => api.call('rotateClusterRelayToken', request),
      result: (answerArg) => html`<cloudly-one-time-secret .secret=${answerArg.relayToken ?? ''} label="New relay token"></cloudly-one-time-secret>
        ${answerArg.relayToken ? relayTokenUsage(answerArg.relayToken) : nothing}`,
      confirmLabel: 'Rotate token',
      onDone: () => void this.load(),
    });
  }

  private deleteCluster(): void {
    const cluster = this.overview!.cluster;
    const request = { clusterId: cluster.id, expectedGeneration: cluster.generation };
    CloudlyActionDialog.open({
      title: `Delete cluster ${cluster.name}`,
      intro: html`<p>Removes the cluster, its nodes and its relay registration, and closes its relay sockets. Cloudly
        refuses while services exist on it (delete them first).</p>`,
      dryRun: () => api.call('deleteCluster', { ...request, dryRun: true }),
      describe: (answerArg) => describeDryRun(answerArg),
      run: () => api.call('deleteCluster', request),
      result: (answerArg) => html`<p>Deleted: ${answerArg.removedNodes ?? 0} node(s) removed, ${answerArg.closedSockets ?? 0} relay socket(s) closed.</p>`,
      confirmLabel: 'Delete cluster',
      onDone: () => { location.hash = '#/fleet'; },
    });
  }

  /** Every reason the "Add node" fields are not what `addClusterNode` admits: the contract's rules, in Cloudly's words (ts/manager.cluster/operations.ts). */
  private newNodeReasons(): string[] {
    const fields = this.newNode;
    if (!fields) {
      return [];
    }
    const reasons: string[] = [];
    if (fields.name !== '' && !isClusterNodeName(fields.name)) {
      reasons.push(`name must be 1-${maximumClusterNodeNameLength} characters without control characters or surrounding spaces`);
    }
    if (fields.nodeId !== '' && !isClusterNodeId(fields.nodeId)) {
      reasons.push("nodeId must be a node id (letters, digits, '.', '_', '-'; 1-128 characters)");
    }
    return reasons;
  }

  private addNode(): void {
    const fields = this.newNode!;
    const request = { clusterId: this.clusterId, name: fields.name, ...(fields.nodeId ? { nodeId: fields.nodeId } : {}) };
    CloudlyActionDialog.open({
      title: `Add node ${fields.name}`,
      intro: html`<p>Adds a node to <strong>${this.overview?.cluster.name}</strong>${fields.nodeId ? html` with id <code>${fields.nodeId}</code> (the id its relay reports it under)` : ' with an id Cloudly chooses'}.</p>`,
      dryRun: () => api.call('addClusterNode', { ...request, dryRun: true }),
      describe: (answerArg) => html`<p>Cloudly would add node <strong>${answerArg.node?.name ?? fields.name}</strong> (id <code>${answerArg.node?.id ?? '—'}</code>).</p>`,
      run: () => api.call('addClusterNode', request),
      result: (answerArg) => html`<p>Node <code>${answerArg.node?.id}</code> added.</p>`,
      confirmLabel: 'Add node',
      onDone: () => {
        this.newNode = null;
        void this.load();
      },
    });
  }

  private removeNode(nodeArg: IClusterNode): void {
    const request = { clusterId: this.clusterId, nodeId: nodeArg.id };
    const placed = this.overview?.services.filter((entry) => entry.service.runtime.placement?.nodeIds?.includes(nodeArg.id)) ?? [];
    CloudlyActionDialog.open({
      title: `Remove node ${nodeArg.name}`,
      intro: html`<p>Removes node <code>${nodeArg.id}</code> from the cluster.
        ${placed.length ? html`<strong>${placed.length} service(s) are placed on it</strong> (${placed.map((entry) => entry.service.name).join(', ')}): they are refused until their placement names another node.` : 'No service is placed on it.'}
        A relay that still reports it adds it back.</p>`,
      dryRun: () => api.call('removeClusterNode', { ...request, dryRun: true }),
      describe: () => html`<p>Cloudly would remove node <code>${nodeArg.id}</code>.</p>`,
      run: () => api.call('removeClusterNode', request),
      result: () => html`<p>Node <code>${nodeArg.id}</code> removed.</p>`,
      confirmLabel: 'Remove node',
      onDone: () => void this.load(),
    });
  }

  /**
   * Creates the service, then sets each volume initialization the form stated (`createService`
   * takes none: `setServiceVolumeInitialization` is its only write), expecting none stored yet.
   */
  private createService({ spec: specArg, initializations }: IServiceFormSubmission): void {
    CloudlyActionDialog.open({
      title: `Create service ${specArg.name}`,
      intro: html`<p>Image <code>${specArg.runtime.image}</code>, ${specArg.runtime.replicas} replica(s) on
        ${specArg.runtime.placement.nodeIds.length ? specArg.runtime.placement.nodeIds.join(', ') : 'any node'}.</p>
        ${initializations.length ? html`<p>Then the initialization of ${initializations.map((planned, index) => html`${index ? ', ' : ''}<code>${planned.mountPath}</code>`)} is set.</p>` : nothing}`,
      dryRun: () => api.call('createService', { service: specArg, dryRun: true }),
      describe: (answerArg) => html`<p>Cloudly would store service <strong>${answerArg.service?.name ?? specArg.name}</strong>
        ${answerArg.service ? html`at spec revision ${answerArg.service.specRevision}` : nothing}.</p>
        ${refusalWarningView(answerArg.service, initializations)}`,
      change: () => ({ before: undefined, after: { ...specArg, volumes: specArg.volumes.map((volume) => ({ ...volume, initialization: initializations.find((planned) => planned.mountPath === volume.mountPath)?.initialization })) } }),
      run: async (progressArg) => {
        progressArg(null, 'Creating the service…');
        let answer = await api.call('createService', { service: specArg });
        for (const planned of initializations) {
          progressArg(null, `Setting the initialization of ${planned.mountPath}…`);
          answer = await api.call('setServiceVolumeInitialization', { serviceId: answer.service.id, mountPath: planned.mountPath, expected: null, initialization: planned.initialization });
        }
        return answer;
      },
      result: (answerArg) => html`<p>Service <a href=${`#/service/${encodeURIComponent(answerArg.service?.id ?? '')}`} data-created-service=${answerArg.service?.id ?? ''}>${answerArg.service?.name}</a> created.</p>`,
      confirmLabel: 'Create service',
      onDone: () => {
        this.newService = false;
        void this.load();
      },
    });
  }

  private async openInventory(nodeArg: IClusterNode): Promise<void> {
    this.inventory = { nodeId: nodeArg.id, selected: new Set() };
    try {
      const answer = await api.call('getCorestoreLegacyResources', { clusterId: this.clusterId, nodeId: nodeArg.id });
      this.inventory = { nodeId: nodeArg.id, answer, selected: new Set() };
    } catch (error) {
      this.inventory = { nodeId: nodeArg.id, error, selected: new Set() };
    }
  }

  private adoptSelected(): void {
    const inventory = this.inventory!;
    // A key is `serviceId NUL capability`, made by this page from the inventory; its capability is read back as the contract's literal.
    const resources = [...inventory.selected].flatMap((key): ICorestoreLegacyResourceSelection[] => {
      const [serviceId, capabilityText] = key.split('\u0000');
      const capability = choiceOf(platformBindingCapabilities, capabilityText ?? '');
      return capability ? [{ serviceId, capability }] : [];
    });
    const request = {
      clusterId: this.clusterId,
      nodeId: inventory.nodeId,
      expectedInventorySha256: inventory.answer?.inventorySha256 ?? '',
      resources,
    };
    const planView = (planArg: ICorestoreLegacyResourceAdoptionPlanEntry[]) => html`<table class="data" aria-label="Adoption plan">
      <thead><tr><th scope="col">Service</th><th scope="col">Capability</th><th scope="col">Binding</th></tr></thead>
      <tbody>${planArg.map((entry) => html`<tr><td><code>${entry.serviceId}</code></td><td>${entry.capability}</td><td><code>${entry.bindingId}</code></td></tr>`)}</tbody>
    </table>`;
    CloudlyActionDialog.open({
      title: `Adopt ${resources.length} legacy resource(s) on node ${inventory.nodeId}`,
      intro: html`<p>All or none: Cloudly creates one adopting platform binding per selected resource, against the inventory digest read.</p>`,
      dryRun: () => api.call('adoptCorestoreLegacyResources', { ...request, dryRun: true }),
      // Cloudly's dry run of this orchestration halts before the relay is asked again, so it may
      // answer no plan: the selection is then what the confirmation would adopt.
      describe: (answerArg) => (answerArg.plan?.length
        ? html`<p>The plan:</p>${planView(answerArg.plan)}`
        : html`${describeDryRun(answerArg)}<table class="data" aria-label="Selected resources">
            <thead><tr><th scope="col">Service</th><th scope="col">Capability</th></tr></thead>
            <tbody>${resources.map((entry) => html`<tr><td><code>${entry.serviceId}</code></td><td>${entry.capability}</td></tr>`)}</tbody>
          </table>`),
      run: () => api.call('adoptCorestoreLegacyResources', request),
      result: (answerArg) => html`<p>Adopted:</p>${planView(answerArg.plan ?? [])}`,
      confirmLabel: 'Adopt',
      onDone: () => {
        const node = this.overview?.nodes.find((candidate) => candidate.id === inventory.nodeId);
        if (node) {
          void this.openInventory(node);
        }
      },
    });
  }

  // ---- views ----

  private relayView(overviewArg: IClusterOverview): TemplateResult {
    const state = relayStateOf(overviewArg.relay);
    const registration = overviewArg.relay.registration as (Record<string, unknown> & { origin?: string; version?: string; protocol?: string }) | null;
    return html`<section aria-labelledby="relay-title" class="card">
      <h2 id="relay-title">Relay</h2>
      <p>State: <span class=${`badge relay-${state}`} data-relay-state=${state}>${relayStateText[state]}</span></p>
      <dl class="facts">
        <div><dt>Registration</dt><dd>${registration ? html`${registration.origin} · version ${registration.version} · ${registration.protocol}` : 'none (the relay never registered)'}</dd></div>
        <div><dt>Sockets open on this instance</dt><dd>${overviewArg.relay.socketsOpenHere.length
          ? overviewArg.relay.socketsOpenHere.map((socket) => html`<span class="chip">since ${formatTime(socket.connectedAt)}${socket.elected ? ' · elected' : ''}</span>`)
          : 'none'}</dd></div>
        <div><dt>Relay kind</dt><dd data-relay-kind=${describeRelayKind(registration?.version)}>${{ simulated: 'simulated (cloudly-sim: nothing runs behind it)', cluster: 'a cluster\u2019s relay', unknown: 'not known until it registers' }[describeRelayKind(registration?.version)]}</dd></div>
        <div><dt>Nodes</dt><dd data-node-reports>${countNodeReports(overviewArg.nodes).reported} reported by the relay, ${countNodeReports(overviewArg.nodes).unreported} with no report yet</dd></div>
        <div><dt>Relay token generation</dt><dd>${overviewArg.cluster.relayTokenGeneration}</dd></div>
      </dl>
      <button type="button" data-action="rotate-relay-token" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()} @click=${() => this.rotateRelayToken()}>Rotate relay token…</button>
    </section>`;
  }

  private ingressView(overviewArg: IClusterOverview): TemplateResult {
    const designation = overviewArg.ingressDesignation;
    const ingressEntry = designation ? overviewArg.services.find((entry) => entry.service.id === designation.ingressServiceId) : undefined;
    const relayRegistered = overviewArg.relay.registration !== null;
    const converged = ingressEntry?.runtimeStatus?.state === 'converged';
    const readiness = !designation
      ? 'No ingress is designated: no route is served.'
      : !relayRegistered
        ? 'Not ready: the relay has not registered, so the ingress cannot fetch its route table.'
        : !converged
          ? `Not ready: the ingress service is not converged (${explainRuntimeStatus(ingressEntry?.runtimeStatus ?? null)})`
          : 'Ready: the ingress service is converged and the relay is registered.';
    return html`<section aria-labelledby="ingress-title" class="card">
      <h2 id="ingress-title">Ingress</h2>
      ${designation
        ? html`<dl class="facts" data-ingress="designated">
            <div><dt>Ingress service</dt><dd><a href=${`#/service/${encodeURIComponent(designation.ingressServiceId)}`}>${ingressEntry?.service.name ?? designation.ingressServiceId}</a></dd></div>
            <div><dt>Designation</dt><dd>generation ${designation.generation}, accepted ${formatTime(designation.acceptedAt)} against spec revision ${designation.preparedSpecRevision}</dd></div>
            <div><dt>Credential</dt><dd>${designation.credential.credentialId} (generation ${designation.credential.generation})</dd></div>
          </dl>`
        : html`<p data-ingress="none">Not designated.</p>`}
      <p class="readiness" data-readiness=${converged && relayRegistered && designation ? 'ready' : 'not-ready'}><strong>Ingress readiness:</strong> ${readiness}</p>
      ${this.routesView(overviewArg)}
      ${overviewArg.services.length
        ? html`<div class="inline-form">
            <label>Ingress service
              <select name="ingress-service" @change=${(event: Event) => { this.ingressChoice = (event.target as HTMLSelectElement).value; }}>
                ${overviewArg.services.map((entry) => html`<option value=${entry.service.id} ?selected=${entry.service.id === (this.ingressChoice || designation?.ingressServiceId)}>${entry.service.name}</option>`)}
              </select>
            </label>
            <button type="button" data-action="designate-ingress" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()} @click=${() => this.designateIngress()}>Designate ingress…</button>
          </div>`
        : html`<p class="muted">The cluster has no service to designate.</p>`}
    </section>`;
  }

  /** Every declared route: resolved to its targets, or left out with Cloudly's reason. */
  private routesView(overviewArg: IClusterOverview): TemplateResult {
    if (!this.routes) {
      return html``;
    }
    const nameOf = (serviceIdArg: string) => overviewArg.services.find((entry) => entry.service.id === serviceIdArg)?.service.name ?? serviceIdArg;
    const ingressId = overviewArg.ingressDesignation?.ingressServiceId ?? null;
    const rows = [
      ...this.routes.table.routes.map((route) => ({ hostname: route.hostname, serviceId: route.serviceId, port: route.port, ready: true, cause: '',
        detail: html`${route.targets.length} target${route.targets.length === 1 ? '' : 's'} (${route.targets.map((target) => `${target.address}:${target.port}`).join(', ')})` })),
      ...this.routes.unresolved.map((route) => {
        // An older Cloudly answers the sentence only: it is shown as it came.
        const words = route.cause ? describeUnresolvedRoute(route, { service: nameOf(route.serviceId), ingress: ingressId ? nameOf(ingressId) : null }) : null;
        return { hostname: route.hostname, serviceId: route.serviceId, port: route.port, ready: false, cause: route.cause ?? '',
          detail: words ? html`${words.problem} <span class="route-fix" data-route-fix>To fix: ${words.fix}</span>` : html`${route.reason}` };
      }),
    ].sort((left, right) => (left.hostname < right.hostname ? -1 : left.hostname > right.hostname ? 1 : 0));
    const ready = this.routes.table.routes.length;
    return html`<h3 id="routes-title">Routes: ${ready} of ${rows.length} ready${rows.length > ready ? html`, ${rows.length - ready} waiting (below: what each waits for and what fixes it)` : nothing}
      <span class="muted">(desired-state revision ${this.routes.table.revision})</span></h3>
      ${rows.length === 0 ? html`<p class="muted">No service declares a route.</p>` : html`
      <table class="data" aria-labelledby="routes-title">
        <thead><tr><th scope="col">Hostname</th><th scope="col">Service</th><th scope="col">Port</th><th scope="col">Readiness</th></tr></thead>
        <tbody>${rows.map((row) => html`<tr data-route=${row.hostname} data-route-ready=${row.ready ? 'true' : 'false'} data-route-cause=${row.cause}>
          <th scope="row">${row.hostname}</th><td>${nameOf(row.serviceId)}</td><td>${row.port}</td>
          <td><span class=${`badge ${row.ready ? 'state-converged' : 'state-waiting'}`}>${row.ready ? 'ready' : 'not ready'}</span> ${row.detail}</td>
        </tr>`)}</tbody>
      </table>`}`;
  }

  private nodesView(overviewArg: IClusterOverview): TemplateResult {
    const nodes = pageSlice(overviewArg.nodes, this.nodePage, pageSize);
    return html`<section aria-labelledby="nodes-title" class="card wide">
      <h2 id="nodes-title">Nodes (${overviewArg.nodes.length})</h2>
      <table class="data" aria-labelledby="nodes-title">
        <thead><tr><th scope="col">Node</th><th scope="col">Host addresses</th><th scope="col">Corestore endpoint</th><th scope="col">Known from</th><th scope="col">Last report</th><th scope="col">Legacy resources</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
        <tbody>${nodes.map((node) => html`<tr data-node-id=${node.id}>
          <th scope="row">${node.name}${node.name !== node.id ? html` <code>${node.id}</code>` : nothing}</th>
          <td>${node.hostAddresses?.length ? node.hostAddresses.join(', ') : html`<span class="muted">not reported</span>`}</td>
          <td>${node.corestore ? html`<code>${node.corestore.endpoint}</code>` : html`<span class="muted">none</span>`}</td>
          <td>${node.source === 'admin' ? 'administrator' : 'relay report'}</td>
          <td data-node-reported=${node.reportedAt === undefined ? 'no' : 'yes'}>${node.reportedAt === undefined ? 'no report yet' : formatTime(node.reportedAt)}</td>
          <td>${node.corestore ? html`<button type="button" data-action="inventory" @click=${() => void this.openInventory(node)}>Inventory…</button>` : html`<span class="muted">—</span>`}</td>
          <td><button type="button" data-action="remove-node" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()} aria-label=${`Remove node ${node.name}`} @click=${() => this.removeNode(node)}>Remove…</button></td>
        </tr>`)}</tbody>
      </table>
      ${overviewArg.nodes.length === 0 ? html`<p class="muted">No nodes.</p>` : nothing}
      ${localPager('nodes', overviewArg.nodes.length, this.nodePage, pageSize, (pageArg) => { this.nodePage = pageArg; })}
      ${this.addNodeView()}
      ${this.inventory ? this.inventoryView() : nothing}
    </section>`;
  }

  private addNodeView(): TemplateResult {
    if (!this.newNode) {
      return html`<button type="button" data-action="new-node" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()} @click=${() => { this.newNode = { name: '', nodeId: '' }; }}>Add node…</button>`;
    }
    const fields = this.newNode;
    const reasons = this.newNodeReasons();
    return html`<form class="inline-form" aria-label="Add node" @submit=${(event: Event) => { event.preventDefault(); if (fields.name && reasons.length === 0) { this.addNode(); } }}>
      <label for="new-node-name">Node name</label>
      <input id="new-node-name" .value=${fields.name} @input=${(event: Event) => { this.newNode = { ...fields, name: (event.target as HTMLInputElement).value }; }}>
      <label for="new-node-id">Node id (optional)</label>
      <input id="new-node-id" .value=${fields.nodeId} @input=${(event: Event) => { this.newNode = { ...fields, nodeId: (event.target as HTMLInputElement).value }; }}>
      <button type="submit" class="primary" data-action="add-node" ?disabled=${fields.name === '' || reasons.length > 0}>Review…</button>
      <button type="button" @click=${() => { this.newNode = null; }}>Cancel</button>
      ${formReasonsView(reasons)}
    </form>`;
  }

  private inventoryView(): TemplateResult {
    const inventory = this.inventory!;
    const toggle = (keyArg: string, onArg: boolean) => {
      const selected = new Set(inventory.selected);
      if (onArg) {
        selected.add(keyArg);
      } else {
        selected.delete(keyArg);
      }
      this.inventory = { ...inventory, selected };
    };
    const body = (): TemplateResult => {
      if (inventory.error) {
        return refusalView(inventory.error);
      }
      if (!inventory.answer) {
        return html`<p role="status">Reading the node's inventory through the relay…</p>`;
      }
      const read = inventory.answer.inventory;
      if (!read.reachable) {
        return html`<p role="alert">The relay could not read it: <code>${read.errorCode}</code> (read ${formatTime(read.readAt)}).</p>`;
      }
      if (read.services.length === 0) {
        return html`<p>No legacy resources on this node (read ${formatTime(read.readAt)}).</p>`;
      }
      return html`<fieldset><legend>Resources (read ${formatTime(read.readAt)}, digest <code>${(inventory.answer.inventorySha256 ?? '').slice(0, 12)}…</code>)</legend>
        <table class="data"><thead><tr><th scope="col">Adopt</th><th scope="col">Service</th><th scope="col">Capability</th><th scope="col">Name</th><th scope="col">State</th></tr></thead>
        <tbody>${read.services.flatMap((service) => service.resources.map((resource) => {
          const key = `${service.serviceId}\u0000${resource.capability}`;
          const name = resource.capability === 'database' ? resource.databaseName : resource.bucketName;
          const adoptable = resource.adoption.state === 'unadopted' && resource.adoption.blocker === null;
          const id = `adopt-${service.serviceId}-${resource.capability}`;
          return html`<tr>
            <td><input type="checkbox" id=${id} ?disabled=${!adoptable} .checked=${inventory.selected.has(key)} @change=${(event: Event) => toggle(key, (event.target as HTMLInputElement).checked)}></td>
            <td><label for=${id}><code>${service.serviceId}</code></label></td><td>${resource.capability}</td><td>${name}</td>
            <td>${resource.adoption.state === 'authorized' ? `adopted (binding ${resource.adoption.bindingId})` : resource.adoption.blocker ? `blocked: ${resource.adoption.blocker}` : 'not adopted'}</td>
          </tr>`;
        }))}</tbody></table>
        <button type="button" data-action="adopt" ?disabled=${!mayChange() || inventory.selected.size === 0} title=${changeTitle()} aria-describedby=${changeDescribedBy()} @click=${() => this.adoptSelected()}>Adopt selected…</button>
      </fieldset>`;
    };
    return html`<section class="inventory" aria-label=${`Legacy inventory of node ${inventory.nodeId}`}>
      <h3>Legacy Corestore resources on ${inventory.nodeId}</h3>
      ${body()}
      <button type="button" @click=${() => { this.inventory = null; }}>Close inventory</button>
    </section>`;
  }

  private serviceRow(entryArg: IClusterOverviewService): TemplateResult {
    const status = entryArg.runtimeStatus;
    const unknown = entryArg.unknown ?? null;
    const state = unknown ? 'unknown' : status?.state ?? 'unjudged';
    return html`<tr data-service-id=${entryArg.service.id}>
      <th scope="row"><a href=${`#/service/${encodeURIComponent(entryArg.service.id)}`}>${entryArg.service.name}</a></th>
      <td><span class=${`badge state-${state}`} data-runtime-state=${state}>${unknown ? 'unknown' : status?.state ?? 'not judged'}</span></td>
      <td>${unknown ? explainUnknown(unknown, status) : explainRuntimeStatus(status)}</td>
      <td>${entryArg.latestBackup ? formatTime(entryArg.latestBackup.createdAt) : html`<span class="muted">none</span>`}</td>
    </tr>`;
  }

  private servicesView(overviewArg: IClusterOverview): TemplateResult {
    return html`<section aria-labelledby="services-title" class="card wide">
      <h2 id="services-title">Services (${overviewArg.services.length})</h2>
      <table class="data" aria-labelledby="services-title">
        <thead><tr><th scope="col">Service</th><th scope="col">State</th><th scope="col">Why</th><th scope="col">Latest backup</th></tr></thead>
        <tbody>${pageSlice(overviewArg.services, this.servicePage, pageSize).map((entry) => this.serviceRow(entry))}</tbody>
      </table>
      ${overviewArg.services.length === 0 ? html`<p class="muted">No services.</p>` : nothing}
      ${localPager('services', overviewArg.services.length, this.servicePage, pageSize, (pageArg) => { this.servicePage = pageArg; })}
      ${this.newService
        ? html`<cloudly-service-form mode="create" cluster-id=${this.clusterId} .nodeIds=${overviewArg.nodes.map((node) => node.id)}
            @spec=${(event: CustomEvent<IServiceFormSubmission>) => this.createService(event.detail)} @cancel=${() => { this.newService = false; }}></cloudly-service-form>`
        : html`<button type="button" data-action="new-service" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()} @click=${() => { this.newService = true; }}>New service…</button>`}
    </section>`;
  }

  /** Each route opted in to a certificate: pending, valid until its expiry, or failed with the ACME problem. */
  private certificatesView(overviewArg: IClusterOverview): TemplateResult {
    const certificates = overviewArg.certificates ?? [];
    const nameOf = (serviceIdArg: string) => overviewArg.services.find((entry) => entry.service.id === serviceIdArg)?.service.name ?? serviceIdArg;
    const badgeClass = { valid: 'state-converged', pending: 'state-converging', failed: 'state-refused' } as const;
    return html`<section aria-labelledby="certificates-title" class="card wide">
      <h2 id="certificates-title">Route certificates (${certificates.length})</h2>
      ${certificates.length === 0
        ? html`<p class="muted">No route opted in to a certificate (a route's <code>certificate: "acme"</code>).</p>`
        : html`<table class="data" aria-labelledby="certificates-title">
          <thead><tr><th scope="col">Hostname</th><th scope="col">Service</th><th scope="col">Certificate</th><th scope="col">Detail</th></tr></thead>
          <tbody>${certificates.map((entry) => html`<tr data-certificate=${entry.hostname}>
            <td><code>${entry.hostname}</code></td>
            <td>${nameOf(entry.serviceId)}</td>
            <td><span class=${`badge ${badgeClass[entry.state]}`} data-certificate-state=${entry.state}>${entry.state === 'valid' ? `valid until ${formatTime(Date.parse(entry.notAfter ?? ''))}` : entry.state}</span></td>
            <td>${entry.problem ? html`<code>${entry.problem.type}</code>: ${entry.problem.detail}` : nothing}${entry.nextAttemptAt ? html` <span class="muted">next ${entry.state === 'valid' && !entry.problem ? 'renewal' : 'attempt'} ${formatTime(Date.parse(entry.nextAttemptAt))}</span>` : nothing}</td>
          </tr>`)}</tbody>
        </table>`}
    </section>`;
  }

  protected updated(): void {
    if (this.overview !== null) {
      markFirstRender('cluster');
    }
  }

  protected render(): TemplateResult {
    const overview = this.overview;
    return html`<section class="page" data-page="cluster" aria-labelledby="cluster-title">
      <nav class="crumbs" aria-label="Breadcrumb"><a href="#/fleet">Fleet</a> › <span aria-current="page" data-crumb="cluster">${overview?.cluster.name ?? this.clusterId}</span></nav>
      <header class="page-header"><h1 id="cluster-title">${overview ? overview.cluster.name : 'Cluster'}</h1>
        ${overview ? html`<span class="muted">id <code>${overview.cluster.id}</code> · generation ${overview.cluster.generation} · created ${formatTime(overview.cluster.createdAt)}</span>
          <button type="button" class="danger" data-action="delete-cluster" ?disabled=${!mayChange()} title=${changeTitle()} aria-describedby=${changeDescribedBy()} @click=${() => this.deleteCluster()}>Delete cluster…</button>` : nothing}
      </header>
      ${this.error ? refusalView(this.error) : nothing}
      ${overview
        ? html`<div class="grid">${this.relayView(overview)}${this.labelsView(overview)}${this.ingressView(overview)}${this.nodesView(overview)}${this.servicesView(overview)}${this.certificatesView(overview)}</div>`
        : this.error ? nothing : html`<p role="status">Loading…</p>`}
    </section>`;
  }
}
customElements.define('cloudly-cluster-page', CloudlyClusterPage);
