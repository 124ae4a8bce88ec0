import * as promClient from 'prom-client';

/** Prometheus metrics of one Cloudly instance (its own registry, so several can share a process). */
export class CloudlyMetrics {
  public readonly registry = new promClient.Registry();
  public readonly calls: promClient.Counter<'method' | 'outcome' | 'transport'>;
  public readonly latency: promClient.Histogram<'method'>;
  public readonly relaySockets: promClient.Gauge;
  public readonly relayCalls: promClient.Counter<'method' | 'outcome'>;

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
    promClient.collectDefaultMetrics({ register: this.registry, prefix: 'cloudly_' });
  }
}
