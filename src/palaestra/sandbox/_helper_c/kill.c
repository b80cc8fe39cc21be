/* Killing a command's processes, and waiting until they are gone: its cgroup when the sandbox
 * has cgroups, else a set of processes and their descendants found in /proc. Both waits reap
 * (the request loop's reap) while they wait. (The Python helper's _helper/kill.py.) */
#include "helper.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define KILL_WAIT_S 5.0

static void pause_ms(void) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

static int cgroup_empty(int track_fd, const char *name) {
    char path[64];
    snprintf(path, sizeof path, "%s/cgroup.procs", name);
    char *procs = read_at(track_fd, path);
    int empty = !procs || strspn(procs, " \n") == strlen(procs);
    free(procs);
    return empty;
}

void kill_cgroup(int track_fd, const char *mode, const char *name) {
    char path[64];
    if (strcmp(mode, "cgroup.kill") == 0) {
        snprintf(path, sizeof path, "%s/cgroup.kill", name);
        write_at(track_fd, path, "1");
    } else {
        int v1 = strcmp(mode, "freezer") == 0;
        char freeze[64], state_file[64];
        snprintf(freeze, sizeof freeze, v1 ? "%s/freezer.state" : "%s/cgroup.freeze", name);
        snprintf(state_file, sizeof state_file, v1 ? "%s/freezer.state" : "%s/cgroup.events",
                 name);
        write_at(track_fd, freeze, v1 ? "FROZEN" : "1");
        for (double deadline = now() + KILL_WAIT_S; now() < deadline; pause_ms()) {
            char *state = read_at(track_fd, state_file);
            int frozen = state && strstr(state, v1 ? "FROZEN" : "frozen 1") != NULL;
            free(state);
            if (frozen) break;
        }
        snprintf(path, sizeof path, "%s/cgroup.procs", name);
        char *procs = read_at(track_fd, path);
        for (char *p = procs; p && *p;) {
            char *end;
            long pid = strtol(p, &end, 10);
            if (end == p) break;
            kill((pid_t)pid, SIGKILL);
            p = end;
        }
        free(procs);
        write_at(track_fd, freeze, v1 ? "THAWED" : "0");
    }
    for (double deadline = now() + KILL_WAIT_S; now() < deadline; pause_ms()) {
        reap();
        if (cgroup_empty(track_fd, name)) return;
    }
}

/* -- processes in /proc ---------------------------------------------------------------------- */

typedef struct {
    pid_t pid, ppid, pgrp, sid;
} ProcInfo;

typedef struct {
    ProcInfo *items;
    size_t n, cap;
} ProcList;

/* Every process of the sandbox that is not dead yet. */
static void processes(ProcList *list) {
    list->n = 0;
    DIR *dir = opendir("/proc");
    if (!dir) return;
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        char *end;
        long pid = strtol(entry->d_name, &end, 10);
        if (*end || end == entry->d_name) continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        char *stat = read_at(AT_FDCWD, path);
        if (!stat) continue;
        /* The command name is in parentheses and may contain anything, ")" included. */
        char *close = strrchr(stat, ')');
        char state;
        long ppid, pgrp, sid;
        if (close && sscanf(close + 1, " %c %ld %ld %ld", &state, &ppid, &pgrp, &sid) == 4 &&
            state != 'Z' && state != 'X') {
            if (list->n == list->cap) {
                list->cap = list->cap ? list->cap * 2 : 64;
                list->items = realloc(list->items, list->cap * sizeof *list->items);
                if (!list->items) xmalloc((size_t)-1);
            }
            list->items[list->n++] = (ProcInfo){(pid_t)pid, (pid_t)ppid, (pid_t)pgrp, (pid_t)sid};
        }
        free(stat);
    }
    closedir(dir);
}

typedef struct {
    pid_t *items;
    size_t n, cap;
} PidSet;

static int pidset_has(const PidSet *s, pid_t pid) {
    for (size_t i = 0; i < s->n; i++)
        if (s->items[i] == pid) return 1;
    return 0;
}

static void pidset_add(PidSet *s, pid_t pid) {
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->items = realloc(s->items, s->cap * sizeof *s->items);
        if (!s->items) xmalloc((size_t)-1);
    }
    s->items[s->n++] = pid;
}

void kill_tree(Selector selected, void *ctx) {
    ProcList procs = {0};
    PidSet stopped = {0}, found = {0}, todo = {0};
    for (;;) {
        processes(&procs);
        found.n = todo.n = 0;
        for (size_t i = 0; i < procs.n; i++) {
            ProcInfo *p = &procs.items[i];
            if (pidset_has(&stopped, p->pid) || selected(p->pid, p->ppid, p->pgrp, p->sid, ctx))
                pidset_add(&todo, p->pid);
        }
        while (todo.n) {
            pid_t pid = todo.items[--todo.n];
            if (pid == 1 || pidset_has(&found, pid)) continue;
            pidset_add(&found, pid);
            for (size_t i = 0; i < procs.n; i++)
                if (procs.items[i].ppid == pid) pidset_add(&todo, procs.items[i].pid);
        }
        int new = 0;
        for (size_t i = 0; i < found.n; i++) {
            if (pidset_has(&stopped, found.items[i])) continue;
            kill(found.items[i], SIGSTOP);
            pidset_add(&stopped, found.items[i]);
            new = 1;
        }
        if (!new) break;
    }
    for (size_t i = 0; i < stopped.n; i++) kill(stopped.items[i], SIGKILL);
    for (double deadline = now() + KILL_WAIT_S; now() < deadline; pause_ms()) {
        reap();
        processes(&procs);
        int alive = 0;
        for (size_t i = 0; i < procs.n && !alive; i++) alive = pidset_has(&stopped, procs.items[i].pid);
        if (!alive) break;
    }
    free(procs.items);
    free(stopped.items);
    free(found.items);
    free(todo.items);
}

long long oom_kills(void) {
    if (H.oom_fd < 0) return 0;
    char *text = read_at(H.oom_fd, H.oom_file);
    long long count = 0;
    for (char *line = text; line && *line;) {
        if (strncmp(line, "oom_kill ", 9) == 0) {
            count = strtoll(line + 9, NULL, 10);
            break;
        }
        char *next = strchr(line, '\n');
        line = next ? next + 1 : NULL;
    }
    free(text);
    return count;
}

/* Append a whole file to b: 0, or the errno of the failure. */
static int read_into(const char *path, Buf *b) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    char chunk[4096];
    ssize_t r;
    while ((r = read(fd, chunk, sizeof chunk)) > 0) buf_add(b, chunk, (size_t)r);
    int failed = r < 0 ? errno : 0;
    close(fd);
    return failed;
}

/* Read a /proc file of a process of another user, as that user: without CAP_SYS_PTRACE only a
 * process's own user may read its environment. The effective ids switch to the owner's (the
 * ids of /proc/<pid>: its effective ones while it is dumpable) and back. Changing ids clears
 * the parent-death signal, which is set again. Nothing is read from an undumpable process
 * (/proc/<pid> is root's). */
static void read_as_owner(pid_t pid, const char *path, Buf *b) {
    char dir[32];
    struct stat st;
    snprintf(dir, sizeof dir, "/proc/%d", (int)pid);
    if (stat(dir, &st) < 0) return;
    uid_t euid = geteuid();
    gid_t egid = getegid();
    if (st.st_uid == euid) return;
    int death = 0;
    prctl(PR_GET_PDEATHSIG, &death, 0, 0, 0);
    if (setegid(st.st_gid) == 0 && seteuid(st.st_uid) == 0) read_into(path, b);
    if (seteuid(euid) < 0 || setegid(egid) < 0) _exit(70); /* ours to restore: cannot fail */
    if (death) prctl(PR_SET_PDEATHSIG, death, 0, 0, 0);
}

int environ_has(pid_t pid, const char *entry, size_t entry_len) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    Buf b = {0};
    buf_add(&b, "", 1); /* a NUL before the first entry */
    int failed = read_into(path, &b);
    if (failed == EACCES || failed == EPERM) {
        b.len = 1;
        read_as_owner(pid, path, &b);
    }
    int has = memmem(b.data, b.len, entry, entry_len) != NULL;
    buf_free(&b);
    return has;
}
