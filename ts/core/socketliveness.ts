import type { WebSocket } from 'ws';

/**
 * WebSocket liveness: a heartbeat of protocol-level pings. A socket whose other end stopped
 * reading (a hung process, a half-open TCP connection) never says so; without pings Cloudly would
 * keep it, its relay election and its pending calls for ever. Both Cloudly (every socket) and the
 * clients (their one socket) run it. A pong or any frame from the peer counts as a sign of life:
 * on a slow link a ping can wait behind megabytes of stream data in either direction, while the
 * peer's own frames (credit, data, answers) show it is still there. A hung process or a
 * half-open connection sends nothing at all.
 */

export interface ISocketLivenessTiming {
  /** How often a ping is sent. */
  intervalMs: number;
  /** Pings in a row that may stay unanswered (with no other frame meanwhile); at the next tick the socket is terminated. */
  missedPongsAllowed: number;
}

export const defaultSocketLivenessTiming: ISocketLivenessTiming = Object.freeze({
  intervalMs: 5_000,
  missedPongsAllowed: 2,
});

/**
 * The longest a dead peer keeps its socket: the freeze can fall just after a tick, then every
 * allowed ping goes unanswered, and the tick after the last one terminates.
 */
export const longestDeadSocketMs = (timingArg: ISocketLivenessTiming): number =>
  timingArg.intervalMs * (timingArg.missedPongsAllowed + 1);

/**
 * Pings the socket every `intervalMs` and terminates it when `missedPongsAllowed` pings in a row
 * went unanswered. Stops by itself when the socket closes; returns a function that stops it early.
 */
export const watchSocketLiveness = (
  socketArg: WebSocket,
  timingArg: ISocketLivenessTiming = defaultSocketLivenessTiming,
  onDeadArg?: () => void,
): (() => void) => {
  let unanswered = 0;
  const onLife = (): void => {
    unanswered = 0;
  };
  const timer = setInterval(() => {
    if (socketArg.readyState !== socketArg.OPEN) {
      stop();
      return;
    }
    if (unanswered >= timingArg.missedPongsAllowed) {
      stop();
      onDeadArg?.();
      // terminate, not close: a peer that does not read would never answer a close handshake.
      socketArg.terminate();
      return;
    }
    unanswered++;
    try {
      socketArg.ping();
    } catch {
      // The socket is closing; its close event ends the heartbeat.
    }
  }, timingArg.intervalMs);
  timer.unref();
  const stop = (): void => {
    clearInterval(timer);
    socketArg.off('pong', onLife);
    socketArg.off('message', onLife);
    socketArg.off('close', stop);
  };
  socketArg.on('pong', onLife);
  socketArg.on('message', onLife);
  socketArg.on('close', stop);
  return stop;
};
