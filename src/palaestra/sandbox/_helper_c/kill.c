/* Killing a command's processes, and waiting until they are gone: its cgroup and every cgroup
 * below it when the sandbox has cgroups, else a set of processes and their descendants found in
 * /proc. Both waits reap (the request loop's reap) while they wait. (The Python helper's
 * _helper/kill.py.) */
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
/* The most cgroups of one command's tree a kill or a removal visits (its own included). */
#define MAX_TREE 1024

static void pause_ms(void) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

/* The cgroups of a command's tree: paths relative to the tracking cgroup, parents first. */
typedef struct {
    char **items;
    size_t n, cap;
} Tree;

static void tree_free(Tree *t) {
    for (size_t i = 0; i < t->n; i++) free(t->items[i]);
    free(t->items);
    *t = (Tree){0};
}

static void tree_add(Tree *t, char *path) {
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 16;
        t->items = realloc(t->items, t->cap * sizeof *t->items);
        if (!t->items) xmalloc((size_t)-1);
    }
    t->items[t->n++] = path;
}

/* name and the cgroups below it, breadth first. Bounded, whatever a command made: at most
 * MAX_TREE cgroups, none looked for after deadline, and a path too long to open is left out
 * (the host's close still removes the sandbox's whole tree). */
static Tree cgroup_tree(int track_fd, const char *name, double deadline) {
    Tree t = {0};
    tree_add(&t, xstrndup(name, strlen(name)));
    for (size_t i = 0; i < t.n && t.n < MAX_TREE && now() < deadline; i++) {
        int fd = openat(track_fd, t.items[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) continue; /* removed meanwhile, or a path too long */
        DIR *dir = fdopendir(fd);
        if (!dir) {
            close(fd);
            continue;
        }
        struct dirent *e;
        while ((e = readdir(dir)) && t.n < MAX_TREE) {
            if (e->d_type != DT_DIR || strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            size_t len = strlen(t.items[i]) + 1 + strlen(e->d_name) + 1;
            char *path = xmalloc(len);
            snprintf(path, len, "%s/%s", t.items[i], e->d_name);
            tree_add(&t, path);
        }
        closedir(dir);
    }
    return t;
}

/* Read a file of a cgroup of the tree; NULL when gone. */
static char *read_in(int track_fd, const char *cgroup, const char *file) {
    size_t len = strlen(cgroup) + 1 + strlen(file) + 1;
    char *path = xmalloc(len);
    snprintf(path, len, "%s/%s", cgroup, file);
    char *text = read_at(track_fd, path);
    free(path);
    return text;
}

static int write_in(int track_fd, const char *cgroup, const char *file, const char *text) {
    size_t len = strlen(cgroup) + 1 + strlen(file) + 1;
    char *path = xmalloc(len);
    snprintf(path, len, "%s/%s", cgroup, file);
    int rc = write_at(track_fd, path, text);
    free(path);
    return rc;
}

static int has_members(int track_fd, const char *cgroup) {
    char *procs = read_in(track_fd, cgroup, "cgroup.procs");
    int members = procs && strspn(procs, " \n") != strlen(procs);
    free(procs);
    return members;
}

/* Whether any process is left in the cgroup name or below it. */
static int populated(int track_fd, const char *name, double deadline) {
    char *events = read_in(track_fd, name, "cgroup.events"); /* v2: the tree's */
    if (events) {
        int found = strstr(events, "populated 1") != NULL;
        free(events);
        return found;
    }
    Tree t = cgroup_tree(track_fd, name, deadline);
    int found = 0;
    for (size_t i = 0; i < t.n && !found; i++) found = has_members(track_fd, t.items[i]);
    tree_free(&t);
    return found;
}

/* Thaw the cgroups of t from its from-th on, parents first. */
static void thaw(int track_fd, const char *mode, const Tree *t, size_t from) {
    int v1 = strcmp(mode, "freezer") == 0;
    for (size_t i = from; i < t->n; i++)
        write_in(track_fd, t->items[i], v1 ? "freezer.state" : "cgroup.freeze", v1 ? "THAWED" : "0");
}

void thaw_below(int track_fd, const char *mode) {
    Tree t = cgroup_tree(track_fd, ".", now() + KILL_WAIT_S);
    thaw(track_fd, mode, &t, 1);
    tree_free(&t);
}

/* Remove the cgroup name and those below it, deepest first, as far as they hold no process;
 * whether name is gone. */
int remove_cgroup_tree(int track_fd, const char *name) {
    Tree t = cgroup_tree(track_fd, name, now() + KILL_WAIT_S);
    int gone = 1;
    for (size_t i = t.n; i-- > 0;) /* deepest first */
        if (unlinkat(track_fd, t.items[i], AT_REMOVEDIR) < 0 && errno != ENOENT && i == 0)
            gone = 0;
    tree_free(&t);
    return gone;
}

/* SIGKILL every process in a command's cgroup and in every cgroup below it, and wait until
 * they are gone; at most KILL_WAIT_S in all. Frozen first (both freezers freeze the cgroups
 * below too), then thawed, each cgroup of the tree, parents first: a cgroup frozen on its own
 * stays frozen under a thawed parent, and v1's frozen processes die only once thawed. v2
 * kernels with cgroup.kill do the whole tree in one write. */
void kill_cgroup(int track_fd, const char *mode, const char *name) {
    double deadline = now() + KILL_WAIT_S;
    if (strcmp(mode, "cgroup.kill") == 0) {
        write_in(track_fd, name, "cgroup.kill", "1");
    } else {
        int v1 = strcmp(mode, "freezer") == 0;
        write_in(track_fd, name, v1 ? "freezer.state" : "cgroup.freeze", v1 ? "FROZEN" : "1");
        for (; now() < deadline; pause_ms()) {
            char *state = read_in(track_fd, name, v1 ? "freezer.state" : "cgroup.events");
            int frozen = state && strstr(state, v1 ? "FROZEN" : "frozen 1") != NULL;
            free(state);
            if (frozen) break;
        }
        Tree t = cgroup_tree(track_fd, name, deadline);
        for (size_t i = 0; i < t.n; i++) {
            char *procs = read_in(track_fd, t.items[i], "cgroup.procs");
            for (char *p = procs; p && *p;) {
                char *end;
                long pid = strtol(p, &end, 10);
                if (end == p) break;
                kill((pid_t)pid, SIGKILL);
                p = end;
            }
            free(procs);
        }
        thaw(track_fd, mode, &t, 0);
        tree_free(&t);
    }
    for (; now() < deadline; pause_ms()) {
        reap();
        if (!populated(track_fd, name, deadline)) return;
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

void kill_tree(Selector selected, void *ctx, void (*after_kill)(void)) {
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
    if (after_kill) after_kill();
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
