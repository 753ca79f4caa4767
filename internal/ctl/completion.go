package ctl

import (
	"fmt"
	"strings"
)

// completionCmd prints a bash or zsh completion script made from Verbs:
// the commands, their subcommands, and PROXY names from a running daemon
// (proxy-status's NAME column) where a proxy is expected.
func completionCmd(e *Env, args []string) int {
	if len(args) != 1 || (args[0] != "bash" && args[0] != "zsh") {
		fmt.Fprintln(e.Stderr, "usage: baremeshctl completion bash|zsh\n  bash: source <(baremeshctl completion bash)\n  zsh:  baremeshctl completion zsh > \"${fpath[1]}/_baremeshctl\"")
		if len(args) == 1 && isHelp(args[0]) {
			return 0
		}
		return 2
	}
	var cases strings.Builder
	for _, v := range Verbs {
		if len(v.Subs) > 0 {
			fmt.Fprintf(&cases, "    %s) subs=%q ;;\n", v.Name, strings.Join(v.Subs, " "))
		}
	}
	fmt.Fprintf(e.Stdout, bashScript, strings.Join(names(), " "), cases.String())
	if args[0] == "zsh" {
		fmt.Fprint(e.Stdout, zshTail)
		return 0
	}
	fmt.Fprintln(e.Stdout, "complete -F _baremeshctl baremeshctl")
	return 0
}

// bashScript completes the verb, then the verb's subcommand, then proxy
// names for proxy-status and proxy-config. zsh runs it through bashcompinit.
const bashScript = `# baremeshctl completion (bash; zsh loads it through bashcompinit)
_baremeshctl() {
  local cur=${COMP_WORDS[COMP_CWORD]} verb=${COMP_WORDS[1]} subs=""
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "%s --daemon --help --version" -- "$cur")); return
  fi
  case "$verb" in
%s  esac
  if [ -n "$subs" ] && [ "$COMP_CWORD" -eq 2 ]; then
    COMPREPLY=($(compgen -W "$subs" -- "$cur")); return
  fi
  case "$verb" in
    proxy-status|proxy-config)
      COMPREPLY=($(compgen -W "$(baremeshctl proxy-status 2>/dev/null | awk 'NR>1 && NF {print $1}')" -- "$cur")) ;;
    analyze|validate)
      COMPREPLY=($(compgen -d -- "$cur")) ;;
  esac
}
`

const zshTail = `if [ -n "$ZSH_VERSION" ]; then
  autoload -U +X bashcompinit && bashcompinit
fi
complete -F _baremeshctl baremeshctl
`
