import * as fs from 'node:fs';

/**
 * The simulator's configuration: flags, a small JSON file (`--config`), and the environment the
 * conformance kit and `npm start` use. Every value is judged before anything starts; nonsense is
 * refused with every reason at once (`SimConfigError`, exit code 2 in the CLI).
 */

export interface ISimConfig {
  /** Cloudly's base URL. */
  url: string;
  /** Create the clusters, services (and optionally an address plan) as an administrator. */
  bootstrap: boolean;
  adminUsername: string;
  adminPassword: string | null;
  /** Relay tokens to run (instead of bootstrapping): one simulated cluster per token. */
  tokens: Array<{ name: string; token: string }>;
  /** Bootstrap: how many clusters. */
  clusters: number;
  /** Nodes each simulated cluster reports. */
  nodes: number;
  /** Bootstrap: services created per cluster. */
  services: number;
  /** Bootstrap: replicas per service. */
  replicas: number;
  /** Bootstrap: cluster names are `<prefix>-<n>`. */
  namePrefix: string;
  /** Bootstrap: set a workload address plan when Cloudly has none, so services get leases and projections. */
  addressPlan: boolean;
  /** How long a service stays `starting` before it is `ready` (or `failed`). */
  startDelayMs: number;
  /** Fraction (0–1) of service starts that end `failed`, chosen from the seed. */
  failureRate: number;
  /** Size of each generated database closure. */
  closureBytes: number;
  /** Legacy Corestore services each node's inventory lists. */
  legacyServices: number;
  /** Pause between 64 KiB chunks of a closure upload. */
  faultSlowMs: number;
  /** Fraction of backups whose upload stops half-way (the stream is aborted). */
  faultAbortRate: number;
  /** Fraction of backups whose descriptor names a wrong sha256. */
  faultWrongDigestRate: number;
  /** Every isolated restore (drill) fails when executed: the node reports `failed` with a reason. */
  faultDrillFail: boolean;
  /** How long a node holds its status answer for a staged (`ready`) isolated restore. */
  faultDrillStallMs: number;
  /** Everything random the simulator decides (bytes, failures, faults, traffic) follows from it. */
  seed: number;
  /** Relays start spread over this window (for thousands of relays). */
  rampMs: number;
  reconnectBaseMs: number;
  reconnectCapMs: number;
  /** `text` (one line per event) or `json` (one JSON object per line). */
  logFormat: 'text' | 'json';
  /** CA certificates (PEM) trusted beside the system's for https/wss (`--ca-file`, env CLOUDLY_CA_FILE). */
  caFile: string | null;
  /** Relay tokens and the password may go over plain http to a host other than this machine (`--insecure-plain-http`). */
  insecurePlainHttp: boolean;
  /**
   * The port the fleet answers ACME HTTP-01 challenges on for its clusters' routes (127.0.0.1), as
   * each cluster's ingress would on port 80; 0: not answered.
   */
  acmeHttpPort: number;
}

export class SimConfigError extends Error {
  constructor(public readonly reasons: string[]) {
    super(reasons.join('\n'));
    this.name = 'SimConfigError';
  }
}

export const simUsage = `cloudly-sim: a simulated relay fleet for Cloudly (docs/simulator.md)

  cloudly-sim --bootstrap --admin-password PW [--clusters 3] [--nodes 2] [--services 2] ...
  cloudly-sim --tokens tokens.json        (one simulated cluster per relay token)
  CLOUDLY_URL=… CLOUDLY_RELAY_TOKEN=… cloudly-sim   (one cluster, as the conformance kit starts a relay)

Options (also as camelCase keys of a JSON file given with --config; flags win):
  --url URL                   Cloudly's base URL (env CLOUDLY_URL, default http://127.0.0.1:3000)
  --bootstrap                 create clusters and services as an administrator
  --admin-user NAME           (env CLOUDLY_ADMIN_USERNAME, default admin)
  --admin-password PW         (env CLOUDLY_ADMIN_PASSWORD)
  --tokens FILE               JSON: [{ "name", "token" }] or ["token", …]
  --relay-token TOKEN         one cluster (env CLOUDLY_RELAY_TOKEN)
  --clusters N                bootstrap: clusters (default 3, at least 1)
  --nodes N                   nodes per cluster (default 2, at least 1)
  --services N                bootstrap: services per cluster (default 2)
  --replicas N                bootstrap: replicas per service (default 1)
  --name-prefix TEXT          bootstrap: cluster names <prefix>-<n> (default sim)
  --address-plan              bootstrap: set a workload address plan if Cloudly has none
  --start-delay-ms MS         starting -> ready after this long (default 1000)
  --failure-rate R            fraction 0..1 of starts that fail (default 0)
  --closure-bytes N           bytes of each generated database closure (default 262144)
  --legacy-services N         legacy Corestore services per node inventory (default 2)
  --fault-slow-ms MS          pause between 64 KiB chunks of a closure upload (default 0)
  --fault-abort-rate R        fraction 0..1 of closure uploads aborted half-way (default 0)
  --fault-wrong-digest-rate R fraction 0..1 of closures sent with a wrong sha256 (default 0)
  --fault-drill-fail          every isolated restore (drill) fails when executed
  --fault-drill-stall-ms MS   hold the status answer of a staged isolated restore this long (default 0)
  --seed N                    seed of everything generated (default 1)
  --ramp-ms MS                spread relay starts over this window (default 0)
  --reconnect-base-ms MS      full-jitter base window (default 500)
  --reconnect-cap-ms MS       full-jitter cap (default 30000)
  --log-format text|json      (default text)
  --acme-http-port PORT       answer the routes' ACME HTTP-01 challenges on 127.0.0.1:PORT (default 0: off)
  --ca-file FILE              CA certificates (PEM) to trust beside the system's (env CLOUDLY_CA_FILE)
  --insecure-plain-http       allow tokens and passwords over plain http to a host other than this machine
  --config FILE               JSON file with any of the above
  --help
`;

const defaults: Omit<ISimConfig, 'url' | 'adminUsername' | 'adminPassword' | 'tokens' | 'caFile' | 'insecurePlainHttp'> = {
  bootstrap: false,
  clusters: 3,
  nodes: 2,
  services: 2,
  replicas: 1,
  namePrefix: 'sim',
  addressPlan: false,
  startDelayMs: 1000,
  failureRate: 0,
  closureBytes: 256 * 1024,
  legacyServices: 2,
  faultSlowMs: 0,
  faultAbortRate: 0,
  faultWrongDigestRate: 0,
  faultDrillFail: false,
  faultDrillStallMs: 0,
  seed: 1,
  rampMs: 0,
  reconnectBaseMs: 500,
  reconnectCapMs: 30_000,
  logFormat: 'text',
  acmeHttpPort: 0,
};

type TKind = 'flag' | 'text' | 'count' | 'positive' | 'duration' | 'rate' | 'integer';

/** Every option: its config key and the kind of value it takes. */
const options: Record<string, { key: string; kind: TKind; max?: number }> = {
  'url': { key: 'url', kind: 'text' },
  'bootstrap': { key: 'bootstrap', kind: 'flag' },
  'admin-user': { key: 'adminUsername', kind: 'text' },
  'admin-password': { key: 'adminPassword', kind: 'text' },
  'tokens': { key: 'tokensFile', kind: 'text' },
  'relay-token': { key: 'relayToken', kind: 'text' },
  'clusters': { key: 'clusters', kind: 'positive', max: 100_000 },
  'nodes': { key: 'nodes', kind: 'positive', max: 1024 },
  'services': { key: 'services', kind: 'count', max: 4096 },
  'replicas': { key: 'replicas', kind: 'count', max: 1000 },
  'name-prefix': { key: 'namePrefix', kind: 'text' },
  'address-plan': { key: 'addressPlan', kind: 'flag' },
  'start-delay-ms': { key: 'startDelayMs', kind: 'duration' },
  'failure-rate': { key: 'failureRate', kind: 'rate' },
  'closure-bytes': { key: 'closureBytes', kind: 'positive', max: 64 * 1024 ** 3 },
  'legacy-services': { key: 'legacyServices', kind: 'count', max: 4096 },
  'fault-slow-ms': { key: 'faultSlowMs', kind: 'duration' },
  'fault-abort-rate': { key: 'faultAbortRate', kind: 'rate' },
  'fault-wrong-digest-rate': { key: 'faultWrongDigestRate', kind: 'rate' },
  'fault-drill-fail': { key: 'faultDrillFail', kind: 'flag' },
  'fault-drill-stall-ms': { key: 'faultDrillStallMs', kind: 'duration' },
  'seed': { key: 'seed', kind: 'integer' },
  'ramp-ms': { key: 'rampMs', kind: 'duration' },
  'reconnect-base-ms': { key: 'reconnectBaseMs', kind: 'positive', max: 3_600_000 },
  'reconnect-cap-ms': { key: 'reconnectCapMs', kind: 'positive', max: 3_600_000 },
  'log-format': { key: 'logFormat', kind: 'text' },
  'acme-http-port': { key: 'acmeHttpPort', kind: 'count', max: 65535 },
  'ca-file': { key: 'caFile', kind: 'text' },
  'insecure-plain-http': { key: 'insecurePlainHttp', kind: 'flag' },
  'config': { key: 'configFile', kind: 'text' },
  'help': { key: 'help', kind: 'flag' },
};

const keyToFlag = new Map(Object.entries(options).map(([flag, option]) => [option.key, flag]));

/** Judges one value of `kindArg`; answers the value or a reason. */
const judge = (nameArg: string, kindArg: TKind, rawArg: unknown, maxArg?: number): { value?: unknown; reason?: string } => {
  if (kindArg === 'flag') {
    return typeof rawArg === 'boolean' ? { value: rawArg } : { reason: `${nameArg} takes no value` };
  }
  if (kindArg === 'text') {
    return typeof rawArg === 'string' && rawArg.length > 0 ? { value: rawArg } : { reason: `${nameArg} needs a value` };
  }
  const number = typeof rawArg === 'number' ? rawArg : typeof rawArg === 'string' && rawArg.trim() !== '' ? Number(rawArg) : Number.NaN;
  if (!Number.isFinite(number)) {
    return { reason: `${nameArg} must be a number, not ${JSON.stringify(rawArg)}` };
  }
  if (kindArg === 'rate') {
    return number >= 0 && number <= 1 ? { value: number } : { reason: `${nameArg} must be a fraction from 0 to 1, not ${number}` };
  }
  if (!Number.isInteger(number)) {
    return { reason: `${nameArg} must be a whole number, not ${number}` };
  }
  if (kindArg === 'positive' && number < 1) {
    return { reason: `${nameArg} must be at least 1, not ${number}` };
  }
  if ((kindArg === 'count' || kindArg === 'duration') && number < 0) {
    return { reason: `${nameArg} must not be negative, not ${number}` };
  }
  if (maxArg !== undefined && number > maxArg) {
    return { reason: `${nameArg} must be at most ${maxArg}, not ${number}` };
  }
  return { value: number };
};

/** Reads the flags into raw values keyed by config key; unknown options and missing values are reasons. */
const readFlags = (argvArg: string[], reasonsArg: string[]): Map<string, unknown> => {
  const raw = new Map<string, unknown>();
  for (let index = 0; index < argvArg.length; index++) {
    const argument = argvArg[index];
    if (!argument.startsWith('--')) {
      reasonsArg.push(`unexpected argument ${JSON.stringify(argument)}: options start with --`);
      continue;
    }
    const [name, inline] = argument.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
    const option = options[name];
    if (!option) {
      reasonsArg.push(`unknown option --${name}`);
      continue;
    }
    if (option.kind === 'flag') {
      if (inline !== undefined) {
        reasonsArg.push(`--${name} takes no value`);
        continue;
      }
      raw.set(option.key, true);
      continue;
    }
    let value = inline;
    if (value === undefined) {
      const next = argvArg[index + 1];
      // A negative number is a value, not an option: "--start-delay-ms -5" is judged as -5.
      if (next === undefined || (next.startsWith('--') && !/^-\d/.test(next.slice(1)))) {
        reasonsArg.push(`--${name} needs a value`);
        continue;
      }
      value = next;
      index++;
    }
    raw.set(option.key, value);
  }
  return raw;
};

const readTokensFile = (fileArg: string, reasonsArg: string[]): Array<{ name: string; token: string }> => {
  let parsed: unknown;
  try {
    parsed = JSON.parse(fs.readFileSync(fileArg, 'utf8'));
  } catch (error) {
    reasonsArg.push(`--tokens ${fileArg} could not be read as JSON: ${(error as Error).message}`);
    return [];
  }
  if (!Array.isArray(parsed) || parsed.length === 0) {
    reasonsArg.push(`--tokens ${fileArg} must hold a non-empty array of tokens or { "name", "token" } entries`);
    return [];
  }
  const tokens: Array<{ name: string; token: string }> = [];
  parsed.forEach((entryArg: unknown, indexArg) => {
    const entry = typeof entryArg === 'string' ? { name: `cluster-${indexArg + 1}`, token: entryArg } : entryArg as { name?: unknown; token?: unknown };
    if (!entry || typeof entry !== 'object' || typeof entry.token !== 'string' || entry.token.length === 0) {
      reasonsArg.push(`--tokens ${fileArg}[${indexArg}] must be a token or { "name", "token" }`);
      return;
    }
    tokens.push({ name: typeof entry.name === 'string' && entry.name ? entry.name : `cluster-${indexArg + 1}`, token: entry.token });
  });
  return tokens;
};

export interface ISimConfigParse {
  help: boolean;
  config: ISimConfig;
}

/**
 * Reads the configuration from flags, an optional JSON file and the environment. Throws
 * `SimConfigError` naming every reason when anything makes no sense.
 */
export const readSimConfig = (argvArg: string[], envArg: NodeJS.ProcessEnv = process.env): ISimConfigParse => {
  const reasons: string[] = [];
  const flags = readFlags(argvArg, reasons);
  const merged = new Map<string, unknown>();
  const configFile = flags.get('configFile');
  if (typeof configFile === 'string') {
    try {
      const parsed = JSON.parse(fs.readFileSync(configFile, 'utf8')) as unknown;
      if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
        reasons.push(`--config ${configFile} must hold a JSON object`);
      } else {
        for (const [key, value] of Object.entries(parsed)) {
          if (!keyToFlag.has(key) || key === 'configFile' || key === 'help') {
            reasons.push(`--config ${configFile}: unknown key ${JSON.stringify(key)}`);
            continue;
          }
          merged.set(key, typeof value === 'number' ? value : value);
        }
      }
    } catch (error) {
      reasons.push(`--config ${configFile} could not be read as JSON: ${(error as Error).message}`);
    }
  }
  for (const [key, value] of flags) {
    merged.set(key, value);
  }
  const values: Record<string, unknown> = { ...defaults };
  for (const [key, raw] of merged) {
    if (key === 'configFile') {
      continue;
    }
    const flag = keyToFlag.get(key)!;
    const verdict = judge(`--${flag}`, options[flag].kind, raw, options[flag].max);
    if (verdict.reason) {
      reasons.push(verdict.reason);
    } else {
      values[key] = verdict.value;
    }
  }
  if (values.help === true) {
    return { help: true, config: null as unknown as ISimConfig };
  }
  if (values.logFormat !== 'text' && values.logFormat !== 'json') {
    reasons.push(`--log-format must be text or json, not ${JSON.stringify(values.logFormat)}`);
  }
  if (typeof values.namePrefix === 'string' && !/^[a-z0-9][a-z0-9-]{0,40}$/.test(values.namePrefix)) {
    reasons.push('--name-prefix must be 1–41 lowercase letters, digits or -, starting with a letter or digit');
  }
  if ((values.reconnectCapMs as number) < (values.reconnectBaseMs as number)) {
    reasons.push(`--reconnect-cap-ms (${values.reconnectCapMs}) must not be below --reconnect-base-ms (${values.reconnectBaseMs})`);
  }
  const caFile = (values.caFile as string | undefined) ?? envArg.CLOUDLY_CA_FILE ?? null;
  if (caFile !== null && !fs.existsSync(caFile)) {
    reasons.push(`--ca-file ${caFile} does not exist`);
  }
  const url = (values.url as string | undefined) ?? envArg.CLOUDLY_URL ?? 'http://127.0.0.1:3000';
  try {
    const parsed = new URL(url);
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
      reasons.push(`--url must be an http(s) URL, not ${url}`);
    }
  } catch {
    reasons.push(`--url must be an http(s) URL, not ${JSON.stringify(url)}`);
  }
  let tokens: Array<{ name: string; token: string }> = [];
  const sources = [values.bootstrap === true ? '--bootstrap' : null, values.tokensFile ? '--tokens' : null, values.relayToken ? '--relay-token' : null].filter(Boolean);
  if (sources.length > 1) {
    reasons.push(`${sources.join(' and ')} exclude each other: give one way to find the clusters`);
  }
  if (values.tokensFile) {
    tokens = readTokensFile(values.tokensFile as string, reasons);
  } else if (values.relayToken) {
    tokens = [{ name: 'cluster-1', token: values.relayToken as string }];
  } else if (values.bootstrap !== true && envArg.CLOUDLY_RELAY_TOKEN) {
    tokens = [{ name: 'cluster-1', token: envArg.CLOUDLY_RELAY_TOKEN }];
  }
  const bootstrapOnly = ['clusters', 'services', 'replicas', 'namePrefix', 'addressPlan'].filter((keyArg) => merged.has(keyArg));
  if (values.bootstrap !== true && bootstrapOnly.length > 0) {
    reasons.push(`${bootstrapOnly.map((keyArg) => `--${keyToFlag.get(keyArg)}`).join(', ')} only apply with --bootstrap (with tokens, each token is one cluster)`);
  }
  const adminPassword = (values.adminPassword as string | undefined) ?? envArg.CLOUDLY_ADMIN_PASSWORD ?? null;
  if (values.bootstrap === true && !adminPassword) {
    reasons.push('--bootstrap needs the administrator password: --admin-password or CLOUDLY_ADMIN_PASSWORD');
  }
  if (values.bootstrap !== true && tokens.length === 0 && sources.length <= 1 && reasons.length === 0) {
    reasons.push('no clusters to simulate: give --bootstrap, --tokens FILE, --relay-token TOKEN or CLOUDLY_RELAY_TOKEN');
  }
  if (reasons.length > 0) {
    throw new SimConfigError(reasons);
  }
  const config: ISimConfig = {
    ...(values as unknown as ISimConfig),
    url: url.replace(/\/+$/, ''),
    adminUsername: (values.adminUsername as string | undefined) ?? envArg.CLOUDLY_ADMIN_USERNAME ?? 'admin',
    adminPassword,
    tokens,
    caFile,
    insecurePlainHttp: values.insecurePlainHttp === true || envArg.CLOUDLY_INSECURE_PLAIN_HTTP === '1',
  };
  for (const key of ['help', 'tokensFile', 'relayToken'] as const) {
    delete (config as unknown as Record<string, unknown>)[key];
  }
  return { help: false, config };
};
