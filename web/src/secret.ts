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

/**
 * What to do with a relay token, shown under it: the cluster's relay connects with it; the
 * simulator can be that relay (docs/simulator.md); a relay of one's own follows the protocol,
 * which the dashboard serves beside itself (`relay-protocol.md`, the same origin, offline).
 */
export const relayTokenUsage = (tokenArg: string): TemplateResult => html`<div class="relay-token-usage" data-relay-token-usage>
  <h4>Start a relay with it</h4>
  <p>The cluster's relay connects to Cloudly with this token. To try the cluster without machines, start the simulator as its relay
    (from a Cloudly checkout; <code>npm run sim -- …</code> works too):</p>
  <pre class="command" data-relay-command>npx cloudly-sim --url ${location.origin} --relay-token ${tokenArg}</pre>
  <p>A relay of your own speaks the relay protocol: <a href="relay-protocol.md" target="_blank" rel="noopener" data-relay-protocol-link>docs/relay-protocol.md</a>.
    Until a relay connects and registers, the cluster's relay shows <strong>missing</strong>.</p>
</div>`;
