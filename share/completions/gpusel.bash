# bash completion for gpusel
#
# Completes commands and options, GPUs after --gpu (nvidia-smi indices and UUIDs from
# `gpusel list --json`, on the --sim machine when one is given), test names after --tests, machines
# after --sim, and the program after `--` (or after run's/sim exec's first word). --sim is offered
# wherever gpusel reads it: before `--` and before the program.

# The GPUs of the machine gpusel sees: indices, then UUIDs (MIG devices are not --gpu values).
_gpusel_gpus() {
  local json
  json=$("$1" ${2:+--sim "$2"} list --json 2>/dev/null) || return
  sed -n -e 's/^ *"index": *\([0-9][0-9]*\),*$/\1/p' <<<"$json"
  sed -n -e 's/^ *"uuid": *"\(GPU-[^"]*\)",*$/\1/p' <<<"$json"
}

# Completes the last item of a comma-separated list in $cur from the words in $1.
_gpusel_list_item() {
  local head="" item=$cur
  if [[ $cur == *,* ]]; then
    head=${cur%,*},
    item=${cur##*,}
  fi
  local IFS=$'\n'
  COMPREPLY=($(compgen -P "$head" -W "$1" -- "$item"))
  compopt -o nospace 2>/dev/null
}

_gpusel() {
  local cur prev words cword
  if declare -F _init_completion >/dev/null; then
    _init_completion -n =: || return
  else
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD - 1]}
  fi
  local gpusel=${words[0]}
  [[ $gpusel == */* || -n $(type -P "$gpusel") ]] || gpusel=gpusel

  # What the words before the cursor say: the command path, --sim, and where the program starts.
  local sub="" sub2="" sim="" program=-1 positionals=0 i w
  for ((i = 1; i < cword; i++)); do
    w=${words[i]}
    if [[ $w == -- ]]; then
      program=$((i + 1))
      break
    fi
    case "$w" in
      --sim) sim=${words[i + 1]}; ((i++)); continue ;;
      --sim=*) sim=${w#--sim=}; continue ;;
      --gpu|--tests|--size|--copies|--samples|--grace|--bind-cpu|--set-visible|--format|--min-free-memory|--max-utilization)
        ((i++)); continue ;;
      -*) continue ;;
    esac
    if [[ -z $sub ]]; then
      sub=$w
    elif [[ ($sub == sim || $sub == bench) && -z $sub2 ]]; then
      sub2=$w
    elif [[ $sub == run || ($sub == sim && $sub2 == exec && positionals -ge 1) ]]; then
      program=$i  # the program's first word: from here on everything is the program's
      break
    else
      ((positionals++))
    fi
  done

  if ((program >= 0)); then
    if ((cword == program)); then
      COMPREPLY=($(compgen -c -- "$cur"))
    else
      COMPREPLY=($(compgen -f -- "$cur"))
    fi
    return
  fi

  case "$prev" in
    --sim)
      COMPREPLY=($(compgen -W "$("$gpusel" sim list 2>/dev/null | awk '{print $1}')" -f -- "$cur")); return ;;
    --gpu)
      local extra=""
      [[ $sub == resolve || $sub == run || $sub2 == bw ]] && extra=$'\nall'
      _gpusel_list_item "$(_gpusel_gpus "$gpusel" "$sim")$extra"
      return ;;
    --tests)
      _gpusel_list_item $'h2d\nd2h\nd2d\nh2d-pageable\nd2h-pageable\nbidir'; return ;;
    --bind-cpu)
      COMPREPLY=($(compgen -W "none node exclusive" -- "$cur")); return ;;
    --set-visible)
      COMPREPLY=($(compgen -W "none own job" -- "$cur")); return ;;
    --format)
      COMPREPLY=($(compgen -W "lines csv env" -- "$cur")); return ;;
    --size|--copies|--samples|--grace|--min-free-memory|--max-utilization)
      return ;;
  esac

  local options=""
  case "$sub" in
    "")
      if [[ -n $sim ]]; then options="list resolve bind run bench sim -- --help"
      else options="list resolve bind run bench sim --sim --help --version"; fi ;;
    list) options="--json --probe --sim --help" ;;
    resolve) options="--gpu --json --format --sim --help" ;;
    bind) options="--gpu --json --sim --help" ;;
    run) options="--gpu --tag-output --grace --bind-cpu --set-visible --sim --help --" ;;
    bench)
      if [[ -z $sub2 ]]; then options="bw --help"
      else options="--gpu --tests --size --copies --samples --parallel --json --sim --help"; fi ;;
    sim)
      case "$sub2" in
        "") options="list env exec --help" ;;
        env|exec)
          if ((positionals == 0)); then
            options=$("$gpusel" sim list 2>/dev/null | awk '{print $1}')
          elif [[ $sub2 == exec ]]; then
            options="--"
          fi ;;
      esac ;;
  esac
  COMPREPLY=($(compgen -W "$options" -- "$cur"))
}
complete -F _gpusel gpusel
