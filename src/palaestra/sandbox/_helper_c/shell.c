/* Persistent shell sessions: one bash per session, kept running between its commands (the
 * Python helper's _helper/shell.py, whose docstring describes the protocol with the bash, and
 * whose SCRIPT is compiled in here as SHELL_SCRIPT: one definition for both helpers). */
#include "helper.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "shell_script.h" /* SHELL_SCRIPT, made from _helper/shell.py when the helper is built */

/* A state larger than this is refused: the session goes back to its previous state. */
#define STATE_LIMIT (64u << 20)
/* Reads that empty the largest pipe (1 MiB, the default pipe-max-size) 64 KiB at a time. */
#define PIPE_READS 17

Shell *shell_get(const char *name, int create) {
    Shell **tail = &H.shells;
    for (; *tail; tail = &(*tail)->next)
        if (strcmp((*tail)->name, name) == 0) return *tail;
    if (!create) return NULL;
    Shell *s = xcalloc(1, sizeof *s);
    s->proc.is_shell = 1;
    s->name = strdup(name);
    s->messages = s->reports = -1;
    s->outputs[0] = s->outputs[1] = -1;
    *tail = s;
    return s;
}

void shell_remove(Shell *s) {
    for (Shell **p = &H.shells; *p; p = &(*p)->next) {
        if (*p == s) {
            *p = s->next;
            return;
        }
    }
}

static void answer(Shell *s, int status) {
    s->has_run = 0;
    s->proc.has_deadline = 0;
    int oom = oom_kills() > s->run_oom_before;
    capture_answer(&s->run, s->run_id, !s->proc.timed_out, status, s->proc.timed_out, oom);
    capture_free(&s->run);
}

/* Close the message and status pipes; the output pipes, held open by what escaped the kill,
 * are drained and their output dropped. */
static void let_go_of_pipes(Shell *s) {
    for (int i = 0; i < 2; i++) {
        int fd = i ? s->reports : s->messages;
        if (fd >= 0) {
            if (watched(fd)) unwatch(fd);
            close(fd);
        }
        if (s->outputs[i] >= 0) H.watches[s->outputs[i]].owner = NULL;
    }
    s->messages = s->reports = -1;
    s->outputs[0] = s->outputs[1] = -1;
}

void shell_free(Shell *s) {
    let_go_of_pipes(s);
    if (s->has_run) { /* its bash outlived the kill: the run still gets its answer */
        s->proc.timed_out = 1;
        answer(s, 0);
    }
    free(s->waiting_head);
    free(s->waiting_cmd);
    buf_free(&s->state);
    buf_free(&s->outbox);
    buf_free(&s->inbox);
    free(s->name);
    free(s);
}

/* -- pipes ----------------------------------------------------------------------------------- */

void shell_take(Shell *s, int fd, const char *data, size_t n) {
    if (s->has_run) capture_take(&s->run, s->outputs[0] == fd ? 0 : 1, data, n);
}

/* Read what the output pipes hold (at most a full pipe's worth: a background job may write on
 * and on). */
static void drain_outputs(Shell *s) {
    for (int i = 0; i < 2; i++)
        for (int reads = 0; reads < PIPE_READS && s->outputs[i] >= 0; reads++)
            if (!on_output(s->outputs[i])) break;
}

/* Write what the bash is to read, once its last state has arrived. */
void shell_flush(Shell *s) {
    if (s->saving || s->messages < 0) return;
    while (s->outbox.len) {
        ssize_t w = write(s->messages, s->outbox.data, s->outbox.len);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EAGAIN) {
            if (!watched(s->messages)) watch(s->messages, W_MESSAGES, s);
            return;
        }
        if (w < 0) { /* the bash is gone; it is being reaped */
            s->outbox.len = 0;
            break;
        }
        buf_drop(&s->outbox, (size_t)w);
    }
    if (watched(s->messages)) unwatch(s->messages);
}

static void send_message(Shell *s, const char *token, const char *data, size_t n) {
    buf_addf(&s->outbox, "%s %zu\n", token, n);
    buf_add(&s->outbox, data, n);
    shell_flush(s);
}

static long find(const Buf *b, size_t from, size_t to, const char *needle, size_t n) {
    if (to > b->len) to = b->len;
    if (from >= to) return -1;
    const char *at = memmem(b->data + from, to - from, needle, n);
    return at ? at - b->data : -1;
}

/* Take the run's status line and the state after it. Anything else (a command may write here
 * too; a restored state's EXIT trap names an old run) is skipped: only a line starting with R
 * or X, right after a state or another line, is looked at, and only one naming the run by its
 * token counts. */
static void parse(Shell *s) {
    Buf *in = &s->inbox;
    size_t pos = 0;
    while (pos < in->len) {
        if (s->saving) {
            long end = find(in, s->scanned, in->len, "", 1);
            if (end < 0) {
                s->scanned = in->len;
                if (in->len - pos > STATE_LIMIT) {
                    pos = in->len;
                    kill_proc(&s->proc);
                }
                break;
            }
            s->state.len = 0;
            buf_add(&s->state, in->data + pos, (size_t)end - pos);
            pos = (size_t)end + 1, s->saving = 0;
            shell_flush(s);
            continue;
        }
        if (in->data[pos] != 'R' && in->data[pos] != 'X') {
            long r = find(in, pos, in->len, "\nR", 2), x = find(in, pos, in->len, "\nX", 2);
            if (r < 0 && x < 0) {
                char *last = memrchr(in->data, '\n', in->len);
                size_t after = last ? (size_t)(last - in->data) + 1 : 0;
                if (after > pos) pos = after;
                break;
            }
            pos = (size_t)(r < 0 ? x : x < 0 ? r : (r < x ? r : x)) + 1;
        }
        long end = find(in, pos, pos + 64, "\n", 1);
        if (end < 0) {
            if (in->len - pos >= 64) { /* too long for a status line */
                pos += 1;
                continue;
            }
            break;
        }
        char kind = in->data[pos];
        char line[64] = {0};
        memcpy(line, in->data + pos + 1, (size_t)end - pos - 1);
        pos = (size_t)end + 1;
        char *space = strchr(line, ' ');
        const char *token = space ? space + 1 : "";
        if (space) *space = 0;
        int digits = line[0] != 0 && strspn(line, "0123456789") == strlen(line);
        if (s->has_run && strcmp(token, s->token) == 0 && digits) {
            s->saving = 1, s->scanned = pos;
            s->exiting = s->exiting || kind == 'X';
            drain_outputs(s); /* the command's output is all in the pipes by now */
            answer(s, (int)strtol(line, NULL, 10));
        }
    }
    buf_drop(in, pos);
    s->scanned = s->scanned > pos ? s->scanned - pos : 0;
}

static void read_status(Shell *s) {
    char data[1 << 16];
    for (int reads = 0; reads < PIPE_READS && s->reports >= 0; reads++) {
        ssize_t r = read(s->reports, data, sizeof data);
        if (r <= 0) return; /* nothing by now, or its end */
        buf_add(&s->inbox, data, (size_t)r);
        parse(s);
    }
}

void shell_on_status(Shell *s) { read_status(s); }

/* -- the bash -------------------------------------------------------------------------------- */

/* Start a bash for the session: 0, or -1 (err: the request's error, or not_started). */
static int start(Shell *s, const Json *head, Buf *err, int *not_started, int *err_errno) {
    int msg[2], st[2];
    if (pipe2(msg, O_CLOEXEC) < 0) goto os_error;
    if (pipe2(st, O_CLOEXEC) < 0) {
        close(msg[0]), close(msg[1]);
        goto os_error;
    }
    char msg_r[16], st_w[16];
    snprintf(msg_r, sizeof msg_r, "%d", msg[0]);
    snprintf(st_w, sizeof st_w, "%d", st[1]);
    char *argv[] = {"bash", "-c", SHELL_SCRIPT, "bash", msg_r, st_w, NULL};
    int keep[2] = {msg[0], st[1]}; /* only this spawn inherits them: closed right after */
    Launched run;
    int rc = launch(head, argv, 0, keep, &run, err, not_started, err_errno);
    close(msg[0]);
    close(st[1]);
    if (rc < 0) {
        close(msg[1]);
        close(st[0]);
        return -1;
    }
    const Json *id = json_get(head, "id");
    s->proc.pid = run.pid, s->proc.running = 1, s->proc.id = id->integer;
    memcpy(s->proc.cgroup, run.cgroup, sizeof run.cgroup);
    s->messages = msg[1], s->reports = st[0];
    s->outputs[0] = run.out_fd, s->outputs[1] = run.err_fd;
    int fds[] = {s->messages, s->reports, run.out_fd, run.err_fd};
    for (int i = 0; i < 4; i++) set_nonblocking(fds[i]);
    watch(s->reports, W_STATUS, s);
    watch(run.out_fd, W_OUTPUT, s);
    watch(run.err_fd, W_OUTPUT, s);
    if (s->state.len) send_message(s, "0", s->state.data, s->state.len);
    return 0;
os_error:
    fail_request(err, "OSError", "cannot make the session's pipes: %s", strerror(errno));
    return -1;
}

/* Send the command, to a new bash when none runs. */
static void begin(Shell *s, const char *head_text, size_t head_len, const char *command,
                  size_t len) {
    Json *head = json_parse(head_text, head_len);
    if (s->proc.pid == 0) {
        Buf err = {0};
        int not_started = 0, err_errno = 0;
        if (start(s, head, &err, &not_started, &err_errno) < 0) {
            s->has_run = 0;
            s->proc.has_deadline = 0;
            capture_free(&s->run);
            if (not_started) {
                answer_not_started(s->run_id, err_errno, &err);
            } else { /* an unknown user...: the request's error */
                send_id(s->run_id, err.data);
            }
            buf_free(&err);
            json_free(head);
            return;
        }
    }
    json_free(head);
    send_message(s, s->token, command, len);
}

int shell_start_run(Shell *s, const char *head_text, size_t head_len, const char *command,
                    size_t len, Buf *err) {
    if (s->has_ended) shell_settle(s);
    if (s->has_run) {
        fail_request(err, "ValueError", "the shell session is already running a command");
        return -1;
    }
    Json *head = json_parse(head_text, head_len);
    const Json *id = json_get(head, "id"), *limit = json_get(head, "limit");
    const Json *timeout = json_get(head, "timeout");
    if (!id || !id->is_int || !limit || limit->type != J_NUM) {
        json_free(head);
        fail_request(err, "KeyError", "a shell run needs an id and a limit");
        return -1;
    }
    s->has_run = 1;
    s->run_id = id->integer;
    memset(&s->run, 0, sizeof s->run);
    s->run.limit = limit->number > 0 ? (size_t)limit->number : 0;
    s->run_oom_before = oom_kills();
    unsigned char random[8];
    if (getrandom(random, sizeof random, 0) != sizeof random) _exit(70);
    for (int i = 0; i < 8; i++) snprintf(s->token + 2 * i, 3, "%02x", random[i]);
    s->proc.timed_out = 0;
    s->proc.has_deadline = timeout && timeout->type == J_NUM;
    if (s->proc.has_deadline) s->proc.deadline = now() + timeout->number;
    json_free(head);
    if (s->exiting) { /* its bash is ending: the command goes to the next one (settle) */
        s->waiting_head = xstrndup(head_text, head_len);
        s->waiting_head_len = head_len;
        s->waiting_cmd = xstrndup(command, len);
        s->waiting_len = len;
    } else {
        begin(s, head_text, head_len, command, len);
    }
    return 0;
}

/* After the bash was reaped: take what it wrote, answer its run, kill what it left. */
void shell_settle(Shell *s) {
    int returncode = s->ended;
    s->has_ended = 0;
    read_status(s);
    drain_outputs(s);
    if (s->has_run && !s->waiting_head) /* it ended without reporting the run */
        answer(s, returncode);
    kill_proc(&s->proc); /* its background jobs end with it */
    if (s->proc.cgroup[0]) {
        add_leftover(s->proc.cgroup);
        remove_cgroups_leftover();
    }
    let_go_of_pipes(s);
    s->proc.pid = 0, s->proc.cgroup[0] = 0;
    s->outbox.len = s->inbox.len = 0;
    s->scanned = 0, s->saving = s->exiting = 0;
    if (s->waiting_head) {
        char *head = s->waiting_head, *command = s->waiting_cmd;
        size_t head_len = s->waiting_head_len, len = s->waiting_len;
        s->waiting_head = s->waiting_cmd = NULL;
        if (s->proc.timed_out)
            answer(s, 0);
        else
            begin(s, head, head_len, command, len);
        free(head);
        free(command);
    }
}

/* Kill the bash and everything it started; forget the state. A run still pending is answered
 * as timed out (killed from outside, as by its timeout). */
void shell_close(Shell *s) {
    s->proc.timed_out = 1;
    if (s->proc.pid && !s->has_ended) kill_proc(&s->proc);
    if (s->has_ended) shell_settle(s);
    s->state.len = 0;
}

/* Kill the session if request_id is its run (answered as timed out). */
void shell_cancel(Shell *s, long long request_id) {
    if (s->has_run && s->run_id == request_id && !s->has_ended && s->proc.pid) {
        s->proc.timed_out = 1;
        kill_proc(&s->proc);
    }
}
