import { CloudlyAdminClient } from '../../ts/client/admin.js';
import type { IChangeEvent, IReq_Admin_WatchChanges, IReq_Cloudly_Admin_ChangeEvent } from '../../ts/interfaces/requests/watch.js';
import { testAdminPassword, testAdminUsername } from './cloudly.js';

/**
 * A watcher on its own admin socket (the test administrator's login, or the account given): every
 * `changeEvent` it receives is kept in `events`, in arrival order, and `answer` is what `watchChanges` answered.
 */
export const openWatcher = async (
  baseUrlArg: string,
  requestArg: IReq_Admin_WatchChanges['request'] | Record<string, unknown>,
  loginArg: { username: string; password: string } = { username: testAdminUsername, password: testAdminPassword },
) => {
  const client = new CloudlyAdminClient(baseUrlArg, { liveness: false });
  await client.login(loginArg.username, loginArg.password);
  await client.connectSocket();
  const events: IChangeEvent[] = [];
  client.handleCall<IReq_Cloudly_Admin_ChangeEvent>('changeEvent', (eventArg) => {
    events.push(eventArg);
  });
  const answer = await client.call('watchChanges', requestArg as never);
  return { client, events, answer };
};
