# bash completion for gpusel
_gpusel() {
  local cur prev words cword
  _init_completion 2>/dev/null || { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; }
  local commands="list resolve bind run bench sim"
  case "$prev" in
    --sim)
      COMPREPLY=($(compgen -W "$(gpusel sim list 2>/dev/null | awk '{print $1}')" -f -- "$cur")); return ;;
    --tests)
      COMPREPLY=($(compgen -W "h2d d2h d2d h2d-pageable d2h-pageable bidir" -- "$cur")); return ;;
    --bind-cpu)
      COMPREPLY=($(compgen -W "none node exclusive" -- "$cur")); return ;;
    bench) COMPREPLY=($(compgen -W "bw" -- "$cur")); return ;;
    sim) COMPREPLY=($(compgen -W "list env" -- "$cur")); return ;;
    env) COMPREPLY=($(compgen -W "$(gpusel sim list 2>/dev/null | awk '{print $1}')" -- "$cur")); return ;;
  esac
  local sub="" w
  for w in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
    case "$w" in list|resolve|bind|run|bench|sim) sub=$w; break ;; esac
  done
  case "$sub" in
    "") COMPREPLY=($(compgen -W "$commands --sim --help --version" -- "$cur")) ;;
    list) COMPREPLY=($(compgen -W "--json --probe --help" -- "$cur")) ;;
    resolve) COMPREPLY=($(compgen -W "--gpu --json --help" -- "$cur")) ;;
    bind) COMPREPLY=($(compgen -W "--gpu --json --help" -- "$cur")) ;;
    run) COMPREPLY=($(compgen -W "--gpu --tag-output --grace --bind-cpu --help" -- "$cur")) ;;
    bench) COMPREPLY=($(compgen -W "--gpu --tests --size --copies --samples --parallel --json --help" -- "$cur")) ;;
  esac
}
complete -F _gpusel gpusel
