/* The helper's entry and its request loop: one thread, one poll set, SIGCHLD through a
 * signalfd (the Python helper's _helper/server.py). */
#include "helper.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

extern char **environ;
static int signal_fd = -1;

static void send_error(const Json *head, const Buf *err) {
    const Json *id = json_get(head, "id");
    if (id && id->type == J_NUM && id->is_int) {
        send_id(id->integer, err->data);
        return;
    }
    Buf out = {0}; /* a request without an id: answered with a null one */
    buf_adds(&out, "{\"id\":null,\"error\":");
    json_quote(&out, err->data, err->len);
    buf_adds(&out, "}");
    send_frame(&out, NULL, 0);
    buf_free(&out);
}

/* -- exec ------------------------------------------------------------------------------------ */

/* Starts an exec; its stdin, when it has one, takes *blob (the request's copy, not copied again). */
static int start_command(const Json *head, char **blob, size_t blob_len, Buf *err) {
    const Json *argv_json = json_get(head, "argv"), *limit = json_get(head, "limit");
    const Json *timeout = json_get(head, "timeout"), *with_stdin = json_get(head, "stdin");
    const Json *id = json_get(head, "id");
    if (!argv_json || argv_json->type != J_ARR || !limit || limit->type != J_NUM || !id ||
        !id->is_int) {
        fail_request(err, "KeyError", "an exec needs an id, an argv and a limit");
        return -1;
    }
    char **argv = xcalloc(argv_json->len + 1, sizeof *argv);
    for (size_t i = 0; i < argv_json->len; i++) {
        const Json *arg = argv_json->items[i];
        if (arg->type != J_STR || strlen(arg->str) != arg->len) {
            free(argv);
            fail_request(err, "ValueError", "an argument is not text or holds a null byte");
            return -1;
        }
        argv[i] = arg->str;
    }
    long long oom_before = oom_kills();
    Launched run;
    int not_started = 0, err_errno = 0;
    int rc = -1;
    if (argv_json->len == 0) {
        not_started = 1, err_errno = EINVAL;
        buf_adds(err, "an empty command");
    } else {
        rc = launch(head, argv, with_stdin && with_stdin->boolean, NULL, &run, err,
                    &not_started, &err_errno);
    }
    free(argv);
    if (rc < 0) {
        if (!not_started) return -1;
        answer_not_started(id->integer, err_errno, err);
        return 0;
    }
    Command *cmd = xcalloc(1, sizeof *cmd);
    cmd->proc.pid = run.pid;
    cmd->proc.running = 1;
    cmd->proc.id = id->integer;
    memcpy(cmd->proc.cgroup, run.cgroup, sizeof run.cgroup);
    if (timeout && timeout->type == J_NUM) {
        cmd->proc.has_deadline = 1;
        cmd->proc.deadline = now() + timeout->number;
    }
    cmd->capture.limit = limit->number > 0 ? (size_t)limit->number : 0;
    cmd->fds[0] = run.out_fd, cmd->fds[1] = run.err_fd;
    cmd->in_fd = run.in_fd;
    cmd->oom_before = oom_before;
    Command **tail = &H.commands;
    while (*tail) tail = &(*tail)->next;
    *tail = cmd;
    for (int i = 0; i < 2; i++) {
        set_nonblocking(cmd->fds[i]);
        watch(cmd->fds[i], W_OUTPUT, cmd);
    }
    if (cmd->in_fd >= 0) {
        cmd->stdin_data = *blob;
        *blob = NULL;
        cmd->stdin_len = blob_len;
        set_nonblocking(cmd->in_fd);
        watch(cmd->in_fd, W_STDIN, cmd);
    }
    return 0;
}

static void close_writer(Command *cmd) {
    unwatch(cmd->in_fd);
    close(cmd->in_fd);
    cmd->in_fd = -1;
}

static void on_stdin(Command *cmd) {
    size_t left = cmd->stdin_len - cmd->stdin_off;
    ssize_t w = left ? write(cmd->in_fd, cmd->stdin_data + cmd->stdin_off, left < CHUNK ? left : CHUNK) : 0;
    if (w < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (w < 0) /* EPIPE: the command does not read its input, not an error */
        cmd->stdin_off = cmd->stdin_len;
    else
        cmd->stdin_off += (size_t)w;
    if (cmd->stdin_off >= cmd->stdin_len) close_writer(cmd);
}

static void answer(Command *cmd) {
    for (Command **p = &H.commands; *p; p = &(*p)->next) {
        if (*p == cmd) {
            *p = cmd->next;
            break;
        }
    }
    for (int i = 0; i < 2; i++) /* held open by background processes: keep draining, discard */
        if (cmd->fds[i] >= 0) H.watches[cmd->fds[i]].owner = NULL;
    if (cmd->in_fd >= 0) close_writer(cmd);
    if (cmd->proc.cgroup[0]) {
        add_leftover(cmd->proc.cgroup);
        remove_cgroups_leftover();
    }
    int oom = oom_kills() > cmd->oom_before;
    capture_answer(&cmd->capture, cmd->proc.id, !cmd->proc.timed_out, cmd->returncode,
                   cmd->proc.timed_out, oom);
    capture_free(&cmd->capture);
    free(cmd->stdin_data);
    free(cmd);
}

int on_output(int fd) {
    void *owner = H.watches[fd].owner;
    char data[CHUNK];
    ssize_t r = read(fd, data, sizeof data);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
    if (r > 0) {
        if (owner && ((Proc *)owner)->is_shell) {
            shell_take(owner, fd, data, (size_t)r);
        } else if (owner) {
            Command *cmd = owner;
            capture_take(&cmd->capture, cmd->fds[0] == fd ? 0 : 1, data, (size_t)r);
        }
        return 1;
    }
    unwatch(fd);
    close(fd);
    if (owner) {
        int *fds = ((Proc *)owner)->is_shell ? ((Shell *)owner)->outputs : ((Command *)owner)->fds;
        for (int i = 0; i < 2; i++)
            if (fds[i] == fd) fds[i] = -1;
    }
    return 1;
}

/* -- requests -------------------------------------------------------------------------------- */

static void handle(const Json *head, char **blob, size_t blob_len, const char *head_text,
                   size_t head_len) {
    const Json *op = json_get(head, "op"), *id = json_get(head, "id");
    Buf err = {0};
    int rc = 0;
    const char *name = op && op->type == J_STR ? op->str : "";
    if (strcmp(name, "exec") == 0) {
        rc = start_command(head, blob, blob_len, &err);
    } else if (strcmp(name, "kill_all") == 0) {
        const Json *restart = json_get(head, "restart_service");
        rc = kill_all(restart && restart->type == J_BOOL && restart->boolean, &err);
        if (rc == 0) send_id(id && id->is_int ? id->integer : 0, NULL);
    } else if (strcmp(name, "cancel") == 0 && id && id->is_int) {
        Command *cmd = NULL;
        for (Command *c = H.commands; c; c = c->next)
            if (c->proc.id == id->integer) cmd = c;
        if (cmd && !cmd->exited) kill_proc(&cmd->proc);
        for (Shell *s = H.shells; s; s = s->next) shell_cancel(s, id->integer);
    } else if (strcmp(name, "shell_run") == 0 || strcmp(name, "shell_close") == 0) {
        const Json *shell = json_get(head, "shell");
        if (!shell || shell->type != J_STR) {
            fail_request(&err, "KeyError", "'shell'");
            rc = -1;
        } else if (name[6] == 'r') {
            Shell *s = shell_get(shell->str, 1);
            rc = shell_start_run(s, head_text, head_len, *blob, blob_len, &err);
        } else {
            Shell *s = shell_get(shell->str, 0);
            if (s) {
                shell_remove(s);
                shell_close(s);
                shell_free(s);
            }
            send_id(id && id->is_int ? id->integer : 0, NULL);
        }
    } else {
        Buf quoted = {0};
        json_quote(&quoted, name, strlen(name));
        quoted.data[0] = quoted.data[quoted.len - 1] = '\'';
        fail_request(&err, "ValueError", "unknown op %s", quoted.data);
        buf_free(&quoted);
        rc = -1;
    }
    if (rc < 0) send_error(head, &err);
    buf_free(&err);
}

static void on_request(void) {
    static char data[1 << 20]; /* uploads arrive as an exec's stdin: megabytes at a time */
    ssize_t r = read(0, data, sizeof data);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (r <= 0) _exit(0); /* the host is gone; exiting takes the sandbox down with us */
    buf_add(&H.inbox, data, (size_t)r);
    while (H.inbox.len >= 8) {
        uint32_t sizes[2];
        memcpy(sizes, H.inbox.data, sizeof sizes);
        size_t head_len = ntohl(sizes[0]), blob_len = ntohl(sizes[1]);
        size_t end = 8 + head_len + blob_len;
        if (H.inbox.len < end) return;
        Json *head = json_parse(H.inbox.data + 8, head_len);
        if (!head) {
            fprintf(stderr, "palaestra-helper: a request that is not JSON; the host and the "
                            "helper disagree on the protocol\n");
            _exit(1);
        }
        char *head_text = xstrndup(H.inbox.data + 8, head_len);
        char *blob = xstrndup(H.inbox.data + 8 + head_len, blob_len);
        buf_drop(&H.inbox, end);
        handle(head, &blob, blob_len, head_text, head_len);
        free(blob);
        free(head_text);
        json_free(head);
    }
}

static void on_signal(void) {
    struct signalfd_siginfo info;
    while (read(signal_fd, &info, sizeof info) > 0) {
    }
    reap();
}

/* -- the loop -------------------------------------------------------------------------------- */

static int next_wakeup(void) {
    double soonest = -1;
    for (Command *c = H.commands; c; c = c->next) {
        if (c->proc.running && c->proc.has_deadline && (soonest < 0 || c->proc.deadline < soonest))
            soonest = c->proc.deadline;
        if (c->exited && (soonest < 0 || c->drain_until < soonest)) soonest = c->drain_until;
    }
    for (Shell *s = H.shells; s; s = s->next)
        if (s->proc.running && s->proc.has_deadline && (soonest < 0 || s->proc.deadline < soonest))
            soonest = s->proc.deadline;
    if (soonest < 0) return -1;
    double ms = (soonest - now()) * 1000;
    return ms <= 0 ? 0 : (int)ms + 1;
}

static void serve(void) {
    struct pollfd *fds = NULL;
    unsigned *gens = NULL;
    size_t cap = 0;
    send_id(0, NULL);
    for (;;) {
        size_t n = 0;
        for (size_t fd = 0; fd < H.n_watches; fd++) {
            int kind = H.watches[fd].kind;
            if (kind == W_NONE) continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                fds = realloc(fds, cap * sizeof *fds);
                gens = realloc(gens, cap * sizeof *gens);
                if (!fds || !gens) xmalloc((size_t)-1);
            }
            fds[n].fd = (int)fd;
            fds[n].events = kind == W_STDIN || kind == W_MESSAGES ? POLLOUT : POLLIN;
            fds[n].revents = 0;
            gens[n++] = H.watches[fd].gen;
        }
        if (poll(fds, n, next_wakeup()) < 0 && errno != EINTR) _exit(70);
        for (size_t i = 0; i < n; i++) {
            int fd = fds[i].fd;
            if (!fds[i].revents || H.watches[fd].gen != gens[i]) continue; /* changed meanwhile */
            void *owner = H.watches[fd].owner;
            switch (H.watches[fd].kind) {
            case W_REQUEST: on_request(); break;
            case W_SIGNAL: on_signal(); break;
            case W_OUTPUT: on_output(fd); break;
            case W_STDIN: on_stdin(owner); break;
            case W_STATUS: shell_on_status(owner); break;
            case W_MESSAGES: shell_flush(owner); break;
            }
        }
        double t = now();
        for (Command *c = H.commands; c; c = c->next) {
            if (c->proc.running && c->proc.has_deadline && t >= c->proc.deadline) {
                c->proc.timed_out = 1, c->proc.has_deadline = 0;
                kill_proc(&c->proc);
            }
        }
        for (Shell *s = H.shells; s; s = s->next) {
            if (s->proc.running && s->proc.has_deadline && t >= s->proc.deadline) {
                s->proc.timed_out = 1, s->proc.has_deadline = 0;
                kill_proc(&s->proc);
            }
        }
        t = now();
        for (Command *c = H.commands, *next; c; c = next) {
            next = c->next;
            if (c->exited && ((c->fds[0] < 0 && c->fds[1] < 0) || t >= c->drain_until)) answer(c);
        }
        for (Shell *s = H.shells; s; s = s->next)
            if (s->has_ended) shell_settle(s);
    }
}

/* -- start ----------------------------------------------------------------------------------- */

/* Every descriptor bubblewrap passed in (the cgroup directories...) close-on-exec. */
static void keep_fds_to_self(void) {
    DIR *dir = opendir("/proc/self/fd");
    if (!dir) return;
    struct dirent *entry;
    while ((entry = readdir(dir)))
        if (atoi(entry->d_name) > 2 && atoi(entry->d_name) != dirfd(dir))
            fcntl(atoi(entry->d_name), F_SETFD, FD_CLOEXEC);
    closedir(dir);
}

static void configure(const char *text) {
    H.track_fd = H.oom_fd = -1;
    if (!text) return;
    Json *config = json_parse(text, strlen(text));
    if (!config || config->type != J_OBJ) {
        fprintf(stderr, "palaestra-helper: its configuration is not a JSON object\n");
        _exit(2);
    }
    const Json *v;
    if ((v = json_get(config, "track_fd")) && v->is_int) H.track_fd = (int)v->integer;
    if ((v = json_get(config, "oom_fd")) && v->is_int) H.oom_fd = (int)v->integer;
    if ((v = json_get(config, "kill")) && v->type == J_STR)
        snprintf(H.kill_mode, sizeof H.kill_mode, "%s", v->str);
    H.oom_file = strdup((v = json_get(config, "oom_file")) && v->type == J_STR ? v->str : "");
    if ((v = json_get(config, "rlimit_as")) && v->is_int) {
        H.has_rlimit_as = 1;
        H.rlimit_as = (unsigned long long)v->integer;
    }
    const Json *service = json_get(config, "service");
    if (service && service->type == J_ARR && service->len) {
        /* kept for the helper's life: kill_all starts the service again from it */
        H.service_argv = xcalloc(service->len + 1, sizeof *H.service_argv);
        for (size_t i = 0; i < service->len; i++)
            H.service_argv[i] = strdup(service->items[i]->type == J_STR ? service->items[i]->str
                                                                        : "");
        Buf why = {0};
        H.service = start_service(&why);
        if (H.service < 0) {
            fprintf(stderr, "palaestra-helper: %s\n", why.data);
            _exit(1);
        }
    }
    json_free(config);
}

int main(int argc, char **argv) {
    /* Keep sandboxed processes out of /proc/1/fd and /proc/1/mem, and from ptracing it. */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    keep_fds_to_self();
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);
    sigset_t child;
    sigemptyset(&child);
    sigaddset(&child, SIGCHLD);
    sigprocmask(SIG_BLOCK, &child, NULL);
    signal_fd = signalfd(-1, &child, SFD_NONBLOCK | SFD_CLOEXEC);
    if (signal_fd < 0) {
        perror("palaestra-helper: signalfd");
        return 70;
    }
    size_t n = 0;
    for (char **e = environ; *e; e++) n++;
    H.env = xcalloc(n + 1, sizeof *H.env);
    n = 0;
    for (char **e = environ; *e; e++) /* PWD is bwrap's cwd, not the commands' */
        if (strncmp(*e, "PWD=", 4) != 0) H.env[n++] = strdup(*e);
    configure(argc > 1 ? argv[1] : NULL);
    watch(0, W_REQUEST, NULL);
    watch(signal_fd, W_SIGNAL, NULL);
    serve();
    return 0;
}
