import type { IChangeEvent } from '../../ts/interfaces/requests/watch.js';
import { api } from './api.js';
import { LightElement } from './widgets.js';

/**
 * The cluster a change belongs to, as the server names it: every event carries the cluster its
 * document's kind declares as owner (the cluster itself, its relay registration, a node, a
 * service, a verdict), so the page does not work it out again.
 */
export const clusterOfChange = (changeArg: IChangeEvent): string | null =>
  (typeof changeArg.clusterId === 'string' ? changeArg.clusterId : null);

/**
 * A page that follows the admin socket's watch: `onChange` for each change, `onResync` when the
 * socket came back (the page lists again). No timers poll anything. While the connection is lost
 * the page carries `data-stale` and the class `stale` (its data greyed, no green badge), until its
 * `onResync` read, begun after the last loss, has finished.
 */
export abstract class LivePage extends LightElement {
  private readonly changeListener = (eventArg: Event) => this.onChange((eventArg as CustomEvent<IChangeEvent>).detail);
  private readonly resyncListener = () => void this.readAgain();
  private readonly staleListener = () => this.showStale();

  connectedCallback(): void {
    super.connectedCallback();
    api.addEventListener('change', this.changeListener);
    api.addEventListener('resync', this.resyncListener);
    api.addEventListener('stale', this.staleListener);
    this.showStale();
    if (api.stale && api.status === 'live') {
      // Opened while stale after the connection came back: this page's first read is its re-read.
      void this.readAgain();
    }
  }

  disconnectedCallback(): void {
    api.removeEventListener('change', this.changeListener);
    api.removeEventListener('resync', this.resyncListener);
    api.removeEventListener('stale', this.staleListener);
    super.disconnectedCallback();
  }

  private async readAgain(): Promise<void> {
    const losses = api.losses;
    // A failed read shows its refusal on the page; a lost connection counted a new loss.
    await this.onResync().catch(() => undefined);
    if (this.isConnected) {
      api.markRead(losses);
    }
  }

  private showStale(): void {
    this.toggleAttribute('data-stale', api.stale);
    this.classList.toggle('stale', api.stale);
  }

  protected abstract onChange(changeArg: IChangeEvent): void;
  /** Reads everything the page shows again; resolves when the read has finished (or failed and says so). */
  protected abstract onResync(): Promise<void>;
}
