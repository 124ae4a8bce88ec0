import { html, nothing, type TemplateResult } from 'lit';
import { api, type TSocketStatus } from './api.js';
import { LightElement, refusalView } from './widgets.js';
import { parseRoute, type TRoute } from './decide.js';

export { parseRoute };

const statusText: Record<TSocketStatus, string> = {
  offline: 'Offline: changes are not followed',
  connecting: 'Connecting to live updates…',
  live: 'Live: pages follow every change',
  reconnecting: 'Connection lost: reconnecting…',
};

/** The shell: login, navigation, the socket's state, the current page. */
export class CloudlyApp extends LightElement {
  static properties = {
    route: { state: true },
    status: { state: true },
    loggedIn: { state: true },
    notice: { state: true },
    loginError: { state: true },
    busy: { state: true },
    stale: { state: true },
  };

  declare route: TRoute;
  declare status: TSocketStatus;
  declare loggedIn: boolean;
  declare notice: string;
  declare loginError: unknown;
  declare busy: boolean;
  declare stale: boolean;

  constructor() {
    super();
    this.route = parseRoute(location.hash);
    this.status = api.status;
    this.loggedIn = api.identity !== null;
    this.notice = '';
    this.busy = false;
    this.stale = api.stale;
  }

  connectedCallback(): void {
    super.connectedCallback();
    window.addEventListener('hashchange', () => {
      this.route = parseRoute(location.hash);
      // Keyboard and screen-reader users land on the new page's heading.
      void this.updateComplete.then(() => requestAnimationFrame(() => {
        const heading = this.querySelector<HTMLElement>('main h1');
        heading?.setAttribute('tabindex', '-1');
        heading?.focus();
      }));
    });
    api.addEventListener('status', () => {
      this.status = api.status;
    });
    api.addEventListener('stale', () => {
      const before = this.stale;
      this.stale = api.stale;
      if (before && !this.stale && this.loggedIn) {
        this.notice = `Reconnected (${api.reconnects} time${api.reconnects === 1 ? '' : 's'} so far); the page was read again.`;
      }
    });
    api.addEventListener('expired', (eventArg) => {
      this.loggedIn = false;
      this.notice = `Your session ended (${(eventArg as CustomEvent<string>).detail}). Log in again.`;
    });
    if (this.loggedIn) {
      // An identity kept from before a reload opens the socket once the page's first read was
      // answered: a refused one goes back to login without a failed socket handshake, and the
      // first page's data does not wait behind the socket.
      api.addEventListener('verified', () => api.startSocket(), { once: true });
    }
  }

  protected updated(): void {
    if (!this.loggedIn && performance.getEntriesByName('cloudly:login-render').length === 0) {
      // A User Timing mark of the login form's first render (the benchmark's baseline).
      performance.mark('cloudly:login-render');
    }
  }

  private async login(formArg: HTMLFormElement): Promise<void> {
    const data = new FormData(formArg);
    this.busy = true;
    this.loginError = undefined;
    try {
      await api.login(String(data.get('username') ?? ''), String(data.get('password') ?? ''));
      formArg.reset();
      this.loggedIn = true;
      this.notice = '';
      api.startSocket();
    } catch (error) {
      this.loginError = error;
    } finally {
      this.busy = false;
    }
  }

  private async logout(): Promise<void> {
    await api.logout();
    this.loggedIn = false;
    this.notice = 'Logged out.';
  }

  private loginView(): TemplateResult {
    return html`<main class="login" id="main">
      <form class="login-form" aria-labelledby="login-title" @submit=${(event: Event) => { event.preventDefault(); void this.login(event.target as HTMLFormElement); }}>
        <h1 id="login-title">Cloudly</h1>
        <p class="muted" data-login-hint>Log in with your Cloudly username and password. Administrators can change things; read-only accounts see every page.</p>
        ${this.notice ? html`<p class="notice" role="status">${this.notice}</p>` : nothing}
        <label for="login-username">Username</label>
        <input id="login-username" name="username" autocomplete="username" required autofocus>
        <label for="login-password">Password</label>
        <input id="login-password" name="password" type="password" autocomplete="current-password" required>
        <button type="submit" class="primary" ?disabled=${this.busy}>${this.busy ? 'Logging in…' : 'Log in'}</button>
        ${this.loginError ? refusalView(this.loginError) : nothing}
      </form>
    </main>`;
  }

  private page(): TemplateResult {
    const route = this.route;
    switch (route.page) {
      case 'fleet':
        return html`<cloudly-fleet-page></cloudly-fleet-page>`;
      case 'cluster':
        return html`<cloudly-cluster-page cluster-id=${route.id}></cloudly-cluster-page>`;
      case 'service':
        return html`<cloudly-service-page service-id=${route.id}></cloudly-service-page>`;
      case 'audit':
        return html`<cloudly-audit-page></cloudly-audit-page>`;
      case 'operations':
        return html`<cloudly-operations-page></cloudly-operations-page>`;
      case 'users':
        return html`<cloudly-users-page></cloudly-users-page>`;
      case 'network':
        return html`<cloudly-network-page></cloudly-network-page>`;
      case 'rollouts':
        return html`<cloudly-rollouts-page></cloudly-rollouts-page>`;
      case 'secrets':
        return html`<cloudly-secrets-page></cloudly-secrets-page>`;
      case 'backups':
        return html`<cloudly-backups-page></cloudly-backups-page>`;
      case 'not-found':
        // Named, not silently replaced by the fleet: a mistyped or stale link should be noticed.
        return html`<section class="page" data-page="not-found" aria-labelledby="not-found-title">
          <h1 id="not-found-title">Page not found</h1>
          <p>The dashboard has no page <code>#/${route.path}</code>.</p>
          <p><a href="#/fleet">Go to the fleet</a></p>
        </section>`;
    }
  }

  protected render(): TemplateResult {
    if (!this.loggedIn) {
      return this.loginView();
    }
    const current = this.route.page;
    return html`<a class="skip" href="#main" @click=${(event: Event) => { event.preventDefault(); const heading = this.querySelector<HTMLElement>('main h1'); heading?.setAttribute('tabindex', '-1'); heading?.focus(); }}>Skip to content</a>
      <header class="topbar">
        <span class="brand">Cloudly</span>
        <nav aria-label="Main">
          <a href="#/fleet" aria-current=${current === 'fleet' || current === 'cluster' || current === 'service' ? 'page' : 'false'}>Fleet</a>
          <a href="#/operations" aria-current=${current === 'operations' ? 'page' : 'false'}>Operations</a>
          <a href="#/rollouts" aria-current=${current === 'rollouts' ? 'page' : 'false'}>Rollouts</a>
          <a href="#/backups" aria-current=${current === 'backups' ? 'page' : 'false'}>Backups</a>
          <a href="#/secrets" aria-current=${current === 'secrets' ? 'page' : 'false'}>Secrets</a>
          <a href="#/network" aria-current=${current === 'network' ? 'page' : 'false'}>Address plan</a>
          <a href="#/audit" aria-current=${current === 'audit' ? 'page' : 'false'}>Audit log</a>
          ${api.identity?.role === 'admin' ? html`<a href="#/users" aria-current=${current === 'users' ? 'page' : 'false'}>Users</a>` : nothing}
        </nav>
        <span class=${`connection connection-${this.status}`} role="status" aria-live="polite" data-connection=${this.status}>${statusText[this.status]}</span>
        <span class="who">${api.identity?.name ?? ''}</span>
        ${api.identity?.role === 'user' ? html`<span class="badge read-only" id="read-only-note" data-read-only>read-only account: actions are disabled (an administrator can take them)</span>` : nothing}
        <button type="button" data-action="logout" @click=${() => void this.logout()}>Log out</button>
      </header>
      ${this.stale ? html`<p class="stale-banner banner" role="alert" data-stale-banner>
        <strong>Stale:</strong> the connection to Cloudly was lost at ${new Date(api.staleSince ?? Date.now()).toLocaleTimeString()}.
        What this page shows was read before then and may no longer be so; it stays marked stale until it has been read again.
        <button type="button" class="link" data-action="read-again" @click=${() => api.readAgain()}>Read again</button></p>` : nothing}
      ${this.notice ? html`<p class="notice banner" role="status" data-notice>${this.notice}
        <button type="button" class="link" @click=${() => { this.notice = ''; }}>Dismiss</button></p>` : nothing}
      <main id="main">${this.page()}</main>`;
  }
}
customElements.define('cloudly-app', CloudlyApp);
