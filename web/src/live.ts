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
 * socket came back (the page lists again). No timers poll anything.
 */
export abstract class LivePage extends LightElement {
  private readonly changeListener = (eventArg: Event) => this.onChange((eventArg as CustomEvent<IChangeEvent>).detail);
  private readonly resyncListener = () => this.onResync();

  connectedCallback(): void {
    super.connectedCallback();
    api.addEventListener('change', this.changeListener);
    api.addEventListener('resync', this.resyncListener);
  }

  disconnectedCallback(): void {
    api.removeEventListener('change', this.changeListener);
    api.removeEventListener('resync', this.resyncListener);
    super.disconnectedCallback();
  }

  protected abstract onChange(changeArg: IChangeEvent): void;
  protected abstract onResync(): void;
}
