/* Prints the journal key of its environment as native/shournal_forward.h
 * computes it (tests/unit/test_journal_key.py compares it with Python's). */
#include <stdio.h>

#include "shournal_forward.h"

int main(void)
{
    char key[SHOURNAL_KEY_LEN + 1];

    shournal_journal_key(key);
    return puts(key) < 0;
}
