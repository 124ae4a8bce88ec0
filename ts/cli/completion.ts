import type { Command, Option } from 'commander';
import { cliIo } from './io.js';

/**
 * Shell completion generated from the command tree itself: commands, subcommands, each command's
 * flags, the values of `--output`, and the names `--cluster`, `--service`, `--user` and
 * `--context` take (read when TAB is pressed, through the hidden `cloudly __complete <kind>`).
 * `cloudly completion bash` / `zsh` / `fish`.
 *
 * Both scripts share one spec function (`_cloudly_spec <path>`, plain `case`, valid in bash and
 * zsh) that sets the candidates of a command path and the flags of that path that take a value.
 * The command path is built from the words typed so far that extend a known path: flags, their
 * values and anything else are skipped, so `cloudly --url http://x clusters rot<TAB>` and
 * `cloudly clusters create --name x --dr<TAB>` both complete.
 */

interface ICompletionEntry {
  path: string;
  words: string[];
  valueFlags: string[];
}

const globalWords = ['--url', '--output', '--help'];
const globalValueFlags = ['--url', '-u', '--output', '-o'];

const flagNames = (optionArg: Option): string[] => [optionArg.long, optionArg.short].filter((nameArg): nameArg is string => Boolean(nameArg));

/** The commands a person types: not the hidden `__complete` the scripts call. */
const typedCommands = (commandArg: Command): Command[] => commandArg.commands.filter((childArg) => !childArg.name().startsWith('__'));

const entries = (commandArg: Command, prefixArg: string[] = []): ICompletionEntry[] => {
  const own = commandArg.options.map((optionArg) => optionArg.long).filter((nameArg): nameArg is string => Boolean(nameArg));
  const valued = commandArg.options.filter((optionArg) => optionArg.required || optionArg.optional).flatMap(flagNames);
  const children = typedCommands(commandArg).map((childArg) => childArg.name());
  const result: ICompletionEntry[] = [{
    path: prefixArg.join(' '),
    words: [...new Set([...children, ...own, ...(prefixArg.length ? globalWords : [])])],
    valueFlags: [...new Set([...valued, ...globalValueFlags])],
  }];
  for (const child of typedCommands(commandArg)) {
    result.push(...entries(child, [...prefixArg, child.name()]));
  }
  return result;
};

/** `_cloudly_spec <path>`: sets `_cl_words` and `_cl_values`; answers 1 for an unknown path. */
const specFunction = (programArg: Command): string => `_cloudly_spec() {
  case "$1" in
${entries(programArg).map((entryArg) => `    "${entryArg.path}") _cl_words="${entryArg.words.join(' ')}"; _cl_values=" ${entryArg.valueFlags.join(' ')} " ;;`).join('\n')}
    *) return 1 ;;
  esac
  return 0
}`;

/** The flags whose values are names `cloudly __complete <kind>` lists, and that kind. */
export const nameFlags: ReadonlyArray<readonly [string, TNameKind]> = [['--cluster', 'cluster'], ['--service', 'service'], ['--user', 'user'], ['--context', 'context']];
export type TNameKind = 'cluster' | 'service' | 'user' | 'context';
export const nameKinds: readonly TNameKind[] = ['cluster', 'service', 'user', 'context'];

export const bashCompletion = (programArg: Command): string => `# cloudly bash completion: eval "$(cloudly completion bash)"
${specFunction(programArg)}
_cloudly() {
  local cur prev cmdpath word next i skip=0 _cl_words _cl_values
  cur="\${COMP_WORDS[COMP_CWORD]}"
  prev="\${COMP_WORDS[COMP_CWORD-1]}"
  cmdpath=""
  _cloudly_spec ""
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="\${COMP_WORDS[i]}"
    if ((skip)); then skip=0; continue; fi
    if [[ "$word" == -* ]]; then
      [[ "$_cl_values" == *" $word "* ]] && skip=1
      continue
    fi
    next="\${cmdpath:+$cmdpath }$word"
    if _cloudly_spec "$next"; then cmdpath="$next"; else _cloudly_spec "$cmdpath"; fi
  done
  COMPREPLY=()
  if [[ "$prev" == "--output" || "$prev" == "-o" ]]; then
    COMPREPLY=( $(compgen -W "table wide json yaml" -- "$cur") )
${nameFlags.map(([flag, kind]) => `  elif [[ "$prev" == "${flag}" ]]; then
    local IFS=$'\\n'
    COMPREPLY=( $(compgen -W "$(cloudly __complete ${kind} 2>/dev/null)" -- "$cur") )`).join('\n')}
  elif [[ "$prev" == -* && "$_cl_values" == *" $prev "* ]]; then
    return 0
  else
    COMPREPLY=( $(compgen -W "$_cl_words" -- "$cur") )
  fi
}
complete -o default -F _cloudly cloudly
`;

export const zshCompletion = (programArg: Command): string => `#compdef cloudly
# cloudly zsh completion: eval "$(cloudly completion zsh)" after compinit, or save as _cloudly in your $fpath
${specFunction(programArg)}
_cloudly() {
  local cmdpath="" word next prev skip=0 _cl_words _cl_values
  local -a candidates names
  _cloudly_spec ""
  for word in "\${(@)words[2,CURRENT-1]}"; do
    if (( skip )); then skip=0; continue; fi
    if [[ "$word" == -* ]]; then
      [[ "$_cl_values" == *" $word "* ]] && skip=1
      continue
    fi
    next="\${cmdpath:+$cmdpath }$word"
    if _cloudly_spec "$next"; then cmdpath="$next"; else _cloudly_spec "$cmdpath"; fi
  done
  prev="\${words[CURRENT-1]}"
  if [[ "$prev" == "--output" || "$prev" == "-o" ]]; then
    compadd -- table wide json yaml
    return
  fi
  case "$prev" in
${nameFlags.map(([flag, kind]) => `    ${flag}) names=(\${(f)"$(cloudly __complete ${kind} 2>/dev/null)"}); compadd -a names; return ;;`).join('\n')}
  esac
  if [[ "$prev" == -* && "$_cl_values" == *" $prev "* ]]; then
    _default
    return
  fi
  candidates=(\${=_cl_words})
  compadd -- $candidates
}
if [[ "\${zsh_eval_context[-1]}" == loadautofunc ]]; then
  # Autoloaded from $fpath as _cloudly: this first call completes too.
  _cloudly "$@"
elif (( $+functions[compdef] )); then
  compdef _cloudly cloudly
fi
`;

const fishList = (wordsArg: readonly string[]): string => wordsArg.map((wordArg) => `'${wordArg}'`).join(' ');

/**
 * fish: the same walk as bash and zsh over the tokens typed (`commandline -opc`), with the spec
 * as a fish `switch`; candidates are printed one a line for `complete -a`.
 */
export const fishCompletion = (programArg: Command): string => `# cloudly fish completion: cloudly completion fish | source   (or save as ~/.config/fish/completions/cloudly.fish)
function __cloudly_spec
    switch "$argv[1]"
${entries(programArg).map((entryArg) => `        case '${entryArg.path}'
            set -g __cl_words ${fishList(entryArg.words)}
            set -g __cl_values ${fishList(entryArg.valueFlags)}`).join('\n')}
        case '*'
            return 1
    end
    return 0
end

function __cloudly_complete
    set -l tokens (commandline -opc)
    set -e tokens[1]
    set -l cmdpath ''
    set -l skip 0
    __cloudly_spec ''
    for word in $tokens
        if test $skip -eq 1
            set skip 0
            continue
        end
        if string match -q -- '-*' $word
            contains -- $word $__cl_values; and set skip 1
            continue
        end
        set -l next (string trim -- "$cmdpath $word")
        if __cloudly_spec "$next"
            set cmdpath "$next"
        else
            __cloudly_spec "$cmdpath"
        end
    end
    set -l prev ''
    if test (count $tokens) -gt 0
        set prev $tokens[-1]
    end
    switch "$prev"
        case --output -o
            printf '%s\n' table wide json yaml
            return
${nameFlags.map(([flag, kind]) => `        case ${flag}
            cloudly __complete ${kind} 2>/dev/null
            return`).join('\n')}
    end
    if string match -q -- '-*' "$prev"; and contains -- "$prev" $__cl_values
        __fish_complete_path (commandline -ct)
        return
    end
    printf '%s\n' $__cl_words
end

complete -c cloudly -f -a '(__cloudly_complete)'
`;

const shells = ['bash', 'zsh', 'fish'] as const;

/**
 * The names a kind's flag takes, one a line, for the shells: clusters, services, accounts through
 * the context in use, contexts from the config file. Prints nothing when they cannot be read (not
 * logged in, server away, not allowed): a completion never prints an error.
 */
const printNames = async (kindArg: TNameKind, optionsArg: Record<string, unknown>): Promise<void> => {
  const [{ readCredentials }, { openContext }] = await Promise.all([import('./credentials.js'), import('./context.js')]);
  let names: string[] = [];
  try {
    if (kindArg === 'context') {
      names = Object.keys((await readCredentials()).contexts);
    } else {
      const ctx = await openContext({ url: optionsArg.url as string | undefined, context: optionsArg.context as string | undefined });
      names = kindArg === 'cluster'
        ? (await ctx.call('getClusters', {})).clusters.map((clusterArg) => clusterArg.name)
        : kindArg === 'service'
          ? (await ctx.call('getServices', {})).services.map((serviceArg) => serviceArg.name)
          : (await ctx.call('getUsers', {})).users.map((userArg) => userArg.username);
    }
  } catch {
    return;
  }
  const unique = [...new Set(names)].sort();
  if (unique.length > 0) {
    cliIo().stdout.write(`${unique.join('\n')}\n`);
  }
};

export const addCompletionCommand = (programArg: Command): void => {
  programArg.command('completion')
    .description('print a shell completion script: eval "$(cloudly completion bash)", or zsh, or `cloudly completion fish | source`')
    .argument('<shell>', 'bash, zsh or fish')
    .action((shellArg: string) => {
      if (!(shells as readonly string[]).includes(shellArg)) {
        programArg.error(`completion: shell must be bash, zsh or fish, not ${JSON.stringify(shellArg)}`, { exitCode: 2, code: 'cloudly.usage' });
      }
      cliIo().stdout.write(shellArg === 'bash' ? bashCompletion(programArg) : shellArg === 'zsh' ? zshCompletion(programArg) : fishCompletion(programArg));
    });
  programArg.command('__complete', { hidden: true })
    .description('the names a flag takes, for the completion scripts')
    .argument('<kind>', nameKinds.join(', '))
    .action(async (kindArg: string, _optionsArg: unknown, commandArg: Command) => {
      if ((nameKinds as readonly string[]).includes(kindArg)) {
        await printNames(kindArg as TNameKind, commandArg.optsWithGlobals());
      }
    });
};
