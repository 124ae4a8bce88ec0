/**
 * A fleet of relays in a process of its own (bench/fleet.bench.ts forks it), so the relays' event
 * loop never delays the benchmark's own admin calls and its measurements.
 *
 * Each relay is the project's relay client (`CloudlyRelayClient`) with its registration, opened
 * and reopened with the client's reconnect policy (full jitter from 500 ms to 30 s, Cloudly's
 * `Retry-After` / `retryAfterMs` honoured: `reconnectDelayMs`). The loop is this file's and not
 * the client's own reconnect because a lost instance must send the relay to another address, as a
 * load balancer would: relay i starts at `urls[i % urls.length]` and moves to the next address
 * after each failed attempt.
 *
 * Messages from the parent: `{ kind: 'start', urls, tokens, reportMs?, rampMs? }`, `{ kind:
 * 'stats' }`, `{ kind: 'stop' }`. Answers: `{ kind: 'stats', … }` (see IFleetStats), `{ kind:
 * 'stopped' }`.
 */
import { performance } from 'node:perf_hooks';
import { CloudlyRelayClient, defaultRelayReconnectPolicy, policyAfterFailure, reconnectDelayMs, retryAfterMsOf } from '../../ts/client/relay.js';
import { CloudlyTransportError } from '../../ts/client/transport.js';
import type { IReq_Relay_Cloudly_ReportClusterPlatformObservedState } from '../../ts/interfaces/requests/desiredstate.js';

export interface IFleetStats {
  kind: 'stats';
  relays: number;
  registered: number;
  /** Registered relays per URL. */
  perUrl: Record<string, number>;
  /** Failed socket opens and registrations since start, by what failed. */
  failures: Record<string, number>;
  /** Attempts (socket opens) per relay until its current registration, over the relays that connected since the last reset: max and p99. */
  attemptsMax: number;
  attemptsP99: number;
  /** Sum of the waits chosen between attempts (ms), all relays. */
  waitedMs: number;
  /** Observed-state reports sent (steady state). */
  reports: number;
  rssBytes: number;
}

type TParentMessage =
  | { kind: 'start'; urls: string[]; tokens: string[]; reportMs?: number; rampMs?: number }
  | { kind: 'report'; reportMs: number }
  | { kind: 'stats'; resetFailures?: boolean }
  | { kind: 'stop' };

const registration = { origin: 'http://192.0.2.10:8080', version: 'fleet-bench/1', protocol: 'cluster-relay/1' as const };
const sleep = (msArg: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, msArg));

/** What a failed attempt was, for the failure counts: an HTTP status, a socket error code, a refusal reason. */
const failureKind = (errorArg: unknown): string => {
  if (errorArg instanceof CloudlyTransportError) {
    return `http-${errorArg.status}`;
  }
  const code = (errorArg as { code?: unknown })?.code;
  if (typeof code === 'string') {
    return code;
  }
  const reasons = (errorArg as { errorData?: { reasons?: unknown } })?.errorData?.reasons;
  if (Array.isArray(reasons) && typeof reasons[0] === 'string') {
    return reasons[0];
  }
  return (errorArg as Error)?.message?.slice(0, 60) ?? 'unknown';
};

const failures: Record<string, number> = {};
const countFailure = (kindArg: string): void => {
  failures[kindArg] = (failures[kindArg] ?? 0) + 1;
};

class FleetRelay {
  public client: CloudlyRelayClient | null = null;
  public registered = false;
  public url = '';
  public attempts = 0;
  /** Whether this relay (re)connected since the last stats reset: the storm measured now concerned it. */
  public ranSinceReset = false;
  public waitedMs = 0;
  private stopped = false;
  private next: number;

  constructor(private readonly token: string, private readonly urls: string[], indexArg: number) {
    this.next = indexArg % urls.length;
  }

  /** Opens and registers until both succeed; reopens (elsewhere) whenever the socket is lost. */
  public async run(): Promise<void> {
    let advisedMs: number | null = null;
    let lastError: unknown = null;
    this.attempts = 0;
    this.ranSinceReset = true;
    for (let attempt = 0; !this.stopped; attempt++) {
      if (attempt > 0) {
        const delay = reconnectDelayMs(attempt - 1, policyAfterFailure(defaultRelayReconnectPolicy, lastError), Math.random, advisedMs);
        this.waitedMs += delay;
        await sleep(delay);
      }
      advisedMs = null;
      const url = this.urls[this.next];
      this.attempts++;
      try {
        const client = await CloudlyRelayClient.connect(url, this.token, {
          reconnect: false,
          registration,
          onRegistrationRetry: (retryArg) => countFailure(retryArg.reason ?? 'registration-retry'),
        });
        if (this.stopped) {
          client.close();
          return;
        }
        this.client = client;
        this.url = url;
        this.registered = true;
        client.onClose(() => {
          if (this.client === client) {
            this.client = null;
            this.registered = false;
            if (!this.stopped) {
              void this.run();
            }
          }
        });
        return;
      } catch (error) {
        lastError = error;
        countFailure(failureKind(error));
        if (error instanceof CloudlyTransportError) {
          advisedMs = error.retryAfterMs;
        } else {
          advisedMs = retryAfterMsOf(error);
        }
        // The next address, as a load balancer sends a retry to another backend.
        this.next = (this.next + 1) % this.urls.length;
      }
    }
  }

  /** One observed-state report of an unchanged cluster (the steady state's traffic). */
  public async report(): Promise<boolean> {
    const client = this.client;
    if (!client || !client.isOpen) {
      return false;
    }
    try {
      await client.fire<IReq_Relay_Cloudly_ReportClusterPlatformObservedState>('reportClusterPlatformObservedState', { desiredRevision: 0, services: [] });
      return true;
    } catch (error) {
      countFailure(`report:${failureKind(error)}`);
      return false;
    }
  }

  public stop(): void {
    this.stopped = true;
    this.client?.close();
  }
}

let relays: FleetRelay[] = [];
let reports = 0;
let reportTimer: NodeJS.Timeout | null = null;

const stats = (): IFleetStats => {
  // Only the relays the storm concerned: after one instance is killed, a relay elsewhere still holds
  // the attempts of an earlier storm, which are not this one's.
  const attempts = relays.filter((relay) => relay.ranSinceReset).map((relay) => relay.attempts).sort((x, y) => x - y);
  const perUrl: Record<string, number> = {};
  let registered = 0;
  let waitedMs = 0;
  for (const relay of relays) {
    waitedMs += relay.waitedMs;
    if (relay.registered) {
      registered++;
      perUrl[relay.url] = (perUrl[relay.url] ?? 0) + 1;
    }
  }
  return {
    kind: 'stats',
    relays: relays.length,
    registered,
    perUrl,
    failures: { ...failures },
    attemptsMax: attempts.at(-1) ?? 0,
    attemptsP99: attempts[Math.min(attempts.length - 1, Math.floor(attempts.length * 0.99))] ?? 0,
    waitedMs,
    reports,
    rssBytes: process.memoryUsage().rss,
  };
};

/**
 * Each relay reports every `periodMsArg`, spread evenly over the period (a fleet's reports do not
 * arrive in step); 0 stops the reports.
 */
const startReporting = (periodMsArg: number): void => {
  if (reportTimer) {
    clearInterval(reportTimer);
    reportTimer = null;
  }
  if (periodMsArg <= 0 || relays.length === 0) {
    return;
  }
  const tickMs = 100;
  let cursor = 0;
  let owed = 0;
  reportTimer = setInterval(() => {
    owed += (relays.length * tickMs) / periodMsArg;
    for (; owed >= 1; owed--) {
      const relay = relays[cursor % relays.length];
      cursor++;
      void relay.report().then((sentArg) => {
        if (sentArg) {
          reports++;
        }
      });
    }
  }, tickMs);
};

process.on('message', (messageArg: TParentMessage) => {
  if (messageArg.kind === 'start') {
    relays = messageArg.tokens.map((token, index) => new FleetRelay(token, messageArg.urls, index));
    const rampMs = messageArg.rampMs ?? 0;
    const started = performance.now();
    for (const [index, relay] of relays.entries()) {
      // Every relay at the same moment unless a ramp spreads them.
      const at = rampMs > 0 ? Math.floor((index / relays.length) * rampMs) : 0;
      setTimeout(() => void relay.run(), Math.max(0, at - (performance.now() - started)));
    }
    startReporting(messageArg.reportMs ?? 0);
  } else if (messageArg.kind === 'report') {
    startReporting(messageArg.reportMs);
  } else if (messageArg.kind === 'stats') {
    const answer = stats();
    if (messageArg.resetFailures) {
      for (const key of Object.keys(failures)) {
        delete failures[key];
      }
      for (const relay of relays) {
        relay.waitedMs = 0;
        relay.ranSinceReset = false;
      }
    }
    process.send!(answer);
  } else if (messageArg.kind === 'stop') {
    if (reportTimer) {
      clearInterval(reportTimer);
    }
    for (const relay of relays) {
      relay.stop();
    }
    process.send!({ kind: 'stopped' }, () => process.exit(0));
  }
});
process.on('disconnect', () => process.exit(0));
