import * as promClient from 'prom-client';
import { connectionRefusalReasons } from './connectionlimits.js';

/**
 * The process's own metrics (CPU, memory, heap, handles, event loop delay, garbage collection),
 * collected once per process and added to every instance's scrape: they describe the process,
 * which several instances may share (tests, the fleet bench). prom-client's collector starts a
 * garbage-collection observer and an event-loop-delay timer each time it is called and never
 * stops them, so one call per instance left every stopped instance's behind, all still running.
 *
 * The event-loop-delay timer samples every `eventLoopSampleMs` instead of prom-client's 10 ms: a
 * hundred wakeups a second were about half of an idle Cloudly's CPU (docs/testing.md has the
 * figures). A delay is still measured exactly when a sample falls in it; a stall shorter than the
 * interval between samples can be missed.
 */
const eventLoopSampleMs = 50;
let processRegistry: promClient.Registry | null = null;
const processMetrics = (): promClient.Registry => {
  if (!processRegistry) {
    processRegistry = new promClient.Registry();
    promClient.collectDefaultMetrics({ register: processRegistry, prefix: 'cloudly_', eventLoopMonitoringPrecision: eventLoopSampleMs });
  }
  return processRegistry;
};

/** Prometheus metrics of one Cloudly instance (its own registry, so several can share a process). */
export class CloudlyMetrics {
  public readonly registry = new promClient.Registry();
  public readonly calls: promClient.Counter<'method' | 'outcome' | 'transport'>;
  public readonly latency: promClient.Histogram<'method'>;
  public readonly relaySockets: promClient.Gauge;
  public readonly relayCalls: promClient.Counter<'method' | 'outcome'>;
  public readonly connectionRefusals: promClient.Counter<'reason'>;
  /** Answers on a socket to calls Cloudly never made (docs/boundary.md). */
  public readonly unsolicitedResponses: promClient.Counter;
  /** Sockets Cloudly closed with a close code of its own, by that code's reason. */
  public readonly socketsClosed: promClient.Counter<'reason'>;
  /** Set by the transport: connections that have not completed headers or upgrade right now. */
  public pendingConnections: () => number = () => 0;
  /** Set by the server: whether the embedded database is read-only because its disk is full. */
  public storageReadOnly: () => boolean = () => false;
  /** Set by the watch: the most bytes of watch events one admin socket held unanswered or unsent, since start. */
  public watchSocketBytesHighWater: () => number = () => 0;
  /** Set by the transport: open connections right now. */
  public establishedConnections: () => number = () => 0;
  /** Set by the server: database commands sent so far. */
  public databaseCommands: () => number = () => 0;
  /** Set by the server: how the listener is protected (docs/tls.md). */
  public listener: () => { tls: boolean; plainHttpExposed: boolean; notAfterMs: number | null; reloads: { ok: number; refused: number } | null } =
    () => ({ tls: false, plainHttpExposed: false, notAfterMs: null, reloads: null });
  /** Set by the server: relay calls of a storm waiting for a slot now, and those that waited so far (CLOUDLY_RELAY_WORK_CONCURRENCY). */
  public relayCallGate: () => { queued: number; waitedTotal: number; droppedTotal: number } = () => ({ queued: 0, waitedTotal: 0, droppedTotal: 0 });

  constructor() {
    this.calls = new promClient.Counter({
      name: 'cloudly_calls_total',
      help: 'Typed requests answered, by method, outcome (ok or error code) and transport.',
      labelNames: ['method', 'outcome', 'transport'],
      registers: [this.registry],
    });
    this.latency = new promClient.Histogram({
      name: 'cloudly_call_duration_seconds',
      help: 'Time from a typed request arriving to its answer.',
      labelNames: ['method'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [this.registry],
    });
    this.relaySockets = new promClient.Gauge({
      name: 'cloudly_relay_sockets_open',
      help: 'Authenticated relay sockets open right now.',
      registers: [this.registry],
    });
    this.relayCalls = new promClient.Counter({
      name: 'cloudly_relay_calls_total',
      help: 'Calls Cloudly made on relay sockets, by method and outcome.',
      labelNames: ['method', 'outcome'],
      registers: [this.registry],
    });
    this.connectionRefusals = new promClient.Counter({
      name: 'cloudly_connections_refused_total',
      help: 'Connections refused or ended before a request: established-per-address, established-total, pending-per-address, pending-total (refused at accept), headers-timeout, or relay-capacity (a relay upgrade beyond CLOUDLY_MAX_RELAYS_PER_INSTANCE).',
      labelNames: ['reason'],
      registers: [this.registry],
    });
    for (const reason of connectionRefusalReasons) {
      this.connectionRefusals.inc({ reason }, 0);
    }
    this.unsolicitedResponses = new promClient.Counter({
      name: 'cloudly_socket_unsolicited_responses_total',
      help: 'Answers received on sockets to calls Cloudly never made (answered invalid-request unsolicited-response).',
      registers: [this.registry],
    });
    this.socketsClosed = new promClient.Counter({
      name: 'cloudly_sockets_closed_total',
      help: 'Sockets Cloudly closed for their behaviour: unsolicited-responses (4003) or watch-behind (4002, a watcher that fell behind).',
      labelNames: ['reason'],
      registers: [this.registry],
    });
    for (const reason of ['unsolicited-responses', 'watch-behind']) {
      this.socketsClosed.inc({ reason }, 0);
    }
    const metrics = this;
    new promClient.Gauge({
      name: 'cloudly_relay_calls_queued',
      help: 'Relay calls of a reconnect storm waiting for their turn (CLOUDLY_RELAY_WORK_CONCURRENCY) right now.',
      registers: [this.registry],
      collect() {
        this.set(metrics.relayCallGate().queued);
      },
    });
    this.pulledCounter('cloudly_relay_calls_queued_total', 'Relay calls of a reconnect storm that waited for their turn (CLOUDLY_RELAY_WORK_CONCURRENCY).',
      () => metrics.relayCallGate().waitedTotal);
    this.pulledCounter('cloudly_relay_calls_dropped_total', 'Relay calls of a reconnect storm not run when their turn came because their socket had closed meanwhile.',
      () => metrics.relayCallGate().droppedTotal);
    new promClient.Gauge({
      name: 'cloudly_watch_socket_bytes_max',
      help: 'The most bytes of watch events one admin socket has held unanswered or unsent since start (bounded by CLOUDLY_WATCH_BUFFER_BYTES plus one event).',
      registers: [this.registry],
      collect() {
        this.set(metrics.watchSocketBytesHighWater());
      },
    });
    new promClient.Gauge({
      name: 'cloudly_connections_established',
      help: 'Open connections (any state: pending, HTTP, sockets) right now (CLOUDLY_CONNECTIONS_TOTAL).',
      registers: [this.registry],
      collect() {
        this.set(metrics.establishedConnections());
      },
    });
    new promClient.Gauge({
      name: 'cloudly_connections_pending',
      help: 'Connections that have not completed their headers or WebSocket upgrade yet.',
      registers: [this.registry],
      collect() {
        this.set(metrics.pendingConnections());
      },
    });
    new promClient.Gauge({
      name: 'cloudly_storage_read_only',
      help: '1 while the embedded database serves reads only because its disk is full (writes refused storage-full), else 0.',
      registers: [this.registry],
      collect() {
        this.set(metrics.storageReadOnly() ? 1 : 0);
      },
    });
    this.pulledCounter('cloudly_database_commands_total', 'Database commands this instance has sent (one per connection taken from the driver\'s pool, and one per write handed to the embedded database in the process).',
      () => metrics.databaseCommands());
    new promClient.Gauge({
      name: 'cloudly_listener_plain_http_exposed',
      help: '1 when Cloudly listens in plain HTTP on a non-loopback address without CLOUDLY_ALLOW_PLAIN_HTTP (credentials cross the network in clear), else 0.',
      registers: [this.registry],
      collect() {
        this.set(metrics.listener().plainHttpExposed ? 1 : 0);
      },
    });
    new promClient.Gauge({
      name: 'cloudly_tls_certificate_expiry_timestamp_seconds',
      help: 'When the certificate Cloudly serves expires (Unix time, seconds); 0 without TLS, or while ACME has issued none yet.',
      registers: [this.registry],
      collect() {
        this.reset();
        const notAfterMs = metrics.listener().notAfterMs;
        if (notAfterMs !== null) {
          this.set(Math.floor(notAfterMs / 1000));
        }
      },
    });
    new promClient.Counter({
      name: 'cloudly_tls_reloads_total',
      help: 'Certificate reloads (file replaced or SIGHUP), by outcome: ok, or refused (the certificate already served stays).',
      labelNames: ['outcome'],
      registers: [this.registry],
      collect() {
        this.reset();
        const reloads = metrics.listener().reloads;
        if (reloads) {
          this.inc({ outcome: 'ok' }, reloads.ok);
          this.inc({ outcome: 'refused' }, reloads.refused);
        }
      },
    });
    processMetrics();
  }

  /**
   * The Prometheus text of a scrape: this instance's metrics and the process's; only the named
   * metrics when names are given (`GET /metrics?name=…`, as node_exporter's `collect[]`), so a
   * scrape of one counter does not also run the fleet gauges' database queries.
   */
  public async text(namesArg: readonly string[] = []): Promise<{ contentType: string; text: string }> {
    const merged = promClient.Registry.merge([this.registry, processMetrics()]);
    if (namesArg.length === 0) {
      return { contentType: merged.contentType, text: await merged.metrics() };
    }
    const texts: string[] = [];
    for (const name of new Set(namesArg)) {
      if (merged.getSingleMetric(name)) {
        texts.push(await merged.getSingleMetricAsString(name));
      }
    }
    return { contentType: merged.contentType, text: texts.map((textArg) => `${textArg}\n`).join('') };
  }

  /** A counter whose total another part keeps: read at each scrape, so it costs nothing between. */
  private pulledCounter(nameArg: string, helpArg: string, totalArg: () => number): void {
    new promClient.Counter({
      name: nameArg,
      help: helpArg,
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(totalArg());
      },
    });
  }
}
