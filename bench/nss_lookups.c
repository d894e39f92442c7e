/* The user and group lookups shournal-suid's setup makes for every command
 * line (native/shournal_suid.c: shournal_gid, user_in_group), in a process
 * of their own, so that bench/nss_group_check.py can price them: with an
 * argument it makes them, without it only starts and exits.
 *
 * Built by bench/nss_group_check.py:  cc -O2 -Wl,-z,now -o nss_lookups nss_lookups.c
 */
#define _GNU_SOURCE
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    struct passwd pw, *pwr = NULL;
    struct group gr, *grr = NULL;
    char buf[16384];
    gid_t list[256];
    int n = 256;

    if (argc < 2)
        return 0;
    if (getgrnam_r(argv[1], &gr, buf, sizeof buf, &grr) != 0)
        return 2;
    if (getpwuid_r(getuid(), &pw, buf, sizeof buf, &pwr) != 0 || pwr == NULL)
        return 3;
    if (getgrouplist(pw.pw_name, pw.pw_gid, list, &n) < 0)
        return 4;
    /* the group's member list, by its gid */
    if (getgrgid_r(gr.gr_gid, &gr, buf, sizeof buf, &grr) != 0)
        return 5;
    return 0;
}
