import type { Command } from 'commander';
import { isRefusal, UsageError, type ICommandContext } from './context.js';
import type { TOptions } from './commandkit.js';

/**
 * Names wherever the CLI takes an id (docs/cli.md, Names): `--cluster`, `--service`, `--node` and
 * `--user` take an id or a unique name. The CLI resolves them before the command runs, by listing
 * through the admin methods every command already uses: an id that exists wins over a name, a
 * name matching several is a usage error naming the candidates. A value matching nothing is sent
 * as given, so the server refuses it `not-found` as before; only a list's filter (which the server
 * would answer with an empty list) is reported here as not found, with exit 1 like the refusal.
 */

/** A value matched neither an id nor a name; exit 1, like the server's `not-found`. */
export class NameNotFoundError extends Error {}

export interface INamedCandidate {
  id: string;
  name: string;
  /** Where it is, to tell candidates of one name apart (e.g. `cluster prod`). */
  where?: string;
}

/**
 * The id `givenArg` names among `candidatesArg`: its own id first, else the one candidate of that
 * name. Nothing matching: `givenArg` itself when `strictArg` is false (the server judges it).
 */
export const pickNamed = (
  kindArg: string,
  flagArg: string,
  givenArg: string,
  candidatesArg: readonly INamedCandidate[],
  scopeArg = '',
  strictArg = true,
): string => {
  if (candidatesArg.some((candidateArg) => candidateArg.id === givenArg)) {
    return givenArg;
  }
  const named = candidatesArg.filter((candidateArg) => candidateArg.name === givenArg);
  if (named.length === 1) {
    return named[0].id;
  }
  if (named.length > 1) {
    const lines = named.map((candidateArg) => `  ${candidateArg.id}${candidateArg.where ? `  (${candidateArg.where})` : ''}`);
    throw new UsageError(`${flagArg} ${givenArg}: ${named.length} ${kindArg}s${scopeArg} are named ${givenArg}; pass one of their ids:\n${lines.join('\n')}`);
  }
  if (!strictArg) {
    return givenArg;
  }
  throw new NameNotFoundError(`${flagArg} ${givenArg}: no ${kindArg}${scopeArg} has this id or name`);
};

/** Options whose value is a new id (e.g. `nodes add --node`), never resolved. */
const literalOptions = new WeakMap<Command, Set<string>>();
/** Commands whose `--cluster`/`--service`/… only filter a list: an unknown value is reported here. */
const filterCommands = new WeakSet<Command>();

/** Marks `commandArg` as a list whose id options filter it. */
export const filtersByName = (commandArg: Command): Command => {
  filterCommands.add(commandArg);
  return commandArg;
};

/** Marks `optionArg` of `commandArg` as naming something that does not exist yet. */
export const literalId = (commandArg: Command, optionArg: string): Command => {
  literalOptions.set(commandArg, new Set([...(literalOptions.get(commandArg) ?? []), optionArg]));
  return commandArg;
};

const given = (valueArg: unknown): valueArg is string => typeof valueArg === 'string' && valueArg !== '';

/**
 * Replaces, in `optionsArg`, every name given to `--cluster`, `--service`, `--node` and `--user`
 * by the id it names. Services are looked up within the cluster (and organization) given beside
 * them, nodes within the cluster given beside them.
 */
export const resolveNamedOptions = async (ctxArg: ICommandContext, optionsArg: TOptions, commandArg: Command): Promise<void> => {
  const literal = literalOptions.get(commandArg) ?? new Set<string>();
  // A list's optional filter is judged here; anything the server looks up itself is sent as given.
  const strict = (flagArg: string): boolean =>
    filterCommands.has(commandArg) && commandArg.options.some((optionArg) => optionArg.long === flagArg && !optionArg.mandatory);
  const pickByIdOrName = (kindArg: string, flagArg: string, givenArg: string, candidatesArg: readonly INamedCandidate[], scopeArg = ''): string => {
    const id = pickNamed(kindArg, flagArg, givenArg, candidatesArg, scopeArg, strict(flagArg));
    if (id !== givenArg) {
      // Messages keep saying what the operator typed.
      optionsArg.givenNames = { ...(optionsArg.givenNames as Record<string, string> | undefined), [flagArg.slice(2)]: givenArg };
    }
    return id;
  };
  const wanted = (optionArg: string): boolean => !literal.has(optionArg) && (given(optionsArg[optionArg]) || (Array.isArray(optionsArg[optionArg]) && optionsArg[optionArg].length > 0));
  let clusters: Array<{ id: string; name: string }> | undefined;
  const readClusters = async () => (clusters ??= (await ctxArg.call('getClusters', {})).clusters.map(({ id, name }) => ({ id, name })));
  const clusterName = (idArg: string) => clusters?.find((clusterArg) => clusterArg.id === idArg)?.name ?? idArg;

  if (wanted('cluster')) {
    optionsArg.cluster = pickByIdOrName('cluster', '--cluster', optionsArg.cluster, await readClusters());
  }
  const cluster = given(optionsArg.cluster) ? optionsArg.cluster as string : undefined;
  const inCluster = cluster === undefined ? '' : ` in cluster ${clusterName(cluster)}`;

  // A node beside a service (e.g. a binding's Corestore node) is one of the service's cluster.
  let serviceCluster: string | undefined;
  if (wanted('service') && given(optionsArg.service)) {
    const { services } = await ctxArg.call('getServices', cluster === undefined ? {} : { clusterId: cluster });
    const organization = given(optionsArg.organization) ? optionsArg.organization as string : undefined;
    const scoped = services.filter((serviceArg) => organization === undefined || serviceArg.organizationId === organization);
    if (scoped.filter((serviceArg) => serviceArg.name === optionsArg.service).length > 1) {
      await readClusters();
    }
    const candidates = scoped.map((serviceArg) => ({
      id: serviceArg.id,
      name: serviceArg.name,
      where: `cluster ${clusterName(serviceArg.clusterId)}, organization ${serviceArg.organizationId}`,
    }));
    const scope = `${inCluster}${organization === undefined ? '' : ` of organization ${organization}`}`;
    optionsArg.service = pickByIdOrName('service', '--service', optionsArg.service, candidates, scope);
    serviceCluster = services.find((serviceArg) => serviceArg.id === optionsArg.service)?.clusterId;
  }

  const nodeCluster = cluster ?? serviceCluster;
  if (wanted('node') && nodeCluster !== undefined) {
    // A cluster that does not exist has no nodes: the command's own call says so.
    const nodes = await ctxArg.call('getClusterNodes', { clusterId: nodeCluster }).then(
      (answerArg) => answerArg.nodes,
      (errorArg: unknown) => {
        if (isRefusal(errorArg) && (errorArg.errorData as { code?: unknown } | undefined)?.code === 'not-found') {
          return [];
        }
        throw errorArg;
      },
    );
    const candidates = nodes.map(({ id, name }) => ({ id, name }));
    const scope = ` in cluster ${clusterName(nodeCluster)}`;
    const resolve = (valueArg: string) => pickByIdOrName('node', '--node', valueArg, candidates, scope);
    optionsArg.node = Array.isArray(optionsArg.node) ? (optionsArg.node as string[]).map(resolve) : resolve(optionsArg.node);
  }

  if (wanted('user') && given(optionsArg.user)) {
    // Only administrators may list accounts: anyone else's `--user` is taken as a user id.
    const users = await ctxArg.call('getUsers', {}).then(
      (answerArg) => answerArg.users,
      (errorArg: unknown) => {
        if (isRefusal(errorArg) && (errorArg.errorData as { code?: unknown } | undefined)?.code === 'forbidden') {
          return null;
        }
        throw errorArg;
      },
    );
    if (users) {
      optionsArg.user = pickByIdOrName('user', '--user', optionsArg.user, users.map(({ userId, username }) => ({ id: userId, name: username })));
    }
  }
};
