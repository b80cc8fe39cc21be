/* palaestra-setids [--detach PATH... --] UID PROGRAM [ARG...]: exec PROGRAM as user UID and
 * group UID, with no supplementary groups. What util-linux's `setpriv --reuid=UID --regid=UID
 * --clear-groups` does, without its start-up (locale, NSS and libcap-ng: about 1.5 ms of a local
 * sandbox's cold start). The local backend starts bubblewrap through it as the sandboxes'
 * unprivileged uid (palaestra/sandbox/local/process.py); built statically into the helper's
 * runtime bundle. Fails closed: any id that did not change is an error, and nothing is exec'd.
 *
 * With --detach, first (as root) a mount namespace of its own, a slave of the host's (nothing
 * done in it reaches the host), from which each PATH's mount is detached: the host's mounts
 * the sandbox does not use (palaestra/sandbox/local/mountns.py). bubblewrap copies this
 * namespace and reads its mount table after each of its ~20 mounts, so every host mount left
 * out is work it does not do. It is only an economy: when the namespace cannot be made (not
 * root), nothing is detached and the rest goes on as without it; a PATH that is no longer a
 * mount is passed over. */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

/* Detach the mounts at argv[first...] up to "--" in a namespace of its own; the index after
 * "--", or -1 when there is none. */
static int detach_mounts(int argc, char **argv, int first) {
    int end = first;
    while (end < argc && strcmp(argv[end], "--") != 0)
        end++;
    if (end == argc)
        return -1;
    /* Only once the new namespace is a slave: in a copy that still shares propagation with
     * the host's, an unmount would propagate to the host. */
    if (unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) == 0) {
        for (int i = first; i < end; i++)
            umount2(argv[i], MNT_DETACH | UMOUNT_NOFOLLOW);
    }
    return end + 1;
}

int main(int argc, char **argv) {
    int at = 1;
    if (argc > 1 && strcmp(argv[1], "--detach") == 0)
        at = detach_mounts(argc, argv, 2);
    if (at < 0 || argc - at < 2) {
        fprintf(stderr, "usage: palaestra-setids [--detach PATH... --] UID PROGRAM [ARG...]\n");
        return 127;
    }
    char *end;
    errno = 0;
    unsigned long id = strtoul(argv[at], &end, 10);
    if (errno || *end || end == argv[at] || id > 0xfffffffeUL) {
        fprintf(stderr, "palaestra-setids: %s is not a uid\n", argv[at]);
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
    execvp(argv[at + 1], argv + at + 1);
    fprintf(stderr, "palaestra-setids: cannot run %s: %s\n", argv[at + 1], strerror(errno));
    return 127;
}
