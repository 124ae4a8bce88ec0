import { randomUUID } from 'node:crypto';
import { addSecretCommands } from './secrets.js';
import { Command } from 'commander';
import {
  choiceOption, collect, exitCodes, expectedGeneration, generatedOnCommitOf, loadAdminClient, noteDryRun, openContext, parseFormat, parseInteger, readJsonFile, reportFailure,
  madeByTheRealCall, namedServer, requireOption, resolveContext, UsageError, withDryRun, withMadeByTheRealCall, type ICommandContext, type IMutationOptions,
} from './context.js';
import { defaultContextName, isContextName, readCredentials, writeCredentials, credentialsPath, ServerUrlError } from './credentials.js';
import { note, printAnswer, renderYaml, waitingLine, writeErr, writeOut } from './output.js';
import { confirm, readPassword } from './prompt.js';
import { generationExpectation, listOption, mutation, pageOptions, pageRequest, run, type TOptions } from './commandkit.js';
import { filtersByName, literalId } from './names.js';
import { addOperationCommands, finishStartedWork, longWork } from './operations.js';
import { addRolloutCommands } from './rollouts.js';
import { addUserCommands } from './users.js';
import { addBackupScheduleCommands } from './backupschedules.js';
import { addContextCommands } from './contexts.js';
import { addStorageCommands } from './storage.js';
import { addSnapshotCommands } from './snapshot.js';
import {
  auditColumns, backupColumns, bindingColumns, clusterColumns, corestoreInventoryTable, describeInitialization, diffTable, fieldDiff, formatTime, imageVersionColumns, listTable, nodeColumns,
  recordTable, serviceListColumns, serviceTable, serviceVerdictText, type TColumn,
} from './tables.js';
import { cliIo, setExitCode } from './io.js';
import { isAuditReadMethod, type IAuditEvent, type IAuditEventFilter } from '../interfaces/data/audit.js';
import type { IArchiveRetentionPolicy, TBackupSnapshot } from '../interfaces/data/backup.js';
import type { ICluster } from '../interfaces/data/cluster.js';
import type { IRouteCertificateStatus } from '../interfaces/data/routecertificate.js';
import type { ICloudlyOutboundMethods } from '../interfaces/requests/methodmap.js';
import type { IChangeEvent } from '../interfaces/requests/watch.js';
import type { IClusterIngressDesignationRequest } from '../interfaces/data/clusteringressdesignation.js';
import { platformBindingCapabilities, type IPlatformBindingUpsert } from '../interfaces/data/platformbinding.js';
import type { IService, IServiceRunAs, IServiceWritableSpec } from '../interfaces/data/service.js';
import { writableSpecOfService } from '../interfaces/data/servicewritable.js';
import { judgeServiceVolumeInitializationUse } from '../interfaces/data/servicevolumeuse.js';
import type { TServiceVolumeInitialization, TServiceWritableVolume } from '../interfaces/data/servicevolume.js';

/** A value compare-and-swap (`expected`): `--expect <json|none>` or `--expect-current`. */
const expectedValue = async <T>(
  optionsArg: IMutationOptions,
  readCurrentArg: () => Promise<T | null>,
  whatArg: string,
  parseArg: (textArg: string) => T,
): Promise<T | null> => {
  if (optionsArg.expect !== undefined && optionsArg.expectCurrent) {
    throw new UsageError('give either --expect or --expect-current, not both');
  }
  if (optionsArg.expect !== undefined) {
    return optionsArg.expect === 'none' ? null : parseArg(optionsArg.expect);
  }
  if (optionsArg.expectCurrent) {
    const current = (await readCurrentArg()) ?? null;
    note(`--expect-current: read ${whatArg} as ${current === null ? 'none' : JSON.stringify(current)}; the change applies only if it is still that`);
    return current;
  }
  throw new UsageError(`give --expect <${whatArg} you read, or none> or --expect-current`);
};

const parseJsonOption = (flagArg: string) => (textArg: string): unknown => {
  try {
    return JSON.parse(textArg);
  } catch {
    throw new UsageError(`${flagArg} must be JSON or none`);
  }
};

/** The contract's judgement of JSON a command reads (contractbodies.ts), loaded only when a command reads such JSON. */
const contractBodies = () => import('./contractbodies.js');

// ---------------------------------------------------------------------------------------------
// login / logout
// ---------------------------------------------------------------------------------------------

/**
 * First contact with an https server only a private CA vouches for (`--ca-file`): its certificate's
 * fingerprint, before the password is asked for, to compare with the one the server logged at start
 * (`tlsFingerprint256`). A certificate nothing here trusts stops the login before the password is
 * asked for, with its fingerprint and what to do.
 */
const showPrivateCertificateOnFirstContact = async (urlArg: string): Promise<void> => {
  if (!urlArg.startsWith('https:') || Object.values((await readCredentials()).contexts).some((contextArg) => contextArg.server === urlArg)) {
    return;
  }
  const { probeServerCertificate } = await import('../client/trust.js');
  let view;
  try {
    view = await probeServerCertificate(urlArg);
  } catch {
    // Unreachable: the login itself says so.
    return;
  }
  if (view.trusted && !view.trustedBySystem) {
    note(`${urlArg} presents a certificate from a private CA ("${view.anchorSubject}", trusted through --ca-file or CLOUDLY_CA_FILE):\n  SHA-256 fingerprint ${view.fingerprint256}\n  compare it with tlsFingerprint256 in the server's "cloudly is listening" log line`);
  } else if (!view.trusted) {
    throw new UsageError(`${urlArg} presents a certificate nothing here trusts (${view.verifyError ?? 'unverified'}), issued under "${view.anchorSubject}":\n  SHA-256 fingerprint ${view.fingerprint256}\n  if that is your Cloudly's, pass its CA with --ca-file (or CLOUDLY_CA_FILE); nothing was sent`);
  }
};

const addSessionCommands = (programArg: Command): void => {
  programArg.command('login')
    .description('log in and keep the identity as a context (default name <user>@<host>; --context names it) that becomes current')
    .option('--username <name>', 'account name', 'admin')
    .action(async (_optionsArg: TOptions, commandArg: Command) => {
      const options = commandArg.optsWithGlobals() as TOptions;
      let url: string | undefined;
      try {
        parseFormat(options.output);
        if (options.context !== undefined && !isContextName(options.context)) {
          throw new UsageError(`--context ${JSON.stringify(options.context)}: a context name is 1 to 128 printable characters without spaces`);
        }
        // The server: named, else the named context's, else the current context's.
        const kept = await readCredentials();
        url = namedServer(options)
          ?? (options.context !== undefined ? kept.contexts[options.context]?.server : undefined)
          ?? (await resolveContext({ output: options.output })).context.server;
        await showPrivateCertificateOnFirstContact(url);
        const password = await readPassword(`password for ${options.username} at ${url}: `);
        if (!password) {
          throw new UsageError('no password given (type it at the prompt, or pipe it on stdin)');
        }
        const client = await loadAdminClient(url);
        const identity = await client.login(options.username, password);
        const credentials = await readCredentials();
        const name: string = options.context ?? defaultContextName(options.username, url);
        const replaced = credentials.contexts[name];
        credentials.contexts[name] = { server: url, username: options.username, identity, loggedInAt: Date.now() };
        credentials.currentContext = name;
        await writeCredentials(credentials);
        note(`logged in to ${url} as ${identity.name}; identity kept as context ${name} (current) in ${credentialsPath()} until ${new Date(identity.expiresAt).toISOString()}`);
        if (replaced && (replaced.server !== url || replaced.username !== options.username)) {
          note(`context ${name} was ${replaced.username} at ${replaced.server} before`);
        }
      } catch (error) {
        setExitCode(reportFailure(error instanceof ServerUrlError ? new UsageError(error.message) : error, url));
      }
    });

  programArg.command('logout')
    .description('revoke the session of the context in use on its server and forget the context (or --all)')
    .option('--all', 'log out of every context kept')
    .option('--all-sessions', "revoke every session of the account, not only this one (the server's logout allSessions)")
    .action(async (_optionsArg: TOptions, commandArg: Command) => {
      const options = commandArg.optsWithGlobals() as TOptions;
      try {
        const credentials = await readCredentials();
        const names = options.all ? Object.keys(credentials.contexts) : [(await resolveContext(options)).name];
        let failure: number = exitCodes.ok;
        for (const name of names) {
          const kept = credentials.contexts[name];
          const url = kept.server;
          // Revoke first; the identity is forgotten here either way.
          if (!kept.identity.expiresAt || kept.identity.expiresAt > Date.now()) {
            try {
              const client = await loadAdminClient(url);
              client.identity = kept.identity;
              const answer = await client.call('logout', options.allSessions ? { allSessions: true } : {});
              note(`revoked ${answer.revoked === 'all-sessions' ? 'every session of the account' : 'this session'} at ${url}`);
            } catch (error) {
              const unauthenticated = (error as { errorData?: { code?: string } })?.errorData?.code === 'unauthenticated';
              if (!unauthenticated) {
                note(`the server was not told (the identity stays valid there until ${new Date(kept.identity.expiresAt).toISOString()}):`);
                failure = Math.max(failure, reportFailure(error, url));
              }
            }
          }
          delete credentials.contexts[name];
          if (credentials.currentContext === name) {
            credentials.currentContext = null;
          }
          note(`logged out of ${url} (context ${name} forgotten${credentials.currentContext === null && Object.keys(credentials.contexts).length > 0 ? '; choose another with `cloudly config use-context`' : ''})`);
        }
        await writeCredentials(credentials);
        setExitCode(failure);
      } catch (error) {
        setExitCode(reportFailure(error));
      }
    });
};

// ---------------------------------------------------------------------------------------------
// clusters, nodes
// ---------------------------------------------------------------------------------------------

const readCluster = async (ctxArg: ICommandContext, clusterIdArg: string): Promise<ICluster> =>
  (await ctxArg.call('getClusterById', { clusterId: clusterIdArg })).cluster;

/** One route's certificate: `valid until …`, `pending`, or `failed` with the ACME problem. */
const routeCertificateColumns: Array<TColumn<IRouteCertificateStatus>> = [
  ['HOSTNAME', (e) => e.hostname],
  ['SERVICE', (e) => e.serviceId],
  ['CERTIFICATE', (e) => (e.state === 'valid' ? `valid until ${e.notAfter}` : e.state)],
  ['PROBLEM', (e) => (e.problem ? `${e.problem.type}: ${e.problem.detail}` : '-')],
  ['NEXT', (e) => e.nextAttemptAt ?? '-'],
];

const addClusterCommands = (programArg: Command): void => {
  const clusters = programArg.command('clusters').description('clusters and their relay tokens');
  pageOptions(clusters.command('list').description('every cluster, or those a label selector selects'))
    .option('-l, --selector <selector>', "label selector, e.g. 'env=prod,tier in (a,b),!gpu'")
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('getClusters', { ...pageRequest(options), ...(options.selector === undefined ? {} : { selector: String(options.selector) }) });
      printAnswer(answer, ctx.format, () => listTable(answer.clusters, clusterColumns, answer));
    }));
  clusters.command('get').description('one cluster')
    .requiredOption('--cluster <id|name>', 'cluster id or name')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('getClusterById', { clusterId: options.cluster });
      printAnswer(answer, ctx.format, () => recordTable(answer.cluster));
    }));
  clusters.command('overview').description("a cluster's page: relay, nodes, services with status and latest backup, ingress")
    .requiredOption('--cluster <id|name>', 'cluster id or name')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('getClusterOverview', { clusterId: options.cluster });
      printAnswer(answer, ctx.format, () => {
        const overview = answer.overview;
        const relay = overview.relay;
        const services = overview.services;
        return [
          `cluster ${overview.cluster.name} (${overview.cluster.id}), generation ${overview.cluster.generation}`,
          `relay: ${relay.connected ? 'connected' : 'not connected'}${relay.registration ? `, ${relay.registration.origin} (${relay.registration.version})` : ', never registered'}`,
          `ingress: ${overview.ingressDesignation ? `service ${overview.ingressDesignation.ingressServiceId}, designation generation ${overview.ingressDesignation.generation}` : 'not designated'}`,
          '',
          listTable(overview.nodes, nodeColumns, {}, '(no nodes)'),
          '',
          listTable(services, [
            ['SERVICE', (e) => e.service?.id],
            ['NAME', (e) => e.service?.name],
            ['IMAGE', (e) => e.service?.runtime?.image],
            // A service of a cluster that is not current shows `unknown` with why, never its last verdict.
            ['STATUS', (e) => (e.unknown ? `unknown ${e.unknown.reason}`
              : e.runtimeStatus ? `${e.runtimeStatus.state}${e.runtimeStatus.reason ? ` ${e.runtimeStatus.reason}` : ''}` : '-')],
            ['BACKUP', (e) => formatTime(e.latestBackup?.createdAt)],
          ], {}, '(no services)'),
          ...(overview.certificates.length > 0 ? ['', listTable(overview.certificates, routeCertificateColumns, {})] : []),
        ].join('\n');
      });
    }));
  clusters.command('certificates').description("the certificates of a cluster's routes that opted in (certificate: acme): pending, valid until, or failed with the ACME problem")
    .requiredOption('--cluster <id|name>', 'cluster id or name')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('getRouteCertificates', { clusterId: options.cluster });
      printAnswer(answer, ctx.format, () => listTable(answer.certificates, routeCertificateColumns, {}, '(no route opted in to a certificate)'));
    }));
  mutation(clusters.command('create').description('create a cluster; its relay token is shown once'))
    .requiredOption('--name <name>', 'cluster name')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('createCluster', withDryRun(options, { name: options.name }));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => (generatedOnCommitOf(answer).includes('relayToken')
        ? `${recordTable(withMadeByTheRealCall(answer.cluster, answer, 'cluster'))}\n\nrelay token: made by the real call and shown once then (a dry run makes none)`
        : `${recordTable(answer.cluster)}\n\nrelay token (shown once):\n${answer.relayToken}`));
    }));
  generationExpectation(clusters.command('rotate-relay-token').description('issue a new relay token; the old one stops at once'), 'cluster')
    .requiredOption('--cluster <id|name>', 'cluster id or name')
    .action(run(async (ctx, options) => {
      const expected = await expectedGeneration(options, async () => (await readCluster(ctx, options.cluster)).generation, `cluster ${options.cluster}`);
      const answer = await ctx.call('rotateClusterRelayToken', withDryRun(options, { clusterId: options.cluster, expectedGeneration: expected }));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => (generatedOnCommitOf(answer).includes('relayToken')
        ? `${recordTable(answer.cluster)}\n\nnew relay token: made by the real call and shown once then, and the current one stops working (a dry run makes none)`
        : `${recordTable(answer.cluster)}\n\nnew relay token (shown once):\n${answer.relayToken}`));
    }));

  generationExpectation(clusters.command('labels').description("replace a cluster's labels (none given: remove them all)"), 'cluster')
    .requiredOption('--cluster <id|name>', 'cluster id or name')
    .argument('[labels...]', 'key=value pairs')
    .action(run(async (ctx, options) => {
      const labelTexts = ((options.args as unknown[] | undefined)?.[0] ?? []) as string[];
      const labels = Object.fromEntries(labelTexts.map((textArg) => {
        const equals = textArg.indexOf('=');
        return equals < 0 ? [textArg, ''] : [textArg.slice(0, equals), textArg.slice(equals + 1)];
      }));
      const expected = await expectedGeneration(options, async () => (await readCluster(ctx, options.cluster)).generation, `cluster ${options.cluster}`);
      const answer = await ctx.call('setClusterLabels', withDryRun(options, { clusterId: options.cluster, labels, expectedGeneration: expected }));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => recordTable(answer.cluster));
    }));

  generationExpectation(clusters.command('delete').description('delete a cluster without services: its nodes and registration go, its relay sockets close'), 'cluster')
    .requiredOption('--cluster <id|name>', 'cluster id or name')
    .action(run(async (ctx, options) => {
      const expected = await expectedGeneration(options, async () => (await readCluster(ctx, options.cluster)).generation, `cluster ${options.cluster}`);
      const answer = await ctx.call('deleteCluster', withDryRun(options, { clusterId: options.cluster, expectedGeneration: expected }));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => `${recordTable(answer.cluster)}\n\nremoved nodes: ${answer.removedNodes}, closed relay sockets: ${answer.closedSockets}`);
    }));

  const nodes = programArg.command('nodes').description('the nodes of a cluster');
  pageOptions(nodes.command('list').description('every node of a cluster'))
    .requiredOption('--cluster <id|name>', 'cluster id or name')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('getClusterNodes', { clusterId: options.cluster, ...pageRequest(options) });
      printAnswer(answer, ctx.format, () => listTable(answer.nodes, nodeColumns, answer));
    }));
  mutation(literalId(nodes.command('add').description('add a node to a cluster'), 'node'))
    .requiredOption('--cluster <id|name>', 'cluster id or name')
    .requiredOption('--name <name>', 'node name')
    .option('--node <id>', 'the node id (as its relay reports it); Cloudly picks one when omitted')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('addClusterNode', withDryRun(options, {
        clusterId: options.cluster, name: options.name, ...(options.node ? { nodeId: options.node } : {}),
      }));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => recordTable(withMadeByTheRealCall(answer.node, answer, 'node')));
    }));
  mutation(nodes.command('remove').description('remove a node (the API takes no expectation here)'))
    .requiredOption('--cluster <id|name>', 'cluster id or name')
    .requiredOption('--node <id|name>', 'node id or name')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('removeClusterNode', withDryRun(options, { clusterId: options.cluster, nodeId: options.node }));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => recordTable(answer.node));
    }));
  mutation(nodes.command('set-corestore').description("set or clear a node's Corestore endpoint (compare-and-swap on the value)"))
    .requiredOption('--cluster <id|name>', 'cluster id or name')
    .requiredOption('--node <id|name>', 'node id or name')
    .option('--endpoint <origin>', 'the Corestore origin, e.g. http://10.20.0.15:3000')
    .option('--clear', 'remove the endpoint')
    .option('--expect <endpoint>', 'the endpoint you read, or none')
    .option('--expect-current', 'read the current endpoint first and expect that')
    .action(run(async (ctx, options) => {
      if (Boolean(options.endpoint) === Boolean(options.clear)) {
        throw new UsageError('give exactly one of --endpoint <origin> or --clear');
      }
      const { corestoreOf } = await contractBodies();
      const expected = await expectedValue(options, async () => {
        const list = await ctx.call('getClusterNodes', { clusterId: options.cluster });
        const node = list.nodes.find((nodeArg) => nodeArg.id === options.node);
        if (!node) {
          throw new UsageError(`cluster ${options.cluster} has no node ${options.node}`);
        }
        return node.corestore ?? null;
      }, 'the corestore', (textArg) => (textArg.startsWith('{')
        ? corestoreOf(parseJsonOption('--expect')(textArg), '--expect')
        : { endpoint: textArg }));
      const answer = await ctx.call('setClusterNodeCorestore', withDryRun(options, {
        clusterId: options.cluster, nodeId: options.node, expected, corestore: options.clear ? null : { endpoint: options.endpoint },
      }));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => recordTable(answer.node));
    }));
};

// ---------------------------------------------------------------------------------------------
// services
// ---------------------------------------------------------------------------------------------

const readService = async (ctxArg: ICommandContext, serviceIdArg: string): Promise<IService> =>
  (await ctxArg.call('getServiceById', { serviceId: serviceIdArg })).service;

const parseVolume = (textArg: string): TServiceWritableVolume => {
  const [mountPath, flag] = textArg.split(':');
  if (!mountPath || (flag !== undefined && flag !== 'ro' && flag !== 'rw')) {
    throw new UsageError(`--volume ${JSON.stringify(textArg)} must be <mountPath>[:ro|:rw]`);
  }
  return { mountPath, readOnly: flag === 'ro', driver: 'local' };
};

/**
 * `--volume-init <mountPath>=empty:<mode>[:<uid>:<gid>]` or `<mountPath>=import:<docker volume>`,
 * each naming a volume of the spec, by mount path.
 */
const parseVolumeInits = (textsArg: string[], volumesArg: readonly { mountPath: string }[]): Map<string, TServiceVolumeInitialization> => {
  const initializations = new Map<string, TServiceVolumeInitialization>();
  for (const text of textsArg) {
    const at = text.indexOf('=');
    const mountPath = at > 0 ? text.slice(0, at) : '';
    const [kind, ...rest] = text.slice(at + 1).split(':');
    if (!volumesArg.some((volumeArg) => volumeArg.mountPath === mountPath)) {
      throw new UsageError(`--volume-init ${JSON.stringify(text)} names no --volume of the service (<mountPath>=empty:<mode>[:<uid>:<gid>] or <mountPath>=import:<docker volume>)`);
    }
    if (initializations.has(mountPath)) {
      throw new UsageError(`--volume-init names ${mountPath} twice`);
    }
    if (kind === 'empty' && (rest.length === 1 || rest.length === 3)) {
      const mode = parseMode(rest[0]);
      initializations.set(mountPath, {
        kind: 'empty',
        ownership: rest.length === 3
          ? { kind: 'explicit', uid: parseInteger(rest[1], '--volume-init uid'), gid: parseInteger(rest[2], '--volume-init gid'), mode }
          : { kind: 'run-as', mode },
      });
    } else if (kind === 'import' && rest.length >= 1 && rest.join(':') !== '') {
      initializations.set(mountPath, { kind: 'import', source: { kind: 'docker-volume', volumeName: rest.join(':') } });
    } else {
      throw new UsageError(`--volume-init ${JSON.stringify(text)} must be <mountPath>=empty:<mode>[:<uid>:<gid>] or <mountPath>=import:<docker volume>`);
    }
  }
  return initializations;
};

const parseRunAs = (textArg: string | undefined): IServiceRunAs | null => {
  if (textArg === undefined || textArg === 'none') {
    return null;
  }
  const match = /^(\d+):(\d+)$/.exec(textArg);
  if (!match) {
    throw new UsageError('--run-as must be <uid>:<gid> or none');
  }
  return { user: Number(match[1]), group: Number(match[2]) };
};

/** A service's members the server keeps for itself: not what an update changes, so not in its diff. */
const serviceBookkeeping = ['generation', 'updatedAt', 'createdAt'];

/** A spec file (`{ service: … }` or the spec itself) as the contract's writable spec, or a usage error with every reason. */
const specBody = async (pathArg: string): Promise<IServiceWritableSpec> => (await contractBodies()).serviceSpecOf(await readJsonFile(pathArg), pathArg);

const parseMode = (textArg: string): number => {
  if (!/^0?[0-7]{3,4}$/.test(textArg)) {
    throw new UsageError('--mode must be octal, e.g. 0750');
  }
  return parseInt(textArg, 8);
};

const addServiceCommands = (programArg: Command): void => {
  const services = programArg.command('services').description('services, their volumes and status');
  pageOptions(services.command('list').description('every service, or those of one cluster'))
    .option('--cluster <id|name>', 'only this cluster (id or name)')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('getServices', { ...(options.cluster ? { clusterId: options.cluster } : {}), ...pageRequest(options) });
      // JSON and YAML are the API's answer; the table reads names and verdicts beside it.
      const rows = ctx.format === 'json' || ctx.format === 'yaml' ? answer.services : await serviceListRows(ctx, answer.services);
      printAnswer(answer, ctx.format, () => listTable(rows, serviceListColumns, answer));
    }));
  services.command('get').description('one service with its volumes')
    .requiredOption('--service <id|name>', 'service id or name')
    .option('--cluster <id|name>', 'with a service name: the cluster to look it up in')
    .option('--organization <id>', 'with a service name: the organization to look it up in')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('getServiceById', { serviceId: options.service });
      printAnswer(answer, ctx.format, () => serviceTable(answer.service));
    }));
  mutation(services.command('create').description('create a service from flags, or from --file spec.json (- for stdin)'))
    .option('--file <path>', 'the writable spec as JSON ({ name, organizationId, clusterId, runtime, ports?, routes?, volumes })')
    .option('--name <name>', 'service name')
    .option('--organization <id>', 'organization id')
    .option('--cluster <id|name>', 'cluster id or name')
    .option('--image <image>', 'container image')
    .option('--replicas <n>', 'replicas', '1')
    .option('--node <id|name>', 'placement: a node, id or name (repeatable)', collect, [])
    .option('--run-as <uid:gid>', 'run the workload as this user and group (default: none)')
    .option('--volume <mountPath[:ro]>', 'a local volume (repeatable)', collect, [])
    .option('--volume-init <mountPath=how>', "how a volume starts: <mountPath>=empty:<mode>[:<uid>:<gid>] or <mountPath>=import:<docker volume> (repeatable; set right after the create)", collect, [])
    .action(run(async (ctx, options) => {
      const service = options.file
        ? await specBody(options.file)
        : {
          name: requireOption(options.name, '--name (or --file)'),
          organizationId: requireOption(options.organization, '--organization'),
          clusterId: requireOption(options.cluster, '--cluster'),
          runtime: {
            image: requireOption(options.image, '--image'),
            replicas: parseInteger(options.replicas, '--replicas', 0),
            profile: { runAs: parseRunAs(options.runAs) },
            placement: { nodeIds: listOption(options.node, '--node') },
          },
          volumes: listOption(options.volume, '--volume').map(parseVolume),
        };
      const initializations = parseVolumeInits(listOption(options.volumeInit, '--volume-init'), (service as IServiceWritableSpec).volumes ?? []);
      // Said before the call: a volume the runtime cannot start leaves the service refused from the start.
      for (const volume of (service as IServiceWritableSpec).volumes ?? []) {
        const initialization = initializations.get(volume.mountPath) ?? null;
        if (initialization === null) {
          note(`warning: volume ${volume.mountPath} has no initialization: the service would be refused volume-initialization-unknown\n`
            + `  instead: --volume-init ${volume.mountPath}=empty:0750 (owned by the run-as user), =empty:0750:<uid>:<gid>, or =import:<docker volume>`);
          continue;
        }
        const use = judgeServiceVolumeInitializationUse(initialization, (service as IServiceWritableSpec).runtime.profile.runAs);
        if (!use.usable) {
          note(`warning: volume ${volume.mountPath} cannot use this initialization: ${use.why} (the service would be refused ${use.reason})\n  instead: ${use.instead}`);
        }
      }
      const answer = await ctx.call('createService', withDryRun(options, { service }));
      noteDryRun(options, answer);
      let created = answer.service;
      if (!options.dryRun) {
        // Each stated initialization is set on the new service (expected: none yet); a refused one
        // leaves the service created and says so.
        for (const [mountPath, initialization] of initializations) {
          created = (await ctx.call('setServiceVolumeInitialization', { serviceId: created.id, mountPath, expected: null, initialization })).service;
        }
      } else if (initializations.size > 0) {
        note(`dry run: the real call would then set the initialization of ${[...initializations.keys()].join(', ')}`);
      }
      printAnswer({ ...answer, service: created }, ctx.format, () => serviceTable(withMadeByTheRealCall(created, answer, 'service')));
    }));
  generationExpectation(services.command('update').description('replace the spec (--file), or change single fields of the stored one'), 'service')
    .requiredOption('--service <id|name>', 'service id or name')
    .option('--cluster <id|name>', 'with a service name: the cluster to look it up in')
    .option('--organization <id>', 'with a service name: the organization to look it up in')
    .option('--file <path>', 'the whole writable spec as JSON (- for stdin)')
    .option('--image <image>', 'new image')
    .option('--replicas <n>', 'new replica count')
    .option('--node <id|name>', 'new placement: a node, id or name (repeatable)', collect, undefined)
    .option('--run-as <uid:gid|none>', 'new run-as user and group')
    .action(run(async (ctx, options) => {
      let stored: IService | null = null;
      const expected = await expectedGeneration(options, async () => {
        stored = await readService(ctx, options.service);
        return stored.generation;
      }, `service ${options.service}`);
      let service: IServiceWritableSpec;
      if (options.file) {
        service = await specBody(options.file);
      } else {
        if (options.image === undefined && options.replicas === undefined && options.node === undefined && options.runAs === undefined) {
          throw new UsageError('nothing to change: give --file, --image, --replicas, --node or --run-as');
        }
        stored ??= await readService(ctx, options.service);
        if (stored.generation !== expected) {
          note(`note: the service is at generation ${stored.generation}, not ${expected}; the server will refuse`);
        }
        service = writableSpecOfService(stored);
        service.runtime = {
          ...service.runtime,
          ...(options.image !== undefined ? { image: options.image } : {}),
          ...(options.replicas !== undefined ? { replicas: parseInteger(options.replicas, '--replicas', 0) } : {}),
          ...(options.node !== undefined ? { placement: { nodeIds: listOption(options.node, '--node') } } : {}),
          ...(options.runAs !== undefined ? { profile: { ...service.runtime.profile, runAs: parseRunAs(options.runAs) } } : {}),
        };
      }
      // A dry run shows what would change against the stored service (kubectl diff's view).
      const before = options.dryRun ? stored ?? await readService(ctx, options.service) : null;
      const answer = await ctx.call('updateService', withDryRun(options, { serviceId: options.service, expectedGeneration: expected, service }));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => (before
        ? `service ${answer.service.id}: generation ${before.generation} → ${answer.service.generation}\n${diffTable(fieldDiff(before, answer.service, serviceBookkeeping))}`
        : serviceTable(answer.service)));
    }));
  generationExpectation(services.command('delete').description('remove a service from the desired state (deleted once its relay reports it stopped)'), 'service')
    .requiredOption('--service <id|name>', 'service id or name')
    .option('--cluster <id|name>', 'with a service name: the cluster to look it up in')
    .option('--organization <id>', 'with a service name: the organization to look it up in')
    .option('--force', 'delete at once, without waiting for the relay')
    .action(run(async (ctx, options) => {
      const expected = await expectedGeneration(options, async () => (await readService(ctx, options.service)).generation, `service ${options.service}`);
      const answer = await ctx.call('deleteService', withDryRun(options, {
        serviceId: options.service, expectedGeneration: expected, ...(options.force ? { force: true } : {}),
      }));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => recordTable(answer));
    }));
  services.command('status').description("the service's runtime status verdict")
    .requiredOption('--service <id|name>', 'service id or name')
    .option('--cluster <id|name>', 'with a service name: the cluster to look it up in')
    .option('--organization <id>', 'with a service name: the organization to look it up in')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('getServiceRuntimeStatus', { serviceId: options.service });
      printAnswer(answer, ctx.format, () => {
        // Each placement's members as the server sent them, in its order (the first six are the columns).
        const placements = (answer.observed?.placements ?? []).map((placementArg) => ({ cells: new Map<string, unknown>(Object.entries(placementArg)) }));
        const historical = answer.historicalClaims ?? [];
        const placementColumns = placements.length
          ? [...placements[0].cells.keys()].slice(0, 6).map((key): TColumn<{ cells: Map<string, unknown> }> => [key.toUpperCase(), (p) => p.cells.get(key)])
          : [];
        const unknown = answer.unknown
          ? `unknown: ${answer.unknown.reason} since ${formatTime(answer.unknown.since)} (the status below is the last verdict judged)\n\n`
          : '';
        // One row per replica slot; a dark cluster's slots say stale, never running.
        const assignments = answer.assignments ?? [];
        const assignmentTable = assignments.length ? `\n\nassignments:\n${listTable(assignments, [
          ['SLOT', (a) => a.replica], ['NODE', (a) => a.nodeId ?? '-'], ['CONDITION', (a) => a.condition],
          ['LEASE', (a) => (a.lease ? `${a.lease.address}${a.lease.confirmed ? '' : ' (unconfirmed)'}` : '-')],
          ['SESSION', (a) => (a.session ? `${a.session.id}/${a.session.generation}` : '-')],
          ['REPORTED', (a) => (a.observed ? `${a.observed.state} r${a.observed.specRevision} ${formatTime(a.observed.reportedAt)}` : '-')],
        ])}` : '';
        return `${unknown}${recordTable(answer.status)}${assignmentTable}${placements.length ? `\n\nobserved:\n${listTable(placements, placementColumns)}` : ''}`
          + (historical.length ? `\n\nclaims held historical (the node holds a newer generation; way out: supersedeHistoricalRuntimeLocalStorageClaim):\n${listTable(historical, [
            ['CLAIM', (c) => c.claimId], ['NODE', (c) => c.nodeId], ['ISSUED', (c) => c.generation], ['NODE HOLDS', (c) => c.nodeClaim.generation],
          ])}` : '');
      });
    }));
  mutation(services.command('set-volume-initialization').description('say how a volume starts: empty (owner, mode) or imported from a Docker volume'))
    .requiredOption('--service <id|name>', 'service id or name')
    .option('--cluster <id|name>', 'with a service name: the cluster to look it up in')
    .option('--organization <id>', 'with a service name: the organization to look it up in')
    .requiredOption('--mount-path <path>', "the volume's exact mount path")
    .option('--empty', 'start empty')
    .option('--mode <octal>', 'directory mode of an empty volume, e.g. 0750')
    .option('--uid <uid>', 'explicit owner (with --gid); without them the service runs-as user owns it')
    .option('--gid <gid>', 'explicit group')
    .option('--import-docker-volume <name>', 'import the Docker volume of exactly this name')
    .option('--clear', 'remove the initialization')
    .option('--expect <json>', 'the initialization you read (JSON), or none')
    .option('--expect-current', 'read the current initialization first and expect that')
    .action(run(async (ctx, options) => {
      const chosen = [options.empty, options.importDockerVolume, options.clear].filter(Boolean).length;
      if (chosen !== 1) {
        throw new UsageError('give exactly one of --empty, --import-docker-volume <name> or --clear');
      }
      let initialization: TServiceVolumeInitialization | null = null;
      if (options.empty) {
        const mode = parseMode(requireOption(options.mode, '--mode (with --empty)'));
        if ((options.uid === undefined) !== (options.gid === undefined)) {
          throw new UsageError('give --uid and --gid together');
        }
        initialization = {
          kind: 'empty',
          ownership: options.uid !== undefined
            ? { kind: 'explicit', uid: parseInteger(options.uid, '--uid'), gid: parseInteger(options.gid, '--gid'), mode }
            : { kind: 'run-as', mode },
        };
      } else if (options.importDockerVolume) {
        initialization = { kind: 'import', source: { kind: 'docker-volume', volumeName: options.importDockerVolume } };
      }
      // Said before the call: an accepted initialization the runtime cannot use leaves the
      // service refused, under a new reason.
      const target = await readService(ctx, options.service);
      const { volumeInitializationOf } = await contractBodies();
      const use = judgeServiceVolumeInitializationUse(initialization, target.runtime.profile.runAs);
      if (!use.usable) {
        note([
          `warning: service ${options.service} cannot use this initialization: ${use.why} (the runtime would refuse it: ${use.reason})`,
          `  instead: ${use.instead}${use.reason === 'volume-ownership-unknown' ? ` (--empty --mode ${options.mode} --uid <uid> --gid <gid>)` : ''}`,
        ].join('\n'));
      }
      const expected = await expectedValue(options, async () => {
        const service = target;
        const volume = service.volumes.find((volumeArg) => volumeArg.mountPath === options.mountPath);
        if (!volume) {
          throw new UsageError(`service ${options.service} has no volume at ${options.mountPath}`);
        }
        return volume.initialization ?? null;
      }, 'the initialization', (textArg) => volumeInitializationOf(parseJsonOption('--expect')(textArg), '--expect'));
      const answer = await ctx.call('setServiceVolumeInitialization', withDryRun(options, {
        serviceId: options.service, mountPath: options.mountPath, expected, initialization,
      }));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => {
        const volume = answer.service.volumes.find((volumeArg) => volumeArg.mountPath === options.mountPath);
        return `${options.mountPath}: ${describeInitialization(volume?.initialization)} (service generation ${answer.service.generation})`;
      });
    }));
};

// ---------------------------------------------------------------------------------------------
// ingress, corestore, bindings
// ---------------------------------------------------------------------------------------------

const addIngressCommands = (programArg: Command): void => {
  const ingress = programArg.command('ingress').description("a Pallet cluster's ingress designation and routes");
  mutation(ingress.command('designate').description('designate (or re-designate) the ingress service of a cluster'))
    .option('--file <path>', 'the whole designation request as JSON (- for stdin)')
    .option('--cluster <id|name>', 'cluster id or name')
    .option('--service <id|name>', 'the ingress service (id or name)')
    .option('--mutation-id <id>', 'makes a repeated call safe (default: a fresh one)')
    .option('--expect-current', "read the cluster's runtime, the service's spec revision and the current designation first")
    .action(run(async (ctx, options) => {
      let designation: IClusterIngressDesignationRequest;
      if (options.file) {
        designation = (await contractBodies()).designationRequestOf(await readJsonFile(options.file), options.file);
      } else {
        const clusterId = requireOption(options.cluster, '--cluster (or --file)');
        const ingressServiceId = requireOption(options.service, '--service');
        if (!options.expectCurrent) {
          throw new UsageError('without --file, give --expect-current (the runtime, spec revision and designation are read first)');
        }
        const runtime = (await ctx.call('getClusterRuntime', { clusterId })).runtime;
        const service = await readService(ctx, ingressServiceId);
        if (runtime.phase !== 'pallet') {
          throw new UsageError(`cluster ${clusterId}'s runtime is in phase ${runtime.phase}: an ingress is designated only on a cluster in phase pallet`);
        }
        const current = (await ctx.call('getClusterIngressDesignation', { clusterId })).designation;
        const expectedDesignation = current ? { id: current.id, generation: current.generation, digest: current.digest } : null;
        note(`--expect-current: runtime ${JSON.stringify(runtime)}, service spec revision ${service.specRevision}, `
          + `designation ${expectedDesignation ? `${expectedDesignation.id} at generation ${expectedDesignation.generation}` : 'none'}`);
        designation = {
          mutationId: options.mutationId ?? randomUUID(),
          clusterId,
          ingressServiceId,
          currentRuntime: { ...runtime, phase: runtime.phase },
          expectedSpecRevision: service.specRevision,
          expectedDesignation,
        };
      }
      const answer = await ctx.call('designateClusterIngress', withDryRun(options, { designation }));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => `${recordTable(answer.designation)}${answer.replayed ? '\n(replayed: this mutation id was already accepted)' : ''}`);
    }));
  ingress.command('show').description("the cluster's current ingress designation")
    .requiredOption('--cluster <id|name>', 'cluster id or name')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('getClusterIngressDesignation', { clusterId: options.cluster });
      printAnswer(answer, ctx.format, () => (answer.designation ? recordTable(answer.designation) : '(no designation)'));
    }));
  // Routes are declared on services (services update --file with `routes`); this shows the one
  // route table they give and every route not in it yet, with the reason.
  ingress.command('routes').description("the cluster's route table and the routes not resolved yet")
    .requiredOption('--cluster <id|name>', 'cluster id or name')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('getClusterRouteTableResolution', { clusterId: options.cluster });
      const rows = [
        ...answer.table.routes.map((route) => ({ ...route, state: `${route.targets.length} target(s)` })),
        ...answer.unresolved.map((route) => ({ ...route, state: `unresolved: ${route.reason}` })),
      ];
      printAnswer(answer, ctx.format, () => `revision ${answer.table.revision}\n${listTable(rows, [
        ['HOSTNAME', (row) => row.hostname],
        ['SERVICE', (row) => row.serviceId],
        ['PORT', (row) => row.port],
        ['STATE', (row) => row.state],
      ])}`);
    }));
};

const addCorestoreCommands = (programArg: Command): void => {
  const corestore = programArg.command('corestore').description("a node's legacy Corestore resources and their adoption");
  corestore.command('inventory').description("one node's legacy resources and the digest an adoption must quote")
    .requiredOption('--cluster <id|name>', 'cluster id or name')
    .requiredOption('--node <id|name>', 'node id or name')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('getCorestoreLegacyResources', { clusterId: options.cluster, nodeId: options.node });
      printAnswer(answer, ctx.format, () => corestoreInventoryTable(answer));
    }));
  mutation(corestore.command('adopt').description('adopt legacy resources: all the selected ones or none'))
    .requiredOption('--cluster <id|name>', 'cluster id or name')
    .requiredOption('--node <id|name>', 'node id or name')
    .requiredOption('--resource <serviceId:capability>', 'a resource to adopt (repeatable)', collect, [])
    .option('--expect <sha256>', 'the inventory digest you read')
    .option('--expect-current', 'read the inventory first and quote its digest')
    .action(run(async (ctx, options) => {
      const resources = listOption(options.resource, '--resource').map((textArg) => {
        const at = textArg.lastIndexOf(':');
        if (at <= 0 || at === textArg.length - 1) {
          throw new UsageError(`--resource ${JSON.stringify(textArg)} must be <serviceId>:<capability>`);
        }
        return { serviceId: textArg.slice(0, at), capability: choiceOption(textArg.slice(at + 1), platformBindingCapabilities, `--resource ${JSON.stringify(textArg)}: the capability`) };
      });
      if (options.expect !== undefined && options.expectCurrent) {
        throw new UsageError('give either --expect or --expect-current, not both');
      }
      let digest: string = options.expect;
      if (options.expectCurrent) {
        const inventory = await ctx.call('getCorestoreLegacyResources', { clusterId: options.cluster, nodeId: options.node });
        if (!inventory.inventorySha256) {
          throw new UsageError('the inventory has no digest (the node reported it unreachable)');
        }
        digest = inventory.inventorySha256;
        note(`--expect-current: read the inventory at digest ${digest}; the adoption applies only if it is unchanged`);
      }
      requireOption(digest, '--expect <sha256> or --expect-current');
      const stop = options.dryRun ? () => undefined : waitingLine('adopting: waiting for the relay…');
      const answer = await ctx.call('adoptCorestoreLegacyResources', withDryRun(options, {
        clusterId: options.cluster, nodeId: options.node, expectedInventorySha256: digest, resources,
      })).finally(stop);
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => listTable(answer.platformBindings, bindingColumns, {}, '(no bindings)'));
    }));

  const bindings = programArg.command('bindings').description('platform bindings (database, object storage) of services');
  pageOptions(bindings.command('list').description('every binding, or those of one service'))
    .option('--service <id|name>', 'only this service (id or name)')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('getPlatformBindings', { ...(options.service ? { serviceId: options.service } : {}), ...pageRequest(options) });
      printAnswer(answer, ctx.format, () => listTable(answer.platformBindings, bindingColumns, answer));
    }));
  mutation(bindings.command('upsert').description('create or change the binding of a service capability'))
    .option('--file <path>', 'the binding as JSON ({ serviceId, capability, enabled, nodeId, … }); - for stdin')
    .option('--service <id|name>', 'service id or name')
    .option('--capability <capability>', 'database or objectstorage')
    .option('--disabled', 'create or leave it disabled (default: enabled)')
    .option('--node <id|name>', 'the node whose Corestore serves it (default: none)')
    .option('--expect <generation>', 'the binding generation you read, or none to create')
    .option('--expect-current', 'read the binding first (none when it does not exist)')
    .action(run(async (ctx, options) => {
      const platformBinding: IPlatformBindingUpsert = options.file
        ? (await contractBodies()).platformBindingOf(await readJsonFile(options.file), options.file)
        : {
          serviceId: requireOption(options.service, '--service (or --file)'),
          capability: choiceOption(requireOption(options.capability, '--capability'), platformBindingCapabilities, '--capability'),
          enabled: !options.disabled,
          nodeId: options.node ?? null,
        };
      if (options.expect !== undefined && options.expectCurrent) {
        throw new UsageError('give either --expect or --expect-current, not both');
      }
      let expected: number | null;
      if (options.expectCurrent) {
        const list = await ctx.call('getPlatformBindings', { serviceId: platformBinding.serviceId });
        const current = list.platformBindings.find((b) => b.capability === platformBinding.capability);
        expected = current ? current.generation : null;
        note(`--expect-current: read the ${platformBinding.capability} binding of ${platformBinding.serviceId} as ${expected === null ? 'absent (creating)' : `generation ${expected}`}`);
      } else if (options.expect !== undefined) {
        expected = options.expect === 'none' ? null : parseInteger(options.expect, '--expect', 1);
      } else {
        throw new UsageError('give --expect <generation|none> or --expect-current');
      }
      const answer = await ctx.call('upsertPlatformBinding', withDryRun(options, { platformBinding, expectedGeneration: expected }));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => recordTable(answer.platformBinding));
    }));
  addBindingDeleteCommand(bindings);
};

const addBindingDeleteCommand = (bindingsArg: Command): void => {
  generationExpectation(bindingsArg.command('delete').description('delete a platform binding'), 'binding')
    .requiredOption('--binding <id>', 'platform binding id')
    .option('--service <id|name>', 'with --expect-current: the service the binding belongs to (faster read)')
    .action(run(async (ctx, options) => {
      const expected = await expectedGeneration(options, async () => {
        const list = await ctx.call('getPlatformBindings', options.service ? { serviceId: options.service } : {});
        const binding = list.platformBindings.find((b) => b.id === options.binding);
        if (!binding) {
          throw new UsageError(`no platform binding ${options.binding}${options.service ? ` on service ${options.service}` : ''}`);
        }
        return binding.generation;
      }, `binding ${options.binding}`);
      const answer = await ctx.call('deletePlatformBinding', withDryRun(options, { platformBindingId: options.binding, expectedGeneration: expected }));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => recordTable(answer.platformBinding));
    }));
};

// ---------------------------------------------------------------------------------------------
// backups, network, audit
// ---------------------------------------------------------------------------------------------

const addImageCommands = (programArg: Command): void => {
  const images = programArg.command('images').description('image versions pushed to Cloudly (docs/api/images.md)');
  pageOptions(images.command('list').description('the image versions Cloudly holds for a service'))
    .requiredOption('--service <id|name>', 'service id or name')
    .option('--cluster <id|name>', 'with a service name: the cluster to look it up in')
    .option('--organization <id>', 'with a service name: the organization to look it up in')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('getServiceImageVersions', { serviceId: options.service, ...pageRequest(options) });
      printAnswer(answer, ctx.format, () => listTable(answer.imageVersions, imageVersionColumns, answer));
    }));
};

/** The resource types a restore may be limited to: the contract's snapshot types, each listed once. */
const backupResourceTypes = ['volume', 'database', 'bucket'] as const satisfies ReadonlyArray<TBackupSnapshot['type']>;
const everyResourceTypeListed: Exclude<TBackupSnapshot['type'], (typeof backupResourceTypes)[number]> extends never ? true : false = true;
void everyResourceTypeListed;

/**
 * The services of a list page with their cluster's name and their verdict: one `getClusters` and
 * one `getClusterOverview` per cluster on the page (the overview holds the stored verdict and
 * whether it is current).
 */
const serviceListRows = async (ctxArg: ICommandContext, servicesArg: IService[]): Promise<Array<IService & { clusterName?: string; verdict: string }>> => {
  if (servicesArg.length === 0) {
    return [];
  }
  const clusterIds = [...new Set(servicesArg.map((serviceArg) => serviceArg.clusterId))];
  const [{ clusters }, overviews] = await Promise.all([
    ctxArg.call('getClusters', {}),
    Promise.all(clusterIds.map((clusterIdArg) => ctxArg.call('getClusterOverview', { clusterId: clusterIdArg }))),
  ]);
  const names = new Map(clusters.map((clusterArg) => [clusterArg.id, clusterArg.name]));
  const verdicts = new Map(overviews.flatMap(({ overview }) => overview.services.map((entryArg) =>
    [entryArg.service.id, serviceVerdictText(entryArg.runtimeStatus, entryArg.unknown)] as const)));
  return servicesArg.map((serviceArg) => ({ ...serviceArg, clusterName: names.get(serviceArg.clusterId), verdict: verdicts.get(serviceArg.id) ?? '-' }));
};

const addBackupCommands = (programArg: Command): void => {
  const backups = programArg.command('backups').description('service backups, restores and archive pruning');
  pageOptions(backups.command('list').description('recorded backups'))
    .option('--service <id|name>', 'only this service (id or name)')
    .option('--cluster <id|name>', 'only this cluster (id or name)')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('getServiceBackups', {
        ...(options.service ? { serviceId: options.service } : {}), ...(options.cluster ? { clusterId: options.cluster } : {}), ...pageRequest(options),
      });
      printAnswer(answer, ctx.format, () => listTable(answer.backups, backupColumns, answer));
    }));
  longWork(mutation(backups.command('create').description('back up one service on one node, following the operation with progress (Ctrl-C detaches)')))
    .requiredOption('--cluster <id|name>', 'cluster id or name')
    .requiredOption('--node <id|name>', 'node id or name')
    .requiredOption('--service <id|name>', 'service id or name')
    .option('--backup-id <id>', 'your own id: makes the call safe to repeat')
    .option('--tag <key=value>', 'a tag (repeatable)', collect, [])
    .option('--replication', 'replicate the backup')
    .action(run(async (ctx, options) => {
      const tags: Record<string, string> = {};
      const tagTexts = listOption(options.tag, '--tag');
      for (const tag of tagTexts) {
        const at = tag.indexOf('=');
        if (at <= 0) {
          throw new UsageError(`--tag ${JSON.stringify(tag)} must be key=value`);
        }
        tags[tag.slice(0, at)] = tag.slice(at + 1);
      }
      const answer = await ctx.call('createServiceBackup', withDryRun(options, {
        clusterId: options.cluster, nodeId: options.node, serviceId: options.service,
        ...(options.backupId ? { backupId: options.backupId } : {}),
        ...(tagTexts.length ? { tags } : {}),
        ...(options.replication ? { replication: { enabled: true } } : {}),
      }));
      await finishStartedWork(ctx, options, answer, (answerArg) => (options.dryRun
        // The dry run stops before the relay is asked: there is no backup and no operation yet.
        ? recordTable({
          would: `back up service ${options.service} on node ${options.node} of cluster ${options.cluster}`,
          backupId: options.backupId ?? madeByTheRealCall,
          tags: tagTexts.length ? tagTexts.join(', ') : null,
          replication: options.replication ? 'enabled' : null,
          then: options.detach ? 'answer at once with the operation' : 'follow the operation until it ends',
          checked: dryRunChecked(answerArg),
        })
        : recordTable(answerArg.backup)));
    }));
  longWork(mutation(backups.command('restore').description('restore a recorded backup, following the operation with progress (Ctrl-C detaches)')))
    .requiredOption('--backup <id>', 'backup id')
    .option('--node <id>', 'restore onto this node of the cluster (default: where it was taken)')
    .option('--clear', 'clear the resources before restoring')
    .option('--resource-type <type>', 'only this resource type (repeatable)', collect, [])
    .option('-y, --yes', 'restore without asking (a terminal is asked to confirm)')
    .action(run(async (ctx, options) => {
      const request = {
        backupId: options.backup,
        ...(options.node ? { nodeId: options.node } : {}),
        ...(options.clear ? { clear: true } : {}),
        ...(listOption(options.resourceType, '--resource-type').length
          ? { resourceTypes: listOption(options.resourceType, '--resource-type').map((typeArg) => choiceOption(typeArg, backupResourceTypes, '--resource-type')) }
          : {}),
      };
      // A restore replaces the service's data at once. On a terminal it is confirmed first, and
      // only once Cloudly's dry run has passed, so nobody is asked about a restore it would refuse.
      // A script (stdin not a terminal) is not asked.
      if (!options.dryRun && !options.yes && cliIo().stdin.isTTY) {
        await ctx.call('restoreServiceBackup', { ...request, dryRun: true });
        const where = options.node ? `node ${options.node}` : 'the node it was taken on';
        const what = `restore backup ${options.backup} onto ${where}, replacing the service's data there${options.clear ? ' (its resources cleared first)' : ''}?`;
        if (!(await confirm(what))) {
          writeErr('not restored: not confirmed; nothing was changed (--yes restores without asking)');
          setExitCode(exitCodes.refused);
          return;
        }
      }
      const answer = await ctx.call('restoreServiceBackup', withDryRun(options, request));
      // What was restored is the operation's result (`restored`), shown when the operation is followed.
      await finishStartedWork(ctx, options, answer, (answerArg) => (options.dryRun
        ? recordTable({
          would: `restore backup ${options.backup} onto ${options.node ? `node ${options.node}` : 'the node it was taken on'}, replacing the service's data there`,
          clear: options.clear ? 'yes: the resources are cleared first' : 'no',
          resourceTypes: listOption(options.resourceType, '--resource-type').join(', ') || 'every one in the backup',
          then: options.detach ? 'answer at once with the operation' : 'follow the operation until it ends',
          checked: dryRunChecked(answerArg),
        })
        : recordTable(answerArg.backup)));
    }));
  mutation(backups.command('prune').description("prune one node's archive by a retention policy (--dry-run: the relay reports what it would prune)"))
    .requiredOption('--cluster <id|name>', 'cluster id or name')
    .requiredOption('--node <id|name>', 'node id or name')
    .option('--keep-last <n>', 'keep the last n')
    .option('--keep-daily <n>', 'keep one a day for n days')
    .option('--keep-weekly <n>', 'keep one a week for n weeks')
    .option('--keep-monthly <n>', 'keep one a month for n months')
    .action(run(async (ctx, options) => {
      const retention: IArchiveRetentionPolicy = {};
      for (const [flag, key] of [['keepLast', 'keepLast'], ['keepDaily', 'keepDaily'], ['keepWeekly', 'keepWeekly'], ['keepMonthly', 'keepMonthly']] as const) {
        if (options[flag] !== undefined) {
          retention[key] = parseInteger(options[flag], `--${flag.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`, 0);
        }
      }
      if (Object.keys(retention).length === 0) {
        throw new UsageError('give at least one of --keep-last, --keep-daily, --keep-weekly, --keep-monthly');
      }
      const stop = waitingLine('pruning: waiting for the relay…');
      const answer = await ctx.call('adminPruneClusterNodeArchive', {
        clusterId: options.cluster, nodeId: options.node, retention, ...(options.dryRun ? { dryRun: true } : {}),
      }).finally(stop);
      printAnswer(answer, ctx.format, () => (answer.result ? recordTable(answer.result) : recordTable(answer)));
    }));
  addBackupScheduleCommands(backups);
};

/** What a dry run of long work checked: every check, up to the relay call it stopped before. */
const dryRunChecked = (answerArg: unknown): string => {
  const halted = (answerArg as { haltedBefore?: unknown } | null)?.haltedBefore;
  return typeof halted === 'string' ? `every check passed; stopped before ${halted}` : 'every check passed';
};

const addNetworkCommands = (programArg: Command): void => {
  const network = programArg.command('network').description('the runtime network address plan and node projections');
  network.command('plan').description('the current address plan')
    .action(run(async (ctx) => {
      const answer = await ctx.call('getRuntimeNetworkAddressPlan', {});
      printAnswer(answer, ctx.format, () => (answer.plan ? recordTable(answer.plan) : '(no plan yet)'));
    }));
  mutation(network.command('set-plan').description('write the next revision of the address plan'))
    .requiredOption('--file <path>', 'the plan as JSON (- for stdin)')
    .option('--expect-current', "read the current plan and set the file's revision to the one after it")
    .action(run(async (ctx, options) => {
      let plan = (await contractBodies()).addressPlanOf(await readJsonFile(options.file), options.file);
      if (options.expectCurrent) {
        const current = (await ctx.call('getRuntimeNetworkAddressPlan', {})).plan;
        plan = { ...plan, revision: current ? current.revision + 1 : 1 };
        note(`--expect-current: the current plan is ${current ? `revision ${current.revision}` : 'absent'}; writing revision ${plan.revision}`);
      }
      const answer = await ctx.call('setRuntimeNetworkAddressPlan', withDryRun(options, { plan }));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => `${recordTable(answer.plan)}${answer.replayed ? '\n(replayed: the stored plan is exactly this)' : ''}`);
    }));
  network.command('projection').description("a node's runtime network projection")
    .requiredOption('--cluster <id|name>', 'cluster id or name')
    .requiredOption('--node <id|name>', 'node id or name')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('getRuntimeNetworkProjection', { clusterId: options.cluster, nodeId: options.node });
      printAnswer(answer, ctx.format, () => recordTable(answer.projection));
    }));
};

const parseTime = (textArg: string, flagArg: string): number => {
  const value = /^\d+$/.test(textArg) ? Number(textArg) : Date.parse(textArg);
  if (!Number.isFinite(value)) {
    throw new UsageError(`${flagArg} must be epoch milliseconds or a date (2026-11-30T10:00Z)`);
  }
  return value;
};

const addAuditCommand = (programArg: Command): void => {
  filtersByName(programArg.command('audit').description('the audit log, newest first: people\'s changes (--all adds relays\' and Cloudly\'s own; reads are hidden unless --include-reads)'))
    .option('--limit <n>', 'events per page (1-1000)')
    .option('--cursor <cursor>', 'the page after this cursor')
    .option('--kind <kind>', 'one kind of document: service, cluster, node, user, binding, backup … or its stored name (CloudlyService)')
    .option('--target-kind <kind>', 'the same as --kind')
    .option('--target-id <id>', 'one document')
    .option('--user <id|name>', 'changes made by this account (username or user id)')
    .option('--actor <id>', 'one actor id (relay:<clusterId>, cloudly, or a user id)')
    .option('--method <method>', 'one method')
    .option('--since <time>', 'from (inclusive)')
    .option('--until <time>', 'until (exclusive)')
    .option('--all', 'also show the changes relays and Cloudly itself made')
    .option('--include-reads', 'also show events of methods that only read (get…, list…, watch…)')
    .action(run(async (ctx, options) => {
      if (options.user !== undefined && options.actor !== undefined) {
        throw new UsageError('give --user or --actor, not both');
      }
      const kind = options.kind ?? options.targetKind;
      const filter: IAuditEventFilter = {
        ...(kind ? { targetKind: auditKindOf(kind) } : {}),
        ...(options.targetId ? { targetId: options.targetId } : {}),
        ...(options.actor ? { actorId: options.actor } : {}),
        ...(options.user ? { actorId: options.user } : {}),
        ...(options.method ? { method: options.method } : {}),
        ...(options.since ? { since: parseTime(options.since, '--since') } : {}),
        ...(options.until ? { until: parseTime(options.until, '--until') } : {}),
      };
      const answer = await ctx.call('getAuditEvents', { ...pageRequest(options), ...(Object.keys(filter).length ? { filter } : {}) });
      if (ctx.format === 'json' || ctx.format === 'yaml') {
        // JSON and YAML are the API's answer, exactly.
        printAnswer(answer, ctx.format, () => '');
        return;
      }
      // An actor asked for by name or id is shown whoever it is.
      const everyone = Boolean(options.all) || options.actor !== undefined;
      const byPeople = judgeAuditActorsShown(answer.events, everyone);
      const { shown, hidden } = judgeAuditEventsShown(byPeople.shown, Boolean(options.includeReads) || options.method !== undefined);
      const [usernames, targetNames] = await Promise.all([usernamesOf(ctx, shown), targetNamesOf(ctx, shown)]);
      printAnswer(answer, ctx.format, () => listTable(shown, auditColumns(usernames, targetNames), answer, '(no events)'));
      if (byPeople.hidden > 0) {
        note(`${byPeople.hidden} change(s) by relays or Cloudly itself are hidden on this page (--all shows them)`);
      }
      if (hidden > 0) {
        note(`${hidden} event(s) of methods that only read are hidden on this page (--include-reads shows them)`);
      }
    }));
};

/**
 * The names of the clusters, services and accounts a page of events changed, by `kind/id`: one
 * list call per kind on the page. A target since removed, or a list this account may not read,
 * has none (the table shows `-`).
 */
const targetNamesOf = async (ctxArg: ICommandContext, eventsArg: IAuditEvent[]): Promise<Map<string, string>> => {
  const kinds = new Set(eventsArg.map((eventArg) => eventArg.target.kind));
  const read = async <T>(kindArg: string, listArg: () => Promise<T[]>, pairArg: (itemArg: T) => [string, string]): Promise<Array<[string, string]>> => {
    if (!kinds.has(kindArg)) {
      return [];
    }
    try {
      return (await listArg()).map((itemArg) => {
        const [id, name] = pairArg(itemArg);
        return [`${kindArg}/${id}`, name];
      });
    } catch {
      return [];
    }
  };
  const pairs = await Promise.all([
    read('CloudlyCluster', async () => (await ctxArg.call('getClusters', {})).clusters, (c) => [c.id, c.name]),
    read('CloudlyService', async () => (await ctxArg.call('getServices', {})).services, (s) => [s.id, s.name]),
    read('CloudlyAdminUser', async () => (await ctxArg.call('getUsers', {})).users, (u) => [u.userId, u.username]),
  ]);
  return new Map(pairs.flat());
};

/** The events of people (administrators and users) among a page, or every event with `allArg`. */
export const judgeAuditActorsShown = <T extends { actor: { kind: string } }>(eventsArg: T[], allArg: boolean): { shown: T[]; hidden: number } => {
  const shown = allArg ? eventsArg : eventsArg.filter((eventArg) => eventArg.actor.kind === 'admin');
  return { shown, hidden: eventsArg.length - shown.length };
};

/** Plain names of the kinds people look for, beside the stored `Cloudly…` names. */
const auditKindAliases: Readonly<Record<string, string>> = Object.freeze({
  node: 'CloudlyClusterNode',
  user: 'CloudlyAdminUser',
  account: 'CloudlyAdminUser',
  binding: 'CloudlyPlatformBinding',
  backup: 'CloudlyServiceBackup',
});

/**
 * The stored kind a plain name means: `service` → `CloudlyService`, `cluster-node` →
 * `CloudlyClusterNode`, a few aliases (`node`, `user`, `binding`, `backup`); a stored name as it is.
 */
export const auditKindOf = (textArg: string): string => {
  const text = textArg.trim();
  if (/^Cloudly[A-Z]/.test(text)) {
    return text;
  }
  const alias = auditKindAliases[text.toLowerCase()];
  if (alias) {
    return alias;
  }
  const words = text.split(/[-_\s]+/).filter(Boolean);
  if (words.length === 0 || !words.every((wordArg) => /^[A-Za-z][A-Za-z0-9]*$/.test(wordArg))) {
    throw new UsageError(`--kind ${JSON.stringify(textArg)} is not a kind: give e.g. service, cluster, node, user or CloudlyService`);
  }
  return `Cloudly${words.map((wordArg) => wordArg[0].toUpperCase() + wordArg.slice(1).toLowerCase()).join('')}`;
};

/** The events a table shows: all of them, or (by default) all but those of methods that only read. */
export const judgeAuditEventsShown = <T extends { method: string }>(eventsArg: T[], includeReadsArg: boolean): { shown: T[]; hidden: number } => {
  const shown = includeReadsArg ? eventsArg : eventsArg.filter((eventArg) => !isAuditReadMethod(eventArg.method));
  return { shown, hidden: eventsArg.length - shown.length };
};

/**
 * Usernames of the administrators among the actors, by user id. Only administrators may list the
 * accounts: for anyone else (or when the list cannot be read) the log shows user ids.
 */
const usernamesOf = async (ctxArg: ICommandContext, eventsArg: ReadonlyArray<{ actor?: { kind: string; id: string } }>): Promise<Map<string, string>> => {
  const names = new Map<string, string>();
  if (!eventsArg.some((eventArg) => eventArg.actor?.kind === 'admin')) {
    return names;
  }
  try {
    let cursor: string | undefined;
    // A bounded walk: a log view is not worth more than a few pages of accounts.
    for (let page = 0; page < 10; page++) {
      const answer = await ctxArg.call('getUsers', { limit: 1000, ...(cursor ? { cursor } : {}) });
      for (const user of answer.users ?? []) {
        names.set(user.userId, user.username);
      }
      cursor = answer.nextCursor;
      if (!cursor) {
        break;
      }
    }
  } catch {
    // Not an administrator, or the accounts are unavailable: ids are shown instead.
  }
  return names;
};

/** The name a watched document carries (clusters, services, nodes, accounts), if any. */
const watchedName = (documentArg: unknown): string | undefined => {
  if (typeof documentArg !== 'object' || documentArg === null) {
    return undefined;
  }
  const record = documentArg as Record<string, unknown>;
  const name = record.name ?? record.username;
  return typeof name === 'string' && name !== '' ? name : undefined;
};

const addWatchCommand = (programArg: Command): void => {
  filtersByName(programArg.command('watch').description('follow every committed change on the admin socket until Ctrl-C'))
    .option('--kind <kind>', 'only this document kind, e.g. CloudlyService (repeatable)', collect, [])
    .option('--cluster <id|name>', 'only changes of this cluster (id or name)')
    .option('--since <revision>', 'resume after this revision (from an earlier watch)')
    .action(run(async (ctx, options) => {
      await ctx.client.connectSocket();
      const events: IChangeEvent[] = [];
      let ended: ((codeArg: number) => void) | null = null;
      const done = new Promise<number>((resolve) => { ended = resolve; });
      // Usernames are read once, at the first change an administrator made (ids when they cannot be read).
      let usernames: Promise<Map<string, string>> | null = null;
      const print = async (eventArg: IChangeEvent): Promise<void> => {
        if (ctx.format === 'json') {
          writeOut(JSON.stringify(eventArg));
        } else if (ctx.format === 'yaml') {
          writeOut(`---\n${renderYaml(eventArg)}`);
        } else {
          const name = watchedName(eventArg.document);
          let actor = eventArg.actor?.id ?? '-';
          if (eventArg.actor?.kind === 'admin') {
            usernames ??= usernamesOf(ctx, [eventArg]);
            actor = (await usernames).get(eventArg.actor.id) ?? actor;
          }
          writeOut(`${eventArg.revision}  ${formatTime(Date.now())}  ${eventArg.change.padEnd(7)}  ${eventArg.kind}/${eventArg.id}${name ? ` (${name})` : ''}  gen ${eventArg.generation}  by ${actor}`);
        }
      };
      // Lines leave in the order the changes came, whatever a username look-up costs.
      let printed: Promise<void> = Promise.resolve();
      ctx.client.handleCall<ICloudlyOutboundMethods['changeEvent']>('changeEvent', (eventArg) => {
        events.push(eventArg);
        printed = printed.then(() => print(eventArg));
        return {};
      });
      ctx.client.handleCall<ICloudlyOutboundMethods['watchExpired']>('watchExpired', (expiryArg) => {
        note(`the watch expired at revision ${expiryArg.revision} (${expiryArg.reason}): list again, then watch again`);
        ended?.(exitCodes.unavailable);
        return {};
      });
      const answer = await ctx.call('watchChanges', {
        ...(listOption(options.kind, '--kind').length ? { kinds: listOption(options.kind, '--kind') } : {}),
        ...(options.cluster ? { clusterId: options.cluster } : {}),
        ...(options.since !== undefined ? { sinceRevision: parseInteger(options.since, '--since', 0) } : {}),
      });
      note(`watching from revision ${answer.revision} (Ctrl-C to stop)`);
      const stop = (): void => {
        void ctx.call('unwatchChanges', { watchId: answer.watchId }).catch(() => undefined).finally(() => ended?.(exitCodes.ok));
      };
      const { signals } = cliIo();
      signals.once('SIGINT', stop);
      signals.once('SIGTERM', stop);
      const closedTimer = setInterval(() => {
        if (!ctx.client.socketOpen) {
          note('the server closed the socket');
          ended?.(exitCodes.unavailable);
        }
      }, 500);
      const code = await done;
      clearInterval(closedTimer);
      await printed;
      ctx.client.close();
      setExitCode(code);
    }));
};

export const addCommands = (programArg: Command): void => {
  programArg.command('server').description('start the Cloudly server (what `npm start` runs)')
    .action(async () => {
      // bin/cloudly.js starts the server through bin/cloudly-server (the node flags); this path
      // serves `node dist/cli/main.js server`, which runs without them.
      await import('../cli.js');
      await new Promise<never>(() => undefined);
    });
  addSessionCommands(programArg);
  addContextCommands(programArg);
  addClusterCommands(programArg);
  addServiceCommands(programArg);
  addIngressCommands(programArg);
  addCorestoreCommands(programArg);
  addBackupCommands(programArg);
  addImageCommands(programArg);
  addOperationCommands(programArg);
  addRolloutCommands(programArg);
  addUserCommands(programArg);
  addStorageCommands(programArg);
  addSnapshotCommands(programArg);
  addNetworkCommands(programArg);
  addSecretCommands(programArg);
  addAuditCommand(programArg);
  addWatchCommand(programArg);
};
