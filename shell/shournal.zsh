# shournal integration for zsh (>= 5.7).  In ~/.zshrc:
#     source @SHELL_DIR@/shournal.zsh
#     SHOURNAL_ENABLE
# Cheap and silent on success; a broken recorder prints one line and the
# shell goes on.  The hooks fork nothing.

[[ -n ${ZSH_VERSION-} ]] || return 0

typeset -g _SHOURNAL_LIB=${SHOURNAL_PRELOAD_LIB:-@PRELOAD_LIB@}
typeset -g _SHOURNAL_MAGIC='_///shournal///_'
typeset -g _shournal_resp= _shournal_cmd= _shournal_ran=

# Every hook here starts with `emulate -L zsh`: the user's errexit,
# err_return, nounset, pipefail (and ksh_arrays, sh_word_split, ...) are
# not for this code.  No command here may end non-zero outside `&&`/`||`
# either: that would run the user's TRAPZERR.  The hooks return 0; zsh
# hands each hook the command line's $? whatever the hooks before it did
# (it restores $? after each one), so the order of precmd_functions does
# not matter for the status.
_shournal_trigger() {
    # (its callers, below, did `emulate -L zsh`)
    _shournal_resp=
    # read returns 1 at the end of the answer
    { IFS= read -r -d '' _shournal_resp < "$_SHOURNAL_MAGIC/$1" } 2>/dev/null || :
    # first line: the answer; further lines: warnings for the user
    if [[ $_shournal_resp == *$'\n'?* ]]; then
        printf '%s' "${_shournal_resp#*$'\n'}" >&2
    fi
    _shournal_resp=${_shournal_resp%%$'\n'*}
    [[ $_shournal_resp == ok* ]]
}

_shournal_preexec() {
    emulate -L zsh
    # $1 is the line as typed, even when history discards it.
    _shournal_cmd=$1
    _shournal_ran=
    # The text goes to the line's recorder as soon as the line has its
    # namespace (the library sends it in `prepare`), so that a line whose
    # end no prompt reports (`exec zsh`, the terminal closed) is stored.
    [[ -o histignorespace && $1 == ' '* ]] ||
        print -rn -- "$1" >| "$_SHOURNAL_MAGIC/text-raw" 2>/dev/null || :
    _shournal_trigger prepare || :
    # Not reached when Ctrl-C comes during the set-up: zsh then drops the
    # line unrun and leaves $? at the previous line's status.
    _shournal_ran=1
    return 0
}

_shournal_precmd() {
    local _shournal_ret=$? _shournal_flags=
    emulate -L zsh
    # interrupted before it could run: stored as bash stores such a line
    [[ -n $_shournal_cmd && -z $_shournal_ran ]] && _shournal_ret=130
    [[ -o histignorespace ]] && _shournal_flags=/s
    print -rn -- "$_shournal_cmd" >| "$_SHOURNAL_MAGIC/text-raw" 2>/dev/null || :
    _shournal_trigger "cleanup/$_shournal_ret$_shournal_flags" || :
    _shournal_cmd=
    # First again for the next prompt: hooks put in front of ours ran while
    # the command line was still open (their programs and files would be
    # the command's).
    [[ ${precmd_functions[1]-} == _shournal_precmd ]] ||
        precmd_functions=(_shournal_precmd ${precmd_functions:#_shournal_precmd})
    return 0
}

SHOURNAL_ENABLE() {
    emulate -L zsh
    [[ -o interactive ]] || { print -u2 "shournal: SHOURNAL_ENABLE is for interactive shells; use 'shournal run' in scripts"; return 1 }
    if [[ $ZSH_SUBSHELL -gt 0 ]]; then
        print -u2 "shournal: SHOURNAL_ENABLE refused in a subshell"
        return 1
    fi
    # Which shell a listener records for (`shournal apparatus on`).
    export _SHOURNAL_SHELL_PID=$$
    if ! _shournal_trigger status; then
        # The library must be preloaded when the shell starts: re-exec once.
        if [[ -n ${_SHOURNAL_REEXEC-} ]]; then
            unset _SHOURNAL_REEXEC
            print -u2 "shournal: could not preload $_SHOURNAL_LIB; not recording (see: shournal doctor)"
            return 1
        fi
        if [[ ! -r $_SHOURNAL_LIB ]]; then
            print -u2 "shournal: $_SHOURNAL_LIB is missing; not recording (see: shournal doctor)"
            return 1
        fi
        local -a _shournal_argv
        _shournal_argv=("${(@0)$(</proc/$$/cmdline)}")
        [[ -z ${_shournal_argv[-1]} ]] && _shournal_argv[-1]=()
        export _SHOURNAL_REEXEC=1
        LD_PRELOAD=$_SHOURNAL_LIB${LD_PRELOAD:+:$LD_PRELOAD} \
            exec -a "${_shournal_argv[1]}" /proc/$$/exe "${(@)_shournal_argv[2,-1]}"
        unset _SHOURNAL_REEXEC
        print -u2 "shournal: re-exec failed; not recording"
        return 1
    fi
    if [[ -n ${_SHOURNAL_REEXEC-} ]]; then
        # restarted by the exec above: the rc lines before this call ran
        # twice; `shournal doctor` reports them (see shournal.bash)
        local _at=${funcfiletrace[1]-} _l _count=0 _n
        local -a _lines
        _n=${_at##*:}
        [[ $_n == <-> ]] || _n=0
        if [[ -n ${_at%:*} && -r ${_at%:*} ]] && (( _n > 1 )); then
            _lines=("${(@f)$(<${_at%:*})}")
            for _l in "${(@)_lines[1,_n-1]}"; do
                _l=${_l#"${_l%%[^[:space:]]*}"}
                [[ -z $_l || $_l == '#'* || $_l == *shournal.zsh* ]] || (( _count += 1 ))
            done
        fi
        export _SHOURNAL_RESTARTED="$_count:$_n:${_at%:*}"
    else
        unset _SHOURNAL_RESTARTED
    fi
    unset _SHOURNAL_REEXEC
    # Our children must not load the library.
    local -a _keep
    _keep=(${(s.:.)LD_PRELOAD})
    _keep=(${_keep:#*/libshournal_preload.so})
    _keep=(${_keep:#$_SHOURNAL_LIB})
    if (( ${#_keep} )); then export LD_PRELOAD=${(j.:.)_keep}; else unset LD_PRELOAD; fi

    if ! _shournal_trigger enable; then
        print -u2 "shournal: enable failed: ${_shournal_resp:-no answer}"
        return 1
    fi
    export SHOURNAL_SESSION_ID=${_shournal_resp#ok }
    autoload -Uz add-zsh-hook
    add-zsh-hook preexec _shournal_preexec
    # first: see _shournal_precmd (zsh hands every hook the same $?)
    precmd_functions=(_shournal_precmd ${precmd_functions:#_shournal_precmd})
    return 0
}

SHOURNAL_DISABLE() {
    emulate -L zsh
    if [[ $ZSH_SUBSHELL -gt 0 ]]; then
        print -u2 "shournal: SHOURNAL_DISABLE refused in a subshell"
        return 1
    fi
    _shournal_trigger disable || :
    autoload -Uz add-zsh-hook
    add-zsh-hook -d preexec _shournal_preexec
    add-zsh-hook -d precmd _shournal_precmd
    unset SHOURNAL_SESSION_ID
    return 0
}

# `shournal apparatus on|off|status`: this shell's next command lines are
# recorded with their apparatus (or no longer).  The CLI needs the shell's
# pid, which only the shell knows; everything else goes to the program.
shournal() {
    if [[ ${1-} == apparatus ]]; then
        shift
        command shournal apparatus --shell-pid "$$" "$@"
    else
        command shournal "$@"
    fi
}

# `shournal search` on a key (`shournal init zsh --ctrl-r` prints
# `SHOURNAL_BIND_SEARCH '^R'`): the search starts with the line typed so
# far; Enter puts the chosen command on the prompt, Esc leaves it as it was.
# The search draws on /dev/tty; only the chosen command reaches stdout.
_shournal_search_widget() {
    local chosen
    chosen=$(command shournal search --query "$BUFFER" </dev/tty)
    if (( $? == 0 )); then
        BUFFER=$chosen
        CURSOR=${#BUFFER}
    fi
    zle reset-prompt
}

SHOURNAL_BIND_SEARCH() {
    [[ -o interactive ]] || return 0  # no line editor to bind in
    zle -N _shournal_search_widget
    bindkey "${1:-^R}" _shournal_search_widget
}
