# shournal integration for bash (>= 5.0).  In ~/.bashrc:
#     source @SHELL_DIR@/shournal.bash
#     SHOURNAL_ENABLE
# Everything here is cheap and silent on success; a broken recorder prints
# one line and the shell goes on.  No fork happens on the per-command path
# (see _shournal_ps0), except with bash < 5.1 or the emulated HISTIGNORE.
# shellcheck disable=SC2034  # variables are read by the preload library

[ -n "${BASH_VERSION-}" ] || return 0

_SHOURNAL_LIB=${SHOURNAL_PRELOAD_LIB:-@PRELOAD_LIB@}
_SHOURNAL_MAGIC='_///shournal///_'

# Talk to the preload library: opening a magic path is handled in-process.
_shournal_trigger() {
    _shournal_resp=
    # read returns 1 at the end of the answer: never a failure (set -e)
    { IFS= read -r -d '' _shournal_resp < "$_SHOURNAL_MAGIC/$1"; } 2>/dev/null || :
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
    # The library turns off only bash's parsed flag, at each prompt's
    # cleanup (hold_ignorespace): HISTCONTROL keeps the user's value.  A
    # bash that does not export the flag gets the value rewritten instead.
    if [[ ${HISTCONTROL-} == *ignorespace* || ${HISTCONTROL-} == *ignoreboth* ]]; then
        _SHOURNAL_IGNORESPACE=1
        (( ${_SHOURNAL_HC_HELD:-0} )) && return 0
        HISTCONTROL=${HISTCONTROL//ignoreboth/ignoredups}
        HISTCONTROL=${HISTCONTROL//ignorespace/}
    elif (( ${_SHOURNAL_HC_HELD:-0} )); then
        _SHOURNAL_IGNORESPACE=0
    fi
}

# HISTIGNORE is emulated as well: a line bash does not add to history would
# be journaled with the text of the previous entry.  We hold the user's
# patterns and leave a marker in HISTIGNORE that no command line matches, so
# bash adds every line; we apply the patterns after the command and delete a
# matching line from history again.  A new value (also "$marker:more", as
# from HISTIGNORE+=:more) is taken over at the next prompt.
_SHOURNAL_HISTIGNORE_MARK='#shournal-emulates-HISTIGNORE#'
: "${_SHOURNAL_HISTIGNORE=}" "${_SHOURNAL_SEQ_SEEN=}"
[[ -v _SHOURNAL_HISTIGNORE_PATS ]] || _SHOURNAL_HISTIGNORE_PATS=()

_shournal_fix_histignore() {
    [[ ${HISTIGNORE-} == "$_SHOURNAL_HISTIGNORE_MARK" ]] && return 0
    local v=${HISTIGNORE-}
    v=${v//"$_SHOURNAL_HISTIGNORE_MARK"/"$_SHOURNAL_HISTIGNORE"}
    _SHOURNAL_HISTIGNORE=$v
    _shournal_split_histignore "$v"
    [[ -n $v ]] && HISTIGNORE=$_SHOURNAL_HISTIGNORE_MARK
    return 0
}

# Split like bash: ':' separates patterns except after '\', within quotes,
# a bracket expression ("[[:space:]]") or an extglob group ("@(a:b)").
_shournal_split_histignore() {
    local s=$1 p= c q= j k depth=0 i=0 n=${#1}
    _SHOURNAL_HISTIGNORE_PATS=()
    while (( i < n )); do
        c=${s:i:1}
        if [[ -n $q ]]; then
            if [[ $c == \\ && $q == \" ]]; then p+=${s:i:2}; (( i += 2 )); continue; fi
            [[ $c == "$q" ]] && q=
            p+=$c; (( i += 1 )); continue
        fi
        case $c in
        \\) p+=${s:i:2}; (( i += 2 )); continue ;;
        \'|\") q=$c ;;
        '[')
            j=$(( i + 1 ))
            [[ ${s:j:1} == '!' || ${s:j:1} == '^' ]] && (( j += 1 ))
            [[ ${s:j:1} == ']' ]] && (( j += 1 ))
            while (( j < n )) && [[ ${s:j:1} != ']' ]]; do
                if [[ ${s:j:2} == '['[:.=] ]]; then
                    k=${s:j+2}; k=${k%%"${s:j+1:1}]"*}
                    if [[ $k != "${s:j+2}" ]]; then (( j += ${#k} + 4 )); continue; fi
                fi
                (( j += 1 ))
            done
            if (( j < n )); then p+=${s:i:j-i+1}; i=$(( j + 1 )); continue; fi ;;
        '(') [[ $depth != 0 || $p == *[?*+@!] ]] && (( depth += 1 )) ;;
        ')') (( depth > 0 )) && (( depth -= 1 )) ;;
        :)
            if (( depth == 0 )); then
                [[ -n $p ]] && _SHOURNAL_HISTIGNORE_PATS+=("$p")
                p=; (( i += 1 )); continue
            fi ;;
        esac
        p+=$c; (( i += 1 ))
    done
    [[ -n $p ]] && _SHOURNAL_HISTIGNORE_PATS+=("$p")
    return 0
}

# "%5d%c %s\n" of `history 1` -> the entry's text
_shournal_histtext() {
    local s=$1 num
    s=${s#"${s%%[! ]*}"}
    num=${s%%[!0-9]*}
    s=${s#"$num"}
    s=${s:2}
    while [[ $s == *$'\n' ]]; do s=${s%$'\n'}; done
    _shournal_txt=$s
}

# Does line $1 match the held patterns?  $2: the previous history line for
# '&' ($3 = 0: there is none).  Like bash, extglob follows `shopt extglob`
# and case is never ignored.
_shournal_histignore_match() {
    local line=$1 prev=$2 pat qprev= c i ret=1 nocase=0
    if (( $3 )); then
        for (( i = 0; i < ${#prev}; i++ )); do
            c=${prev:i:1}
            [[ $c == [[:alnum:]] ]] || qprev+=\\
            qprev+=$c
        done
    fi
    shopt -q nocasematch && { nocase=1; shopt -u nocasematch; }
    for pat in "${_SHOURNAL_HISTIGNORE_PATS[@]}"; do
        if (( $3 )) && [[ $pat == *'&'* ]]; then
            local p=$pat
            pat=
            for (( i = 0; i < ${#p}; i++ )); do
                c=${p:i:1}
                if [[ $c == \\ ]]; then pat+=${p:i:2}; (( i += 1 ))
                elif [[ $c == '&' ]]; then pat+=$qprev
                else pat+=$c; fi
            done
        fi
        case $line in $pat) ret=0; break ;; esac
    done
    (( nocase )) && shopt -s nocasematch
    return $ret
}

# After a command line: was a new history entry added that matches
# HISTIGNORE?  Then delete it and return 0.  Reads history without a fork,
# through a memory file the preload library hands out (text-raw, rewritten
# by the caller).  _SHOURNAL_HIST_SEEN is `history 1` as we left it, so a
# line that ignoredups did not add is not taken for a new one.
_shournal_histignore_check() {
    local fd last= two= new=0
    _shournal_hprev=
    { exec {fd}>| "$_SHOURNAL_MAGIC/text-raw"; } 2>/dev/null || return 1
    { HISTTIMEFORMAT= builtin history 1; printf '\0'; HISTTIMEFORMAT= builtin history 2; } >&"$fd"
    { IFS= read -r -d '' last; IFS= read -r -d '' two; } < "/proc/self/fd/$fd" 2>/dev/null
    exec {fd}>&-
    _shournal_hprev=${two%"$last"}
    if [[ -v _SHOURNAL_HIST_SEEN ]]; then
        [[ $last != "$_SHOURNAL_HIST_SEEN" ]] && new=1
    else
        [[ $_SHOURNAL_SEQ != "$_SHOURNAL_SEQ_SEEN" ]] && new=1
    fi
    _SHOURNAL_HIST_SEEN=$last
    (( new && ${#_SHOURNAL_HISTIGNORE_PATS[@]} )) && [[ -n $last ]] || return 1
    # bash tests only the first line of a multi-line command
    _shournal_histtext "$last"
    local text=${_shournal_txt%%$'\n'*}
    _shournal_histtext "$_shournal_hprev"
    _shournal_histignore_match "$text" "$_shournal_txt" "$(( ${#_shournal_hprev} > 0 ))" || return 1
    builtin history -d -1 2>/dev/null
    _SHOURNAL_HIST_SEEN=$_shournal_hprev
    return 0
}

# The hook's entry in PROMPT_COMMAND.  Behind `&&` bash neither exits on
# errexit nor runs the user's ERR trap for anything the hook's body does (its
# rule for the left side of && reaches into functions), and the list's
# status is the hook's: the command's own $?, handed on to later hooks.
_SHOURNAL_PC='_shournal_postexec && :'
_SHOURNAL_BP='__bp_precmd_invoke_cmd'

# Only the first command of PROMPT_COMMAND sees the command line's $? (from
# bash 5.1 on, the first command of each element of a PROMPT_COMMAND array:
# bash hands every element the same $?): a hook put in front of ours later
# (starship, direnv, a prompt framework, rc lines below ours) runs commands
# of its own first.  Nothing that runs earlier in bash can be hooked without
# a fork or owning the DEBUG trap (which bash-preexec and starship own), so
# the hook checks its place at every prompt: where its $? is not the
# command's, the status is stored as unknown.  And it keeps itself at the
# front, so that other hooks run after the command line has ended (their
# programs and files are not the command's).  bash-preexec's prologue may
# stay in front: it hands the status on (__bp_set_ret_value) and re-asserts
# its own first place at each prompt.
# Returns 0 if $? is the command's; _shournal_pc_at_front=1 if first.
_shournal_pc_check() {
    local s=${PROMPT_COMMAND-} e
    _shournal_pc_at_front=0
    if [[ $s == "$_SHOURNAL_BP"* ]]; then
        s=${s#"$_SHOURNAL_BP"}
        s=${s#' "$_"'}
        s=${s#[$'\n;']}
        [[ -z $s && ${PROMPT_COMMAND@a} == *a* ]] && s=${PROMPT_COMMAND[1]-}
    fi
    if [[ $s == "$_SHOURNAL_PC" || $s == "$_SHOURNAL_PC"[$'\n;']* ]]; then
        _shournal_pc_at_front=1
        return 0
    fi
    if [[ ${PROMPT_COMMAND@a} == *a* ]] && (( BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] >= 501 )); then
        for e in "${PROMPT_COMMAND[@]:1}"; do
            [[ $e == "$_SHOURNAL_PC" || $e == "$_SHOURNAL_PC"[$'\n;']* ]] && return 0
        done
    fi
    return 1
}

# $1 without our entry -> _shournal_pcs
_shournal_pc_strip() {
    local s=$1
    s=${s//"$_SHOURNAL_PC;"/}
    s=${s//"$_SHOURNAL_PC"$'\n'/}
    s=${s//"$_SHOURNAL_PC"/}
    _shournal_pcs=$s
}

# Take our entry out of PROMPT_COMMAND, keeping it a string or an array.
_shournal_pc_remove() {
    local _shournal_pcs _e
    if [[ ${PROMPT_COMMAND@a} == *a* ]]; then
        local -a _pc=()
        for _e in "${PROMPT_COMMAND[@]}"; do
            _shournal_pc_strip "$_e"
            [[ -z $_shournal_pcs ]] || _pc+=("$_shournal_pcs")
        done
        PROMPT_COMMAND=("${_pc[@]}")
    else
        _shournal_pc_strip "${PROMPT_COMMAND-}"
        PROMPT_COMMAND=$_shournal_pcs
    fi
}

# Put our entry first (once), keeping PROMPT_COMMAND a string or an array.
# (An array emptied by the removal is unbound for ${PROMPT_COMMAND@a}.)
_shournal_pc_front() {
    if [[ ${PROMPT_COMMAND@a} == *a* ]]; then
        _shournal_pc_remove
        PROMPT_COMMAND=("$_SHOURNAL_PC" "${PROMPT_COMMAND[@]}")
    else
        _shournal_pc_remove
        PROMPT_COMMAND=$_SHOURNAL_PC${PROMPT_COMMAND:+;$PROMPT_COMMAND}
    fi
}

_shournal_postexec() {
    local _shournal_ret=$? _shournal_flags=/ _shournal_hi=0 _shournal_ignored=0 \
        _shournal_pc_at_front
    # errexit and the ERR trap are kept off by the `&&` of _SHOURNAL_PC; the
    # code here runs under set -u (every variable is set or has a default)
    # and has no pipelines (pipefail): tests/system/test_shell_robustness.py.
    # The usual case first, cheaply (no call, no glob: bash matches globs
    # in wide characters): our entry starts PROMPT_COMMAND.
    if [[ ${PROMPT_COMMAND:0:${#_SHOURNAL_PC}} != "$_SHOURNAL_PC" ]]; then
        _shournal_pc_check || _shournal_flags+=u
        (( _shournal_pc_at_front )) || _shournal_pc_front
    fi
    _shournal_fix_histcontrol
    (( _SHOURNAL_IGNORESPACE )) && _shournal_flags+=s
    # the patterns in force when the line was read, then any new ones
    if (( ${#_SHOURNAL_HISTIGNORE_PATS[@]} )) ||
        [[ ${HISTIGNORE:-$_SHOURNAL_HISTIGNORE_MARK} != "$_SHOURNAL_HISTIGNORE_MARK" ]]; then
        _shournal_hi=1
        _shournal_histignore_check && _shournal_ignored=1
        _shournal_fix_histignore
    else
        unset _SHOURNAL_HIST_SEEN
    fi
    if (( _shournal_ignored )); then
        # not journaled either: a text the library drops (as ignorespace)
        printf ' ' >| "$_SHOURNAL_MAGIC/text-raw" 2>/dev/null
        _shournal_flags+=s
    elif [[ -v _SHOURNAL_PS0_FORK && -z $_SHOURNAL_PS0_FORK ]]; then
        _shournal_flags+=h  # the library reads bash's history, as PS0 did
    else
        HISTTIMEFORMAT= builtin history 1 >| "$_SHOURNAL_MAGIC/text-history" 2>/dev/null
    fi
    _shournal_trigger "cleanup/$_shournal_ret$_shournal_flags" || :
    if [[ $_shournal_resp == "ok dropped" ]] && (( !_shournal_ignored )); then
        builtin history -d -1 2>/dev/null
        (( _shournal_hi )) && [[ -v _SHOURNAL_HIST_SEEN ]] && _SHOURNAL_HIST_SEEN=$_shournal_hprev
    fi
    _SHOURNAL_SEQ_SEEN=$_SHOURNAL_SEQ
    _shournal_ps0_mode
    return $_shournal_ret
}

# How PS0 starts the next command line (see _shournal_ps0): fork-free,
# unless the emulated HISTIGNORE must decide what is sent (bash code, in
# _shournal_start), the library cannot read bash's history, or SRANDOM lost
# its special meaning (bash < 5.1, unset).
_shournal_ps0_mode() {
    if (( ${_SHOURNAL_PS0_FAST:-0} && ! ${#_SHOURNAL_HISTIGNORE_PATS[@]} )) && [[ -v SRANDOM ]]; then
        _SHOURNAL_PS0_FORK=
    else
        _SHOURNAL_PS0_FORK=1
    fi
}

# SHOURNAL_ENABLE re-executed the shell: the lines of rc file $1 above its
# call (line $2) ran twice.  `shournal doctor` reports them from
# _SHOURNAL_RESTARTED="<lines above, not blank or comments>:<line>:<file>".
# Runs once per shell start, without a fork.
_shournal_note_restart() {
    local f=$1 n=$2 l count=0
    local -a lines=()
    if [[ -n $f && -r $f ]] && (( n > 1 )); then
        mapfile -t -n $(( n - 1 )) lines < "$f" || :
    fi
    for l in "${lines[@]}"; do
        l=${l#"${l%%[![:space:]]*}"}
        [[ -z $l || $l == '#'* || $l == *shournal.bash* ]] || (( count += 1 ))
    done
    export _SHOURNAL_RESTARTED="$count:$n:$f"
}

# Run by PS0 in its command substitution (where _SHOURNAL_PS0_FORK is set):
# a child of the shell, forked once the command line has its namespace (the
# library starts it in fork() when _SHOURNAL_SEQ changed).  It hands the
# line's text to the line's
# recorder before the line runs, so that a line whose end no prompt
# reports (`exec bash`, the terminal closed) is still stored.  Lines kept
# out of history by the emulated HISTIGNORE or ignorespace are not sent.
# What it changes (history, variables) dies with it; it prints nothing.
_shournal_start() {
    local _shournal_flags=
    if (( ${#_SHOURNAL_HISTIGNORE_PATS[@]} )) && _shournal_histignore_check; then
        return 0
    fi
    (( _SHOURNAL_IGNORESPACE )) && _shournal_flags=/s
    # the answer is "ok" and no warning: not read (less work on the path
    # the line waits for)
    HISTTIMEFORMAT= builtin history 1 >| "$_SHOURNAL_MAGIC/text-history" 2>/dev/null &&
        { : < "$_SHOURNAL_MAGIC/start$_shournal_flags"; } 2>/dev/null
    return 0
}

# PS0 bumps _SHOURNAL_SEQ and then either reads $SRANDOM, which bash draws
# with getrandom(): the library starts the command line there and sends its
# text from bash's history, in the shell's process (no fork; see getrandom()
# in native/preload/wrappers.c); or, with _SHOURNAL_PS0_FORK set, forks
# the command substitution, whose fork() starts the line and which sends the
# text (_shournal_start).  The arithmetic's `?:` evaluates only the branch
# taken, and `${X:offset:0}` expands to nothing.  `&& :` as in
# _SHOURNAL_PC: no errexit, no ERR trap for the hook's body.
_shournal_ps0='${_SHOURNAL_SEQ:((_SHOURNAL_SEQ+=1,_SHOURNAL_PS0_FORK?0:SRANDOM&0)):0}${_SHOURNAL_PS0_FORK:+$(_shournal_start && :)}'

SHOURNAL_ENABLE() {
    [[ $- == *i* ]] || { echo "shournal: SHOURNAL_ENABLE is for interactive shells; use 'shournal run' in scripts" >&2; return 1; }
    if (( BASH_SUBSHELL )); then
        echo "shournal: SHOURNAL_ENABLE refused in a subshell" >&2
        return 1
    fi
    # Which shell a listener records for (`shournal apparatus on`).
    export _SHOURNAL_SHELL_PID=$$
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
    if [[ -n ${_SHOURNAL_REEXEC-} ]]; then
        _shournal_note_restart "${BASH_SOURCE[1]-}" "${BASH_LINENO[0]-0}"
    else
        unset _SHOURNAL_RESTARTED
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
    _SHOURNAL_HC_HELD=0
    _shournal_trigger histcontrol && _SHOURNAL_HC_HELD=1
    _shournal_fix_histcontrol
    _shournal_fix_histignore
    _SHOURNAL_PS0_FAST=0
    _shournal_trigger ps0-fast && _SHOURNAL_PS0_FAST=1
    _shournal_ps0_mode
    unset _SHOURNAL_HIST_SEEN
    _SHOURNAL_SEQ_SEEN=$_SHOURNAL_SEQ
    set -o history
    if [[ ${PS0-} != *"$_shournal_ps0"* ]]; then
        PS0=${PS0-}$_shournal_ps0
    fi
    local _shournal_pc_at_front
    _shournal_pc_check || :
    (( _shournal_pc_at_front )) || _shournal_pc_front
    return 0
}

SHOURNAL_DISABLE() {
    if (( BASH_SUBSHELL )); then
        echo "shournal: SHOURNAL_DISABLE refused in a subshell" >&2
        return 1
    fi
    _shournal_trigger disable || :
    PS0=${PS0//"$_shournal_ps0"/}
    _shournal_pc_remove
    # hand back what we emulated
    if (( ${_SHOURNAL_HC_HELD:-0} )); then
        # assigned again, bash parses its own flag back in
        [[ -v HISTCONTROL ]] && HISTCONTROL=$HISTCONTROL
        _SHOURNAL_IGNORESPACE=0
    elif (( _SHOURNAL_IGNORESPACE )); then
        HISTCONTROL=${HISTCONTROL:+$HISTCONTROL:}ignorespace
        _SHOURNAL_IGNORESPACE=0
    fi
    if [[ ${HISTIGNORE-} == "$_SHOURNAL_HISTIGNORE_MARK" ]]; then
        HISTIGNORE=$_SHOURNAL_HISTIGNORE
    fi
    _SHOURNAL_HISTIGNORE=
    _SHOURNAL_HISTIGNORE_PATS=()
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

# `shournal search` on a key (`shournal init bash --ctrl-r` prints
# `SHOURNAL_BIND_SEARCH '\C-r'`): the search starts with the line typed so
# far; Enter puts the chosen command on the prompt, Esc leaves it as it was.
# The search draws on /dev/tty; only the chosen command reaches stdout.
_shournal_search() {
    local chosen
    chosen=$(command shournal search --query "${READLINE_LINE-}") || return 0
    READLINE_LINE=$chosen
    READLINE_POINT=${#chosen}
}

SHOURNAL_BIND_SEARCH() {
    [[ $- == *i* ]] || return 0  # no line editor to bind in
    bind -x "\"${1:-\\C-r}\": _shournal_search"
}
