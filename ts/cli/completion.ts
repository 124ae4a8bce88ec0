import type { Command } from 'commander';

/**
 * Shell completion generated from the command tree itself: commands, subcommands and each
 * command's flags. `cloudly completion bash` / `cloudly completion zsh`.
 */

interface ICompletionEntry {
  path: string;
  words: string[];
}

const entries = (commandArg: Command, prefixArg: string[] = []): ICompletionEntry[] => {
  const globals = ['--url', '--output', '--help'];
  const own = commandArg.options.map((optionArg) => optionArg.long).filter((nameArg): nameArg is string => Boolean(nameArg));
  const children = commandArg.commands.map((childArg) => childArg.name());
  const result: ICompletionEntry[] = [{ path: prefixArg.join(' '), words: [...children, ...own, ...(prefixArg.length ? globals : [])] }];
  for (const child of commandArg.commands) {
    result.push(...entries(child, [...prefixArg, child.name()]));
  }
  return result;
};

const caseArms = (programArg: Command): string => entries(programArg)
  .map((entryArg) => `    "${entryArg.path}") words="${[...new Set(entryArg.words)].join(' ')}" ;;`)
  .join('\n');

export const bashCompletion = (programArg: Command): string => `# cloudly bash completion: eval "$(cloudly completion bash)"
_cloudly() {
  local cur cmdpath words i
  cur="\${COMP_WORDS[COMP_CWORD]}"
  cmdpath=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    case "\${COMP_WORDS[i]}" in
      -*) break ;;
      *) cmdpath="\${cmdpath:+$cmdpath }\${COMP_WORDS[i]}" ;;
    esac
  done
  case "$cmdpath" in
${caseArms(programArg)}
    *) words="--help" ;;
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=( $(compgen -W "$words" -- "$cur") )
  else
    COMPREPLY=( $(compgen -W "$words --output --url" -- "$cur") )
    [[ "\${COMP_WORDS[COMP_CWORD-1]}" == "--output" || "\${COMP_WORDS[COMP_CWORD-1]}" == "-o" ]] && COMPREPLY=( $(compgen -W "table json yaml" -- "$cur") )
  fi
}
complete -o default -F _cloudly cloudly
`;

export const zshCompletion = (programArg: Command): string => `#compdef cloudly
# cloudly zsh completion: eval "$(cloudly completion zsh)", or save as _cloudly in your $fpath
_cloudly() {
  local cmdpath="" w
  local -a candidates
  for w in \${words[2,CURRENT-1]}; do
    [[ "$w" == -* ]] && break
    cmdpath="\${cmdpath:+$cmdpath }$w"
  done
  if [[ "\${words[CURRENT-1]}" == "--output" || "\${words[CURRENT-1]}" == "-o" ]]; then
    compadd table json yaml
    return
  fi
  case "$cmdpath" in
${caseArms(programArg).replace(/words=/g, 'w=')}
    *) w="--help" ;;
  esac
  candidates=(\${=w})
  compadd -- $candidates
}
if [[ "$(whence -w compdef)" == *function* ]]; then
  compdef _cloudly cloudly
fi
`;

export const addCompletionCommand = (programArg: Command): void => {
  programArg.command('completion')
    .description('print a shell completion script: eval "$(cloudly completion bash)"')
    .argument('<shell>', 'bash or zsh')
    .action((shellArg: string) => {
      if (shellArg !== 'bash' && shellArg !== 'zsh') {
        programArg.error(`completion: shell must be bash or zsh, not ${JSON.stringify(shellArg)}`, { exitCode: 2, code: 'cloudly.usage' });
      }
      process.stdout.write(shellArg === 'bash' ? bashCompletion(programArg) : zshCompletion(programArg));
    });
};
