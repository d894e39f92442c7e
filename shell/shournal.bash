# shournal integration for bash (>= 5.0).  In ~/.bashrc:
#     source @SHELL_DIR@/shournal.bash
#     SHOURNAL_ENABLE
# Everything here is cheap and silent on success; a broken recorder prints
# one line and the shell goes on.  No fork happens on the per-command path
# except bash's own `$(:)` in PS0, which starts the command line.
# shellcheck disable=SC2034  # variables are read by the preload library

[ -n "${BASH_VERSION-}" ] || return 0

_SHOURNAL_LIB=${SHOURNAL_PRELOAD_LIB:-@PRELOAD_LIB@}
_SHOURNAL_MAGIC='_///shournal///_'

# Talk to the preload library: opening a magic path is handled in-process.
_shournal_trigger() {
    _shournal_resp=
    { IFS= read -r -d '' _shournal_resp < "$_SHOURNAL_MAGIC/$1"; } 2>/dev/null
    # first line: the answer; further lines: warnings for the user
    if [[ $_shournal_resp == *$'\n'?* ]]; then
        printf '%s' "${_shournal_resp#*$'\n'}" >&2
    fi
    _shournal_resp=${_shournal_resp%%$'\n'*}
    [[ $_shournal_resp == ok* ]]
}

_shournal_fix_histcontrol() {
    # ignorespace would hide the command text from us; emulate it instead
    # (space-prefixed commands are then neither in history nor journaled).
    if [[ ${HISTCONTROL-} == *ignorespace* || ${HISTCONTROL-} == *ignoreboth* ]]; then
        _SHOURNAL_IGNORESPACE=1
        HISTCONTROL=${HISTCONTROL//ignoreboth/ignoredups}
        HISTCONTROL=${HISTCONTROL//ignorespace/}
    fi
}

_shournal_postexec() {
    local _shournal_ret=$? _shournal_flags=
    _shournal_fix_histcontrol
    (( _SHOURNAL_IGNORESPACE )) && _shournal_flags=/s
    HISTTIMEFORMAT= builtin history 1 >| "$_SHOURNAL_MAGIC/text-history" 2>/dev/null
    _shournal_trigger "cleanup/$_shournal_ret$_shournal_flags"
    if [[ $_shournal_resp == "ok dropped" ]]; then
        builtin history -d -1 2>/dev/null
    fi
    return $_shournal_ret
}

_shournal_ps0='${_SHOURNAL_SEQ:((_SHOURNAL_SEQ+=1)):0}$(:)'

SHOURNAL_ENABLE() {
    [[ $- == *i* ]] || { echo "shournal: SHOURNAL_ENABLE is for interactive shells; use 'shournal run' in scripts" >&2; return 1; }
    if (( BASH_SUBSHELL )); then
        echo "shournal: SHOURNAL_ENABLE refused in a subshell" >&2
        return 1
    fi
    if ! _shournal_trigger status; then
        # The library must be preloaded when the shell starts: re-exec once.
        if [[ -n ${_SHOURNAL_REEXEC-} ]]; then
            unset _SHOURNAL_REEXEC
            echo "shournal: could not preload $_SHOURNAL_LIB; not recording (see: shournal doctor)" >&2
            return 1
        fi
        if [[ ! -r $_SHOURNAL_LIB ]]; then
            echo "shournal: $_SHOURNAL_LIB is missing; not recording (see: shournal doctor)" >&2
            return 1
        fi
        local -a _shournal_argv
        mapfile -d '' -t _shournal_argv < /proc/$$/cmdline || return 1
        export _SHOURNAL_REEXEC=1
        LD_PRELOAD=$_SHOURNAL_LIB${LD_PRELOAD:+:$LD_PRELOAD} \
            exec -a "${_shournal_argv[0]}" "$BASH" "${_shournal_argv[@]:1}"
        unset _SHOURNAL_REEXEC
        echo "shournal: re-exec failed; not recording" >&2
        return 1
    fi
    unset _SHOURNAL_REEXEC
    # Our children must not load the library.
    local _p _keep=
    local IFS=:
    for _p in ${LD_PRELOAD-}; do
        [[ $_p == "$_SHOURNAL_LIB" || $_p == */libshournal_preload.so ]] || _keep+=${_keep:+:}$_p
    done
    unset IFS
    if [[ -n $_keep ]]; then export LD_PRELOAD=$_keep; else unset LD_PRELOAD; fi

    export _SHOURNAL_SEQ=${_SHOURNAL_SEQ:-0}
    if ! _shournal_trigger enable; then
        echo "shournal: enable failed: ${_shournal_resp:-no answer}" >&2
        return 1
    fi
    export SHOURNAL_SESSION_ID=${_shournal_resp#ok }
    _SHOURNAL_IGNORESPACE=0
    _shournal_fix_histcontrol
    set -o history
    if [[ ${PS0-} != *"$_shournal_ps0"* ]]; then
        PS0=${PS0-}$_shournal_ps0
    fi
    if [[ "$(declare -p PROMPT_COMMAND 2>/dev/null)" == "declare -a"* ]]; then
        [[ " ${PROMPT_COMMAND[*]} " == *" _shournal_postexec "* ]] ||
            PROMPT_COMMAND=(_shournal_postexec "${PROMPT_COMMAND[@]}")
    elif [[ ${PROMPT_COMMAND-} != *_shournal_postexec* ]]; then
        PROMPT_COMMAND="_shournal_postexec${PROMPT_COMMAND:+;$PROMPT_COMMAND}"
    fi
    return 0
}

SHOURNAL_DISABLE() {
    if (( BASH_SUBSHELL )); then
        echo "shournal: SHOURNAL_DISABLE refused in a subshell" >&2
        return 1
    fi
    _shournal_trigger disable
    PS0=${PS0//"$_shournal_ps0"/}
    if [[ "$(declare -p PROMPT_COMMAND 2>/dev/null)" == "declare -a"* ]]; then
        local -a _pc=() ; local _e
        for _e in "${PROMPT_COMMAND[@]}"; do [[ $_e == _shournal_postexec ]] || _pc+=("$_e"); done
        PROMPT_COMMAND=("${_pc[@]}")
    else
        PROMPT_COMMAND=${PROMPT_COMMAND//_shournal_postexec;/}
        PROMPT_COMMAND=${PROMPT_COMMAND//_shournal_postexec/}
    fi
    unset SHOURNAL_SESSION_ID
    return 0
}
