/* The helper's state and its commands: watched descriptors, frames out, reaping, killing a
 * command, starting one (the Python helper's _helper/server.py, whose docstrings say why each
 * step is there). The request loop is main.c. */
#include "helper.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

Helper H;

/* -- watches --------------------------------------------------------------------------------- */

void watch(int fd, int kind, void *owner) {
    if ((size_t)fd >= H.n_watches) {
        size_t n = H.n_watches ? H.n_watches : 64;
        while (n <= (size_t)fd) n *= 2;
        H.watches = realloc(H.watches, n * sizeof *H.watches);
        if (!H.watches) xmalloc((size_t)-1);
        memset(H.watches + H.n_watches, 0, (n - H.n_watches) * sizeof *H.watches);
        H.n_watches = n;
    }
    H.watches[fd] = (Watch){kind, owner, ++H.gen};
}

void unwatch(int fd) {
    if ((size_t)fd < H.n_watches) H.watches[fd] = (Watch){W_NONE, NULL, ++H.gen};
}

int watched(int fd) { return (size_t)fd < H.n_watches && H.watches[fd].kind != W_NONE; }

void send_frame(const Buf *head, const char *blob, size_t blob_len) {
    uint32_t header[2] = {htonl((uint32_t)head->len), htonl((uint32_t)blob_len)}; /* big-endian */
    Buf frame = {0};
    buf_add(&frame, header, sizeof header);
    buf_add(&frame, head->data, head->len);
    buf_add(&frame, blob, blob_len);
    write_all(1, frame.data, frame.len);
    buf_free(&frame);
}

void send_id(long long id, const char *error) {
    Buf head = {0};
    buf_addf(&head, "{\"id\":%lld", id);
    if (error) {
        buf_adds(&head, ",\"error\":");
        json_quote(&head, error, strlen(error));
    }
    buf_adds(&head, "}");
    send_frame(&head, NULL, 0);
    buf_free(&head);
}

/* -- cgroups --------------------------------------------------------------------------------- */

void add_leftover(const char *cgroup) {
    for (size_t i = 0; i < H.n_leftover; i++)
        if (strcmp(H.leftover[i], cgroup) == 0) return;
    H.leftover = realloc(H.leftover, (H.n_leftover + 1) * sizeof *H.leftover);
    if (!H.leftover) xmalloc((size_t)-1);
    H.leftover[H.n_leftover++] = strdup(cgroup);
}

/* Remove the empty ones of the leftover per-command cgroups, with the cgroups below them
 * (others still hold processes). */
void remove_cgroups_leftover(void) {
    for (size_t i = 0; i < H.n_leftover;) {
        if (remove_cgroup_tree(H.track_fd, H.leftover[i])) {
            free(H.leftover[i]);
            H.leftover[i] = H.leftover[--H.n_leftover];
        } else {
            i++;
        }
    }
}

/* -- processes ------------------------------------------------------------------------------- */

/* Collect every exited child: our commands, and orphans re-parented to pid 1. */
void reap(void) {
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0) return;
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
        int found = 0;
        for (Command *c = H.commands; c && !found; c = c->next) {
            if (c->proc.running && c->proc.pid == pid) {
                c->proc.running = 0, c->exited = 1, c->returncode = code;
                c->drain_until = now() + DRAIN_GRACE_S;
                found = 1;
            }
        }
        for (Shell *s = H.shells; s && !found; s = s->next) {
            if (s->proc.running && s->proc.pid == pid) {
                s->proc.running = 0, s->has_ended = 1, s->ended = code;
                found = 1;
            }
        }
        if (!found && H.n_leftover) remove_cgroups_leftover();
    }
}

typedef struct {
    pid_t root;
    char marker[64];
    size_t marker_len;
} TreeCtx;

static int in_command(pid_t pid, pid_t ppid, pid_t pgrp, pid_t sid, void *ctx) {
    (void)ppid;
    TreeCtx *t = ctx;
    return pgrp == t->root || sid == t->root || environ_has(pid, t->marker, t->marker_len);
}

static int every(pid_t pid, pid_t ppid, pid_t pgrp, pid_t sid, void *ctx) {
    (void)pid, (void)ppid, (void)pgrp, (void)sid, (void)ctx;
    return 1;
}

/* The service too: a process the agent made it start (by ptrace, or by asking) is in its
 * session, and must not outlive the phase boundary. It starts again from its argv. */
static void thaw_all(void) {
    if (H.track_fd >= 0) thaw_below(H.track_fd, H.kill_mode);
}

int kill_all(int restart_service, Buf *err) {
    kill_tree(every, NULL, thaw_all); /* thawed after the kill: frozen ones die too */
    H.service = 0;
    remove_cgroups_leftover();
    if (!restart_service || !H.service_argv) return 0;
    H.service = start_service(err);
    if (H.service > 0) return 0;
    H.service = 0;
    return -1;
}

void kill_proc(Proc *p) {
    if (p->cgroup[0]) {
        kill_cgroup(H.track_fd, H.kill_mode, p->cgroup);
        return;
    }
    TreeCtx ctx = {p->pid, {0}, 0};
    int n = snprintf(ctx.marker, sizeof ctx.marker, "%c%s=%lld%c", 0, MARKER, p->id, 0);
    ctx.marker_len = (size_t)n;
    kill_tree(in_command, &ctx, NULL);
}

/* -- starting commands ----------------------------------------------------------------------- */

static int env_key_is(const char *entry, const char *key, size_t key_len) {
    return strncmp(entry, key, key_len) == 0 && entry[key_len] == '=';
}

/* The sandbox's environment with the request's on top (and HOME, the marker). */
static char **command_env(const Json *overrides, const char *home, long long marker_id) {
    size_t base = 0;
    while (H.env[base]) base++;
    size_t extra = overrides ? overrides->len : 0;
    char **env = xcalloc(base + extra + 3, sizeof *env);
    size_t n = 0;
    int has_home = 0;
    for (size_t i = 0; i < extra; i++)
        if (overrides->key_lens[i] == 4 && memcmp(overrides->keys[i], "HOME", 4) == 0) has_home = 1;
    for (size_t i = 0; i < base; i++) {
        int overridden = (home && !has_home && env_key_is(H.env[i], "HOME", 4)) ||
                         (marker_id >= 0 && env_key_is(H.env[i], MARKER, strlen(MARKER)));
        for (size_t j = 0; j < extra && !overridden; j++)
            overridden = env_key_is(H.env[i], overrides->keys[j], overrides->key_lens[j]);
        if (!overridden) env[n++] = strdup(H.env[i]);
    }
    for (size_t j = 0; j < extra; j++) {
        const Json *v = overrides->items[j];
        if (v->type != J_STR) continue;
        Buf entry = {0};
        buf_add(&entry, overrides->keys[j], overrides->key_lens[j]);
        buf_add(&entry, "=", 1);
        buf_add(&entry, v->str, v->len);
        env[n++] = entry.data;
    }
    if (home && !has_home) {
        Buf entry = {0};
        buf_addf(&entry, "HOME=%s", home);
        env[n++] = entry.data;
    }
    if (marker_id >= 0) {
        Buf entry = {0};
        buf_addf(&entry, "%s=%lld", MARKER, marker_id);
        env[n++] = entry.data;
    }
    env[n] = NULL;
    return env;
}

static void free_strv(char **v) {
    if (!v) return;
    for (char **p = v; *p; p++) free(*p);
    free(v);
}

static int has_nul(const Json *s) { return s->type == J_STR && strlen(s->str) != s->len; }

int launch(const Json *head, char *const argv[], int with_stdin, int keep_fds[2],
           Launched *out, Buf *err, int *not_started, int *err_errno) {
    *not_started = 0;
    const Json *id = json_get(head, "id"), *cwd = json_get(head, "cwd");
    const Json *env_over = json_get(head, "env");
    if (!id || !id->is_int || !cwd || cwd->type != J_STR || (env_over && env_over->type != J_OBJ)) {
        fail_request(err, "KeyError", "a command needs an id, a cwd and an env");
        return -1;
    }
    for (size_t i = 0; env_over && i < env_over->len; i++) {
        if (env_over->items[i]->type != J_STR || has_nul(env_over->items[i]) ||
            strlen(env_over->keys[i]) != env_over->key_lens[i]) {
            fail_request(err, "ValueError", "an environment entry holds a null byte or no text");
            return -1;
        }
        if (!env_over->key_lens[i] || strchr(env_over->keys[i], '=')) {
            fail_request(err, "ValueError", "illegal environment variable name");
            return -1;
        }
    }
    if (has_nul(cwd)) {
        fail_request(err, "ValueError", "embedded null byte");
        return -1;
    }
    uid_t uid;
    gid_t gid;
    char *home;
    if (resolve_user(json_get(head, "user"), &uid, &gid, &home, err) < 0) return -1;
    char **env = command_env(env_over, home, H.track_fd < 0 ? id->integer : -1);
    free(home);
    out->cgroup[0] = 0;
    int procs_fd = -1;
    if (H.track_fd >= 0) {
        snprintf(out->cgroup, sizeof out->cgroup, "c%lld", id->integer);
        char path[64];
        snprintf(path, sizeof path, "%s/cgroup.procs", out->cgroup);
        if (mkdirat(H.track_fd, out->cgroup, 0777) < 0 ||
            (procs_fd = openat(H.track_fd, path, O_WRONLY | O_CLOEXEC)) < 0) {
            fail_request(err, "OSError", "cannot make the command's cgroup: %s", strerror(errno));
            if (errno != EEXIST) unlinkat(H.track_fd, out->cgroup, AT_REMOVEDIR);
            free_strv(env);
            return -1;
        }
    }
    Buf reason = {0};
    int rc = spawn(argv, cwd->str, env, uid, gid, with_stdin, procs_fd, keep_fds, &out->pid,
                   &out->in_fd, &out->out_fd, &out->err_fd, err_errno, &reason);
    if (procs_fd >= 0) close(procs_fd);
    free_strv(env);
    if (rc < 0) {
        if (out->cgroup[0]) unlinkat(H.track_fd, out->cgroup, AT_REMOVEDIR);
        *not_started = 1;
        err->len = 0;
        buf_add(err, reason.data, reason.len);
        buf_free(&reason);
        return -1;
    }
    buf_free(&reason);
    return 0;
}

/* Answer like a shell: 127 when the command is not found, 126 when not runnable. */
void answer_not_started(long long id, int err_errno, const Buf *reason) {
    Capture c = {1 << 16, {{0}, {0}}, 0};
    capture_take(&c, 1, reason->data, reason->len);
    capture_take(&c, 1, "\n", 1);
    capture_answer(&c, id, 1, err_errno == ENOENT ? 127 : 126, 0, 0);
    capture_free(&c);
}
