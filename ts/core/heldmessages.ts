import type { RawData, WebSocket } from 'ws';

const heldMessagesKey = Symbol.for('cloudly.envelopePeer.heldMessages');

interface IHeldMessages {
  messages: Array<[RawData, boolean]>;
  hold: (dataArg: RawData, isBinaryArg: boolean) => void;
}

/**
 * Keeps every frame a socket receives until an `EnvelopePeer` takes the socket over. `ws` emits
 * the frames that came with or right after the upgrade in the same tick as `open`, before code
 * awaiting the open can attach a listener, and Cloudly may call a relay's socket the moment it
 * opens (the route-table hint).
 */
export const holdEarlyMessages = (socketArg: WebSocket): void => {
  const held: IHeldMessages = { messages: [], hold: (dataArg, isBinaryArg) => { held.messages.push([dataArg, isBinaryArg]); } };
  (socketArg as unknown as Record<symbol, IHeldMessages>)[heldMessagesKey] = held;
  socketArg.on('message', held.hold);
};

/** The frames held for this socket, in order; stops holding (none when nothing held them). */
export const takeHeldMessages = (socketArg: WebSocket): Array<[RawData, boolean]> => {
  const record = socketArg as unknown as Record<symbol, IHeldMessages | undefined>;
  const held = record[heldMessagesKey];
  if (!held) {
    return [];
  }
  socketArg.off('message', held.hold);
  delete record[heldMessagesKey];
  return held.messages.splice(0);
};
