/* palaestra-setids UID PROGRAM [ARG...]: exec PROGRAM as user UID and group UID, with no
 * supplementary groups. What util-linux's `setpriv --reuid=UID --regid=UID --clear-groups`
 * does, without its start-up (locale, NSS and libcap-ng: about 1.5 ms of a local sandbox's
 * cold start). The local backend starts bubblewrap through it as the sandboxes' unprivileged
 * uid (palaestra/sandbox/local/process.py); built statically into the helper's runtime bundle.
 * Fails closed: any id that did not change is an error, and nothing is exec'd. */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: palaestra-setids UID PROGRAM [ARG...]\n");
        return 127;
    }
    char *end;
    errno = 0;
    unsigned long id = strtoul(argv[1], &end, 10);
    if (errno || *end || end == argv[1] || id > 0xfffffffeUL) {
        fprintf(stderr, "palaestra-setids: %s is not a uid\n", argv[1]);
        return 127;
    }
    uid_t uid = (uid_t)id;
    gid_t gid = (gid_t)id;
    if (setgroups(0, NULL) || setresgid(gid, gid, gid) || setresuid(uid, uid, uid)) {
        fprintf(stderr, "palaestra-setids: cannot become %lu: %s\n", id, strerror(errno));
        return 126;
    }
    uid_t r, e, s;
    gid_t rg, eg, sg;
    if (getresuid(&r, &e, &s) || r != uid || e != uid || s != uid || getresgid(&rg, &eg, &sg)
        || rg != gid || eg != gid || sg != gid || getgroups(0, NULL) != 0) {
        fprintf(stderr, "palaestra-setids: ids did not change to %lu\n", id);
        return 126;
    }
    execvp(argv[2], argv + 2);
    fprintf(stderr, "palaestra-setids: cannot run %s: %s\n", argv[2], strerror(errno));
    return 127;
}
