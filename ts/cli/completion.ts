import type { Command, Option } from 'commander';
import { cliIo } from './io.js';

/**
 * Shell completion generated from the command tree itself: commands, subcommands, each command's
 * flags, and the values of `--output`. `cloudly completion bash` / `cloudly completion zsh`.
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

const entries = (commandArg: Command, prefixArg: string[] = []): ICompletionEntry[] => {
  const own = commandArg.options.map((optionArg) => optionArg.long).filter((nameArg): nameArg is string => Boolean(nameArg));
  const valued = commandArg.options.filter((optionArg) => optionArg.required || optionArg.optional).flatMap(flagNames);
  const children = commandArg.commands.map((childArg) => childArg.name());
  const result: ICompletionEntry[] = [{
    path: prefixArg.join(' '),
    words: [...new Set([...children, ...own, ...(prefixArg.length ? globalWords : [])])],
    valueFlags: [...new Set([...valued, ...globalValueFlags])],
  }];
  for (const child of commandArg.commands) {
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
  local -a candidates
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

export const addCompletionCommand = (programArg: Command): void => {
  programArg.command('completion')
    .description('print a shell completion script: eval "$(cloudly completion bash)"')
    .argument('<shell>', 'bash or zsh')
    .action((shellArg: string) => {
      if (shellArg !== 'bash' && shellArg !== 'zsh') {
        programArg.error(`completion: shell must be bash or zsh, not ${JSON.stringify(shellArg)}`, { exitCode: 2, code: 'cloudly.usage' });
      }
      cliIo().stdout.write(shellArg === 'bash' ? bashCompletion(programArg) : zshCompletion(programArg));
    });
};
