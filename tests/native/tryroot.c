/* tests/system/test_suid_security.py: run (through the helper) with the user's
 * ids, tries every way back to root; exit 0 only if none worked. */
#define _GNU_SOURCE
#include <grp.h>
#include <stdio.h>
#include <unistd.h>
static int regained;
static void try(const char *what, int rc)
{
    printf("%s %s\n", what, rc == 0 ? "REGAINED" : "refused");
    regained |= rc == 0;
}
int main(void)
{
    uid_t r, e, s;
    gid_t rg, eg, sg;
    try("setuid", setuid(0));
    try("seteuid", seteuid(0));
    try("setreuid", setreuid(0, 0));
    try("setresuid", setresuid(0, 0, 0));
    try("setgid", setgid(0));
    try("setegid", setegid(0));
    try("setresgid", setresgid(0, 0, 0));
    try("setgroups", setgroups(0, NULL));
    getresuid(&r, &e, &s);
    getresgid(&rg, &eg, &sg);
    printf("uid %d %d %d\ngid %d %d %d\n", (int)r, (int)e, (int)s, (int)rg, (int)eg, (int)sg);
    return regained || r == 0 || e == 0 || s == 0 || rg == 0 || eg == 0 || sg == 0;
}
