/* bash's own functions and variables, read in the shell's process. */
#include "preload.h"

/* bash's own functions and variables (bash exports its symbols for
 * loadable builtins): its history (readline's API; HIST_ENTRY begins with
 * the line) and its shell variables, read in-process by the fork-free start
 * of a command line (see getrandom() in wrappers.c).  NULL in zsh. */
struct bash_hist_entry {
    char *line;
};
static struct bash_hist_entry *(*bash_history_get)(int);
static int *bash_history_base, *bash_history_length;
static char *(*bash_get_string_value)(const char *);
/* bash's HISTCONTROL as it parsed it (bashhist.c, history_control):
 * HC_IGNSPACE is its bit 0x01.  See hold_ignorespace(). */
static int *bash_history_control;
#define BASH_HC_IGNSPACE 0x01

/* bash resolves the history and variable functions we read in-process
 * (see getrandom() in wrappers.c); 0 if it does not export them. */
int bash_api(void)
{
    if (!bash_history_get) {
        bash_history_get = dlsym(RTLD_DEFAULT, "history_get");
        bash_history_base = dlsym(RTLD_DEFAULT, "history_base");
        bash_history_length = dlsym(RTLD_DEFAULT, "history_length");
        bash_get_string_value = dlsym(RTLD_DEFAULT, "get_string_value");
    }
    return bash_history_get && bash_history_base && bash_history_length &&
           bash_get_string_value;
}

/* Keep bash's own ignorespace off and leave the user's HISTCONTROL as he
 * set it.  bash would not add a space-prefixed line to history, where its
 * text is read, and the previous entry's text would be journaled for it;
 * so bash adds it and the hook drops it from history and journal alike
 * (cleanup's flag s): what the user sees is what he set.  bash parses
 * HISTCONTROL into this flag on each assignment, so this runs at every
 * prompt that drops such lines.  1 if done (this bash exports the flag). */
int hold_ignorespace(void)
{
    if (!bash_api())
        return 0;
    if (!bash_history_control)
        bash_history_control = dlsym(RTLD_DEFAULT, "history_control");
    if (!bash_history_control)
        return 0;
    *bash_history_control &= ~BASH_HC_IGNSPACE;
    return 1;
}

/* A shell variable of bash is set and neither empty nor "0". */
static int bash_flag(const char *name)
{
    const char *v = bash_get_string_value(name);
    return v && v[0] && strcmp(v, "0") != 0;
}

/* bash: the text of its newest history entry -- what `history 1` shows --
 * at most `max` bytes; malloc'd, or NULL. */
char *history_text(size_t max)
{
    struct bash_hist_entry *e;
    char *text;
    size_t n;

    if (!bash_api() || *bash_history_length <= 0)
        return NULL;
    e = bash_history_get(*bash_history_base + *bash_history_length - 1);
    if (e == NULL || e->line == NULL)
        return NULL;
    n = strnlen(e->line, max);
    text = strndup(e->line, n);
    if (text == NULL)
        return NULL;
    while (n > 0 && text[n - 1] == '\n') /* here-documents end in "\n\n" */
        text[--n] = '\0';
    return text;
}

/* bash, fork-free: the line's start from its history entry, which bash
 * added before it expanded PS0 -- what `history 1` in PS0's command
 * substitution (_shournal_start) sends otherwise.  Not when that
 * substitution runs (_SHOURNAL_PS0_FORK: the emulated HISTIGNORE needs
 * it), nor for a space-prefixed line under the emulated ignorespace. */
void send_start_from_history(void)
{
    char *text;

    if (!bash_api() || bash_flag("_SHOURNAL_PS0_FORK"))
        return;
    text = history_text(SHOURNAL_MAX_START_TEXT + 1);
    if (text != NULL && !(text[0] == ' ' && bash_flag("_SHOURNAL_IGNORESPACE")))
        send_start(text);
    free(text);
}
