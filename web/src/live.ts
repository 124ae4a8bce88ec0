import type { IChangeEvent } from '../../ts/interfaces/requests/watch.js';
import { api } from './api.js';
import { LightElement } from './widgets.js';

/** The cluster a change belongs to, when the event says so. */
export const clusterOfChange = (changeArg: IChangeEvent): string | null => {
  // These kinds are stored under their cluster's id.
  if (['CloudlyCluster', 'CloudlyClusterRelayRegistration', 'CloudlyClusterIngressSlot', 'CloudlyClusterDesiredState'].includes(changeArg.kind)) {
    return changeArg.id;
  }
  if (typeof changeArg.clusterId === 'string') {
    return changeArg.clusterId;
  }
  const document = changeArg.document as { clusterId?: unknown } | undefined;
  return typeof document?.clusterId === 'string' ? document.clusterId : null;
};

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
