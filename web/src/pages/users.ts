import { html, nothing, type TemplateResult } from 'lit';
import { validateNewAccount, type IAccount } from '../../../ts/interfaces/requests/account.js';
import type { TIdentityRole } from '../../../ts/interfaces/data/user.js';
import type { IChangeEvent } from '../../../ts/interfaces/requests/watch.js';
import { api } from '../api.js';
import type { TAdminCallRequest } from '../../../ts/interfaces/requests/methodmap.js';
import { formatTime } from '../format.js';
import { LivePage } from '../live.js';
import { CloudlyActionDialog, coalesce, refusalView, type CloudlyPager, markFirstRender } from '../widgets.js';
import { formReasonsView } from '../forms.js';
import { choiceOf } from '../drafts.js';

/** The roles an account may have (the contract's TIdentityRole), in the order the form offers them. */
const accountRoles: readonly TIdentityRole[] = ['user', 'admin'];

/** The account changes a row offers: the method with the request of that method, never apart. */
type TAccountChangeMethod = 'setUserRole' | 'setUserDisabled' | 'deleteUser';
type TAccountChange = { [M in TAccountChangeMethod]: { method: M; request: TAdminCallRequest<M> } }[TAccountChangeMethod];

/** Sends one account change (its dry run, or the change): each branch calls its own method. */
const sendAccountChange = (changeArg: TAccountChange, dryRunArg: boolean): Promise<{ user: IAccount }> => {
  const dryRun = dryRunArg ? { dryRun: true } : {};
  switch (changeArg.method) {
    case 'setUserRole':
      return api.call('setUserRole', { ...changeArg.request, ...dryRun });
    case 'setUserDisabled':
      return api.call('setUserDisabled', { ...changeArg.request, ...dryRun });
    case 'deleteUser':
      return api.call('deleteUser', { ...changeArg.request, ...dryRun });
  }
};

/**
 * Accounts and their roles (administrators only; Cloudly refuses `getUsers` to others, and the
 * page shows that refusal). Create, change a role, disable or enable, delete: each a
 * compare-and-swap on the generation read, after its dry run.
 */
export class CloudlyUsersPage extends LivePage {
  static properties = {
    users: { state: true },
    nextCursor: { state: true },
    error: { state: true },
    newUser: { state: true },
  };

  declare users: IAccount[];
  declare nextCursor: string | undefined;
  declare error: unknown;
  /** The "New user" form's fields; null while it is closed. */
  declare newUser: { username: string; password: string; role: TIdentityRole } | null;
  private cursor: string | undefined;
  private readonly reloadSoon = coalesce(() => void this.load());

  constructor() {
    super();
    this.users = [];
    this.newUser = null;
  }

  connectedCallback(): void {
    super.connectedCallback();
    void this.load();
  }

  private async load(): Promise<void> {
    try {
      const answer = await api.call('getUsers', { limit: 100, ...(this.cursor ? { cursor: this.cursor } : {}) });
      this.users = answer.users;
      this.nextCursor = answer.nextCursor;
      this.error = undefined;
    } catch (error) {
      this.error = error;
    }
  }

  protected onChange(changeArg: IChangeEvent): void {
    if (/user|account/i.test(changeArg.kind)) {
      this.reloadSoon();
    }
  }

  protected onResync(): Promise<void> {
    return this.load();
  }

  /** One account change through its dry run; every change names the generation read. */
  private change(titleArg: string, changeArg: TAccountChange, wordsArg: string, confirmArg: string, userArg: IAccount): void {
    CloudlyActionDialog.open({
      title: titleArg,
      intro: html`<p>${wordsArg}</p>`,
      dryRun: () => sendAccountChange(changeArg, true),
      describe: (answerArg) => html`<p>Cloudly accepts it: <strong>${answerArg.user.username}</strong> would be ${answerArg.user.role}${answerArg.user.disabled ? ', disabled' : ''}.</p>`,
      // A deletion changes no field: the account goes (the intro says so).
      ...(changeArg.method === 'deleteUser' ? {} : {
        change: (answerArg: { user: IAccount }) => ({
          before: { role: userArg.role, disabled: userArg.disabled },
          after: { role: answerArg.user.role, disabled: answerArg.user.disabled },
        }),
      }),
      run: () => sendAccountChange(changeArg, false),
      confirmLabel: confirmArg,
      onDone: () => void this.load(),
    });
  }

  private createUser(): void {
    const fields = this.newUser!;
    CloudlyActionDialog.open({
      title: `Create account ${fields.username}`,
      intro: html`<p>A new ${fields.role === 'admin' ? 'administrator (may change everything)' : 'read-only account'} named <strong>${fields.username}</strong>.</p>`,
      dryRun: () => api.call('createUser', { ...fields, dryRun: true }),
      describe: (answerArg) => html`<p>Cloudly would create <strong>${answerArg.user?.username}</strong> with role ${answerArg.user?.role}.</p>`,
      run: () => api.call('createUser', fields),
      result: (answerArg) => html`<p>Account <code>${answerArg.user?.username}</code> created.</p>`,
      confirmLabel: 'Create account',
      onDone: () => {
        this.newUser = null;
        void this.load();
      },
    });
  }

  private newUserView(): TemplateResult {
    if (!this.newUser) {
      return html`<button type="button" data-action="new-user" @click=${() => { this.newUser = { username: '', password: '', role: 'user' }; }}>New account…</button>`;
    }
    const fields = this.newUser;
    const touched = fields.username !== '' || fields.password !== '';
    const reasons = touched ? validateNewAccount(fields) : [];
    const set = (patchArg: Partial<typeof fields>) => { this.newUser = { ...fields, ...patchArg }; };
    return html`<form class="inline-form" aria-label="New account" @submit=${(event: Event) => { event.preventDefault(); if (touched && reasons.length === 0) { this.createUser(); } }}>
      <label for="new-user-name">Username</label>
      <input id="new-user-name" autocomplete="off" .value=${fields.username} @input=${(event: Event) => set({ username: (event.target as HTMLInputElement).value })}>
      <label for="new-user-password">Password</label>
      <input id="new-user-password" type="password" autocomplete="new-password" .value=${fields.password} @input=${(event: Event) => set({ password: (event.target as HTMLInputElement).value })}>
      <label for="new-user-role">Role</label>
      <select id="new-user-role" @change=${(event: Event) => set({ role: choiceOf(accountRoles, (event.target as HTMLSelectElement).value) ?? fields.role })}>
        <option value="user" ?selected=${fields.role === 'user'}>user (read-only)</option>
        <option value="admin" ?selected=${fields.role === 'admin'}>admin</option>
      </select>
      <button type="submit" class="primary" data-action="create-user" ?disabled=${!touched || reasons.length > 0}>Review…</button>
      <button type="button" @click=${() => { this.newUser = null; }}>Cancel</button>
      ${formReasonsView(reasons)}
    </form>`;
  }

  private row(userArg: IAccount): TemplateResult {
    const self = api.identity?.userId === userArg.userId;
    const other: TIdentityRole = userArg.role === 'admin' ? 'user' : 'admin';
    return html`<tr data-user=${userArg.username}>
      <th scope="row">${userArg.username}${self ? html` <span class="badge">you</span>` : nothing}</th>
      <td data-role>${userArg.role}</td>
      <td>${userArg.disabled ? html`<span class="badge state-refused">disabled</span>` : 'enabled'}</td>
      <td>${formatTime(userArg.createdAt)}</td>
      <td>${formatTime(userArg.passwordChangedAt)}</td>
      <td class="actions">
        <button type="button" data-action="set-role" @click=${() => this.change(`Make ${userArg.username} ${other}`,
          { method: 'setUserRole', request: { userId: userArg.userId, role: other, expectedGeneration: userArg.generation } },
          `${userArg.username} becomes ${other === 'admin' ? 'an administrator' : 'read-only'}; their sessions must log in again.`, 'Change role', userArg)}>Make ${other}…</button>
        <button type="button" data-action="set-disabled" @click=${() => this.change(`${userArg.disabled ? 'Enable' : 'Disable'} ${userArg.username}`,
          { method: 'setUserDisabled', request: { userId: userArg.userId, disabled: !userArg.disabled, expectedGeneration: userArg.generation } },
          userArg.disabled ? `${userArg.username} may log in again.` : `${userArg.username} can no longer log in, and every session they hold is refused from its next call.`,
          userArg.disabled ? 'Enable' : 'Disable', userArg)}>${userArg.disabled ? 'Enable…' : 'Disable…'}</button>
        <button type="button" class="danger" data-action="delete-user" @click=${() => this.change(`Delete ${userArg.username}`,
          { method: 'deleteUser', request: { userId: userArg.userId, expectedGeneration: userArg.generation } },
          `The account ${userArg.username} is removed; its sessions are refused from their next call.`, 'Delete account', userArg)}>Delete…</button>
      </td>
    </tr>`;
  }

  protected updated(): void {
    if (this.users.length > 0) {
      markFirstRender('users');
    }
  }

  protected render(): TemplateResult {
    return html`<section class="page" data-page="users" aria-labelledby="users-title">
      <header class="page-header"><h1 id="users-title">Users and roles</h1>${this.newUserView()}</header>
      <p class="muted">Administrators change everything; read-only accounts (role <code>user</code>) see every page. Cloudly refuses to remove or demote the last enabled administrator.</p>
      ${this.error ? refusalView(this.error) : nothing}
      <table class="data" aria-label="Accounts">
        <thead><tr><th scope="col">Username</th><th scope="col">Role</th><th scope="col">State</th><th scope="col">Created</th><th scope="col">Password set</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
        <tbody>${this.users.map((user) => this.row(user))}</tbody>
      </table>
      <cloudly-pager label="accounts" .nextCursor=${this.nextCursor}
        @page=${(event: CustomEvent<{ cursor?: string }>) => { this.cursor = event.detail.cursor; void this.load(); }}></cloudly-pager>
    </section>`;
  }
}
customElements.define('cloudly-users-page', CloudlyUsersPage);
