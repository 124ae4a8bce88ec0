import type { ICloudlyMethods, TCloudlyMethod } from '../../ts/interfaces/requests/methodmap.js';

/**
 * A method's request as the dashboard passes it: the identity is added by `api.call`. Kept apart
 * from api.ts (which needs the DOM) so the pure modules that build requests (drafts.ts) and their
 * tests under Node type-check without the browser.
 */
export type TDashboardRequest<M extends TCloudlyMethod> = Omit<ICloudlyMethods[M]['request'], 'identity'> & { dryRun?: boolean };
