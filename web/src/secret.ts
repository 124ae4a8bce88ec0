import { html, type TemplateResult } from 'lit';
import { LightElement, copyText } from './widgets.js';

/**
 * The one secret the dashboard ever shows: a relay token right after a rotation. It lives only in
 * this element (never stored, never logged); closing the dialog drops it.
 */
export class CloudlyOneTimeSecret extends LightElement {
  static properties = {
    secret: { attribute: false },
    label: { type: String },
    copied: { state: true },
  };

  declare secret: string;
  declare label: string;
  declare copied: '' | 'copied' | 'failed';

  constructor() {
    super();
    this.secret = '';
    this.label = 'Secret';
    this.copied = '';
  }

  private async copy(): Promise<void> {
    this.copied = (await copyText(this.secret)) ? 'copied' : 'failed';
  }

  protected render(): TemplateResult {
    return html`<div class="one-time-secret">
      <label for="one-time-secret-value">${this.label} — shown once, copy it now</label>
      <div class="inline-form">
        <input id="one-time-secret-value" class="secret-value" type="text" readonly .value=${this.secret} autocomplete="off" spellcheck="false"
          @focus=${(event: Event) => (event.target as HTMLInputElement).select()}>
        <button type="button" data-action="copy" @click=${() => void this.copy()}>Copy</button>
      </div>
      <p role="status" class="hint">${this.copied === 'copied' ? 'Copied to the clipboard.' : this.copied === 'failed' ? 'The browser refused the clipboard: select the text and copy it.' : 'Cloudly keeps only its hash: it cannot show it again.'}</p>
    </div>`;
  }
}
customElements.define('cloudly-one-time-secret', CloudlyOneTimeSecret);
