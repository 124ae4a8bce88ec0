import { LitElement, html, nothing, type TemplateResult, type PropertyValues } from 'lit';
import { ApiError, api } from './api.js';
import { DraftRefused } from './drafts.js';
import { asJson } from './format.js';
import { describeFieldValue, fieldDiff } from './diff.js';

/**
 * What a change does, field by field (old → new), as every review shows it; `nothing changes`
 * when the two are equal.
 */
export const diffView = (beforeArg: unknown, afterArg: unknown): TemplateResult => {
  const changes = fieldDiff(beforeArg, afterArg);
  if (changes.length === 0) {
    return html`<p class="diff-none" data-diff="none">Nothing changes.</p>`;
  }
  return html`<table class="data diff" data-diff aria-label="What changes">
    <thead><tr><th scope="col">Field</th><th scope="col">Now</th><th scope="col"></th><th scope="col">After</th></tr></thead>
    <tbody>${changes.map((change) => html`<tr data-diff-path=${change.path}>
      <th scope="row"><code>${change.path}</code></th>
      <td class="diff-before"><code>${describeFieldValue(change.before)}</code></td><td aria-hidden="true">→</td>
      <td class="diff-after"><code>${describeFieldValue(change.after)}</code></td></tr>`)}</tbody>
  </table>`;
};

/**
 * Components render into the light DOM, so the one stylesheet (app.css, `style-src 'self'`) styles
 * them and no constructed or inline style is needed under the Content-Security-Policy.
 */
export class LightElement extends LitElement {
  protected createRenderRoot(): HTMLElement {
    return this;
  }
}

/** A refusal: its code, the server's text and every reason; or a draft the page did not send, with its reasons. */
export const refusalView = (errorArg: unknown): TemplateResult => {
  if (errorArg instanceof ApiError) {
    return html`<div class="refusal" role="alert" data-code=${errorArg.code}>
      <p><strong>Refused</strong> <code class="refusal-code">${errorArg.code}</code> — ${errorArg.text}</p>
      ${errorArg.reasons.length
        ? html`<ul class="refusal-reasons">${errorArg.reasons.map((reason) => html`<li>${reason}</li>`)}</ul>`
        : nothing}
      ${errorArg.causes.length
        ? html`<ul class="refusal-causes">${errorArg.causes.map((causeArg) => html`<li>${causeArg.path ? html`<code>${causeArg.path}</code>: ` : nothing}${causeArg.message}</li>`)}</ul>`
        : nothing}
      ${errorArg.notServed ? html`<p class="hint">This Cloudly does not serve <code>${errorArg.method}</code>.</p>` : nothing}
    </div>`;
  }
  if (errorArg instanceof DraftRefused) {
    return html`<div class="refusal" role="alert" data-code="draft">
      <p><strong>Not sent</strong> — the page could not make a request Cloudly would take from it:</p>
      <ul class="refusal-causes">${errorArg.reasons.map((reason) => html`<li>${reason}</li>`)}</ul>
    </div>`;
  }
  return html`<div class="refusal" role="alert" data-code="error"><p><strong>Failed</strong> — ${String((errorArg as Error)?.message ?? errorArg)}</p></div>`;
};

/**
 * A cursor pager: keeps the cursors of the pages before, so "Previous" works on lists that only
 * page forward. Fires `page` with `{ cursor }` (undefined for the first page).
 */
export class CloudlyPager extends LightElement {
  static properties = {
    nextCursor: { attribute: false },
    label: { type: String },
  };

  declare nextCursor: string | undefined;
  declare label: string;
  private readonly previous: Array<string | undefined> = [];
  private current: string | undefined = undefined;

  constructor() {
    super();
    this.label = 'list';
  }

  public reset(): void {
    this.previous.length = 0;
    this.current = undefined;
    this.requestUpdate();
  }

  private go(cursorArg: string | undefined, forwardArg: boolean): void {
    if (forwardArg) {
      this.previous.push(this.current);
    }
    this.current = cursorArg;
    this.dispatchEvent(new CustomEvent('page', { detail: { cursor: cursorArg } }));
    this.requestUpdate();
  }

  protected render(): TemplateResult {
    return html`<nav class="pager" aria-label=${`Pages of the ${this.label}`}>
      <button type="button" ?disabled=${this.previous.length === 0}
        @click=${() => this.go(this.previous.pop(), false)}>← Previous page</button>
      <span class="pager-position">page ${this.previous.length + 1}</span>
      <button type="button" ?disabled=${!this.nextCursor}
        @click=${() => this.go(this.nextCursor, true)}>Next page →</button>
    </nav>`;
  }
}
customElements.define('cloudly-pager', CloudlyPager);

/** Client-side pages of a list an overview answers whole. */
export const pageSlice = <T>(itemsArg: T[], pageArg: number, sizeArg: number): T[] => itemsArg.slice(pageArg * sizeArg, (pageArg + 1) * sizeArg);

export const localPager = (labelArg: string, totalArg: number, pageArg: number, sizeArg: number, setArg: (pageArg: number) => void): TemplateResult => {
  const pages = Math.max(1, Math.ceil(totalArg / sizeArg));
  if (pages <= 1) {
    return html``;
  }
  return html`<nav class="pager" aria-label=${`Pages of the ${labelArg}`}>
    <button type="button" ?disabled=${pageArg === 0} @click=${() => setArg(pageArg - 1)}>← Previous page</button>
    <span class="pager-position">page ${pageArg + 1} of ${pages}</span>
    <button type="button" ?disabled=${pageArg >= pages - 1} @click=${() => setArg(pageArg + 1)}>Next page →</button>
  </nav>`;
};

export interface IActionOptions<TAnswer> {
  title: string;
  /** What the action is about, shown above the dry-run answer. */
  intro?: TemplateResult;
  /** The same request with `dryRun: true`. */
  dryRun: () => Promise<TAnswer>;
  /** The dry-run answer in words. */
  describe?: (answerArg: TAnswer) => TemplateResult;
  /** What changes, field by field: the value read now and the one the request would store (`before` undefined: a new one). */
  change?: (answerArg: TAnswer) => { before: unknown; after: unknown };
  /** The real request; may report progress (0..1, or null for "working"). */
  run: (progressArg: (fractionArg: number | null, labelArg?: string) => void) => Promise<TAnswer>;
  /** The real answer shown after success. */
  result?: (answerArg: TAnswer) => TemplateResult;
  confirmLabel?: string;
  onDone?: (answerArg: TAnswer) => void;
  /**
   * A change that cannot be taken back (a restore over the service's data): the operator types
   * this name before Confirm is enabled, so the change is never one click away.
   */
  typeToConfirm?: { name: string; what: string };
}

type TActionPhase = 'dry-run' | 'confirm' | 'running' | 'done' | 'refused';

/**
 * The confirmation of every action: a modal dialog that asks Cloudly for the dry-run answer
 * first, shows it, and runs the real request only when the operator confirms.
 */
export class CloudlyActionDialog extends LightElement {
  static properties = {
    phase: { state: true },
    answer: { state: true },
    error: { state: true },
    progress: { state: true },
    progressLabel: { state: true },
    typed: { state: true },
  };

  declare phase: TActionPhase;
  declare answer: unknown;
  declare error: unknown;
  declare progress: number | null;
  declare progressLabel: string;
  declare typed: string;
  public options!: IActionOptions<any>;

  constructor() {
    super();
    this.phase = 'dry-run';
    this.progress = null;
    this.progressLabel = '';
    this.typed = '';
  }

  public static open<TAnswer>(optionsArg: IActionOptions<TAnswer>): CloudlyActionDialog {
    const dialog = document.createElement('cloudly-action-dialog') as CloudlyActionDialog;
    dialog.options = optionsArg;
    document.body.append(dialog);
    return dialog;
  }

  protected firstUpdated(): void {
    const dialog = this.querySelector('dialog')!;
    dialog.addEventListener('close', () => this.remove());
    dialog.showModal();
    void this.runDry();
  }

  protected updated(changedArg: PropertyValues): void {
    if (changedArg.has('phase')) {
      // Keyboard focus follows the step: the confirm button, or close after the end.
      const target = this.querySelector<HTMLElement>('[data-autofocus]');
      target?.focus();
    }
  }

  private async runDry(): Promise<void> {
    this.phase = 'dry-run';
    try {
      this.answer = await this.options.dryRun();
      this.phase = 'confirm';
    } catch (error) {
      this.error = error;
      this.phase = 'refused';
    }
  }

  private async confirm(): Promise<void> {
    this.phase = 'running';
    this.progress = null;
    try {
      this.answer = await this.options.run((fractionArg, labelArg) => {
        this.progress = fractionArg;
        this.progressLabel = labelArg ?? '';
      });
      this.progress = 1;
      this.phase = 'done';
      this.options.onDone?.(this.answer);
    } catch (error) {
      this.error = error;
      this.phase = 'refused';
    }
  }

  private close(): void {
    this.querySelector('dialog')?.close();
  }

  private body(): TemplateResult {
    switch (this.phase) {
      case 'dry-run':
        return html`<p class="working" role="status">Asking Cloudly for a dry run…</p>`;
      case 'confirm': {
        const typeToConfirm = this.options.typeToConfirm;
        const matches = !typeToConfirm || this.typed === typeToConfirm.name;
        return html`<section class="dry-run" aria-label="Dry-run answer">
            <h3>Dry run: what Cloudly would do</h3>
            ${this.options.describe ? this.options.describe(this.answer) : nothing}
            ${this.options.change ? (() => { const change = this.options.change(this.answer); return html`<h4>What changes</h4>${diffView(change.before, change.after)}`; })() : nothing}
            <details><summary>Dry-run answer</summary><pre class="json">${asJson(this.answer)}</pre></details>
          </section>
          ${typeToConfirm ? html`<div class="type-to-confirm" data-type-to-confirm>
            <label for="type-to-confirm">This replaces ${typeToConfirm.what} and cannot be undone. Type <strong><code>${typeToConfirm.name}</code></strong> to confirm.</label>
            <input id="type-to-confirm" name="type-to-confirm" autocomplete="off" spellcheck="false" data-autofocus
              .value=${this.typed} @input=${(eventArg: Event) => { this.typed = (eventArg.target as HTMLInputElement).value; }}>
            ${!matches && this.typed !== '' ? html`<p class="hint" data-type-to-confirm-mismatch>That is not <code>${typeToConfirm.name}</code>.</p>` : nothing}
          </div>` : nothing}
          <div class="dialog-buttons">
            <button type="button" class="primary" ?data-autofocus=${!typeToConfirm} data-action="confirm" ?disabled=${!matches} @click=${() => void this.confirm()}>${this.options.confirmLabel ?? 'Confirm'}</button>
            <button type="button" data-action="cancel" @click=${() => this.close()}>Cancel</button>
          </div>`;
      }
      case 'running':
        return html`<div role="status" class="working">
            <label>${this.progressLabel || 'Working…'}
              ${this.progress === null
                ? html`<progress class="action-progress"></progress>`
                : html`<progress class="action-progress" max="100" .value=${Math.round(this.progress * 100)}>${Math.round(this.progress * 100)}%</progress>`}
            </label>
          </div>`;
      case 'done':
        return html`<section class="action-done" role="status">
            <p><strong>Done.</strong></p>
            <progress class="action-progress" max="100" value="100" aria-label="Completed">100%</progress>
            ${this.options.result ? this.options.result(this.answer) : nothing}
          </section>
          <div class="dialog-buttons"><button type="button" data-autofocus data-action="close" @click=${() => this.close()}>Close</button></div>`;
      case 'refused':
        return html`${refusalView(this.error)}
          <div class="dialog-buttons"><button type="button" data-autofocus data-action="close" @click=${() => this.close()}>Close</button></div>`;
    }
  }

  protected render(): TemplateResult {
    return html`<dialog class="action-dialog" aria-labelledby="action-title" data-phase=${this.phase}>
      <h2 id="action-title">${this.options.title}</h2>
      ${this.options.intro ?? nothing}
      ${this.body()}
    </dialog>`;
  }
}
customElements.define('cloudly-action-dialog', CloudlyActionDialog);

/** Copies text with the Clipboard API; answers whether it worked. */
export const copyText = async (textArg: string): Promise<boolean> => {
  try {
    await navigator.clipboard.writeText(textArg);
    return true;
  } catch {
    return false;
  }
};

/** Calls `fnArg` at most once per `msArg`, trailing: coalesces a burst of change events. */
export const coalesce = (fnArg: () => void, msArg = 120): (() => void) => {
  let timer: number | null = null;
  return () => {
    if (timer === null) {
      timer = window.setTimeout(() => {
        timer = null;
        fnArg();
      }, msArg);
    }
  };
};

/**
 * A User Timing mark of a page's first render with its data, once per document (read by
 * bench/dashboard.bench.ts, which reloads the page for each figure).
 */
export const markFirstRender = (pageArg: string): void => {
  const name = `cloudly:${pageArg}-first-render`;
  if (performance.getEntriesByName(name).length === 0) {
    performance.mark(name);
  }
};

/**
 * Whether the signed-in account may change anything. Cloudly refuses every `write` method to a
 * read-only account (role `user`), so the pages disable the buttons that would lead to one
 * rather than let the dry run be the first to say so.
 */
export const mayChange = (): boolean => api.identity?.role === 'admin';

/** The reason a change button is disabled, in words (the top bar's note says it too). */
export const readOnlySentence = 'Your account is read-only (role user): only an administrator can change things.';

/** A change button's `?disabled` plus its title and description when the account may not change. */
export const changeTitle = (): string | typeof nothing => (mayChange() ? nothing : readOnlySentence);
export const changeDescribedBy = (): string | typeof nothing => (mayChange() ? nothing : 'read-only-note');
