/* The sandbox's pid 1 in C: the same protocol, requests and answers as the Python helper
 * (palaestra/sandbox/_helper, whose docstrings are the specification), without an interpreter
 * to start. A sandbox's cold start drops from a Python start-up (~8 ms on a 2-core machine)
 * to a static binary's exec (~0.5 ms).
 *
 * Modules: json.c (the frames' JSON, parsed and written), io.c (buffers, clocks, frames),
 * spawn.c (starting a command as a user, in its cgroup), kill.c (killing a command's processes,
 * OOM counts), shell.c (persistent shell sessions), commands.c (the state, reaping, killing and
 * starting a command), main.c (the requests and their loop).
 */
#ifndef PALAESTRA_HELPER_H
#define PALAESTRA_HELPER_H

#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* After a command's main process exits, output still in flight is read for this long. */
#define DRAIN_GRACE_S 0.05
#define CHUNK (1 << 16)
/* Without cgroups, every command's environment carries MARKER=<request id>. */
#define MARKER "PALAESTRA_EXEC"

/* -- buffers and I/O (io.c) ------------------------------------------------------------------ */

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

void buf_add(Buf *b, const void *data, size_t n);
void buf_adds(Buf *b, const char *s);
void buf_addf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_drop(Buf *b, size_t n); /* remove the first n bytes */
void buf_free(Buf *b);
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
char *xstrndup(const char *s, size_t n);
double now(void); /* CLOCK_MONOTONIC, seconds */
void write_all(int fd, const void *data, size_t n);
void set_nonblocking(int fd);
/* Read a whole small file under a directory fd; NULL (errno set) on failure. */
char *read_at(int dir_fd, const char *path);
int write_at(int dir_fd, const char *path, const char *text);
/* The error text of a failed request: "<kind>: <message>". */
void fail_request(Buf *err, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* -- JSON (json.c) --------------------------------------------------------------------------- */

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } JType;

typedef struct Json {
    JType type;
    int boolean;
    int is_int;
    long long integer;
    double number;
    char *str; /* J_STR: bytes (surrogate escapes \udc80-\udcff become raw bytes), NUL-ended */
    size_t len; /* J_STR: length in bytes; J_ARR, J_OBJ: number of items */
    struct Json **items;
    char **keys; /* J_OBJ */
    size_t *key_lens;
} Json;

Json *json_parse(const char *text, size_t len); /* NULL when not valid JSON */
void json_free(Json *value);
Json *json_get(const Json *object, const char *key); /* NULL when absent or not an object */
void json_quote(Buf *out, const char *s, size_t n); /* a JSON string, ASCII only */

/* -- the helper's state (main.c) ------------------------------------------------------------- */

/* What a watched descriptor is for. */
enum {
    W_NONE,
    W_REQUEST,   /* fd 0: the host's frames */
    W_SIGNAL,    /* the signalfd: SIGCHLD */
    W_OUTPUT,    /* a command's or a shell's stdout or stderr (owner NULL: drained, dropped) */
    W_STDIN,     /* a command's stdin, being fed */
    W_STATUS,    /* a shell's status pipe */
    W_MESSAGES,  /* a shell's message pipe, waiting to be writable */
};

typedef struct {
    size_t limit;
    Buf out[2]; /* stdout, stderr */
    int truncated;
} Capture;

void capture_take(Capture *c, int stream, const char *data, size_t n);
void capture_answer(Capture *c, long long id, int has_code, int code, int timed_out, int oom);
void capture_free(Capture *c);

/* A process the helper waits for: a command, or a shell session's bash. */
typedef struct Proc {
    int is_shell;
    pid_t pid;
    int running;        /* started and not reaped yet */
    long long id;       /* the request that started it: its marker, its cgroup's name */
    char cgroup[32];    /* its cgroup under the tracking cgroup, or "" */
    int has_deadline;
    double deadline;
    int timed_out;
} Proc;

typedef struct Command {
    Proc proc;
    Capture capture;
    int fds[2];         /* stdout, stderr read ends; -1 once at EOF */
    int in_fd;          /* stdin write end being fed, or -1 */
    char *stdin_data;
    size_t stdin_len, stdin_off;
    int exited;
    int returncode;
    double drain_until;
    long long oom_before;
    struct Command *next;
} Command;

struct Shell;

typedef struct {
    int kind;
    void *owner;        /* Command, Shell or NULL */
    unsigned gen;       /* bumped by each watch: a stale poll result is not dispatched */
} Watch;

typedef struct {
    int track_fd, oom_fd;   /* -1 when absent */
    char kill_mode[16];
    char *oom_file;
    int has_rlimit_as;
    unsigned long long rlimit_as;
    char **service_argv;    /* the image's entrypoint + Harbor's command, or NULL */
    pid_t service;          /* its session, or 0 */
    char **env;             /* the sandbox's environment, NULL-ended ("K=V") */
    Command *commands;      /* until answered */
    struct Shell *shells;
    char **leftover;        /* per-command cgroups still holding processes */
    size_t n_leftover;
    Watch *watches;
    size_t n_watches;
    unsigned gen;
    Buf inbox;
} Helper;

extern Helper H;

void watch(int fd, int kind, void *owner);
void unwatch(int fd);
int watched(int fd);
void send_frame(const Buf *head, const char *blob, size_t blob_len);
void send_id(long long id, const char *error); /* {"id": id} or {"id": id, "error": ...} */
void reap(void);
void kill_proc(Proc *p);
/* Every process, the service's included; 0, or -1 with err filled when the service was to
 * start again and could not. */
int kill_all(int restart_service, Buf *err);
void remove_cgroups_leftover(void);
void add_leftover(const char *cgroup);
/* Reads what an output pipe holds; 1 if there was data or its end, 0 if nothing by now. */
int on_output(int fd);

/* Start argv as the request asks (cwd, env, user), marked or in a cgroup of its own named
 * after it. Returns 0, or -1 with err filled: *not_started set when the command could not run
 * (answered like a shell: 127/126 with the reason on stderr), else the request's error. */
typedef struct {
    pid_t pid;
    int in_fd, out_fd, err_fd;
    char cgroup[32];
} Launched;

int launch(const Json *head, char *const argv[], int with_stdin, int keep_fds[2],
           Launched *out, Buf *err, int *not_started, int *err_errno);
void answer_not_started(long long id, int err_errno, const Buf *reason);

/* -- spawn.c --------------------------------------------------------------------------------- */

/* uid/gid for a user (name or id, via the sandbox's /etc/passwd); -1 each for none. Sets
 * *home (malloc'd) when the passwd entry was found. 0, or -1 with err filled. */
int resolve_user(const Json *user, uid_t *uid, gid_t *gid, char **home, Buf *err);
/* fork+exec in a new session; 0, or -1 with errno_out and message (why it could not start). */
int spawn(char *const argv[], const char *cwd, char *const envp[], uid_t uid, gid_t gid,
          int with_stdin, int procs_fd, const int keep_fds[2], int *pid, int *in_w,
          int *out_r, int *err_r, int *errno_out, Buf *message);
/* execve argv[0] searched in envp's PATH; returns only on failure (errno set). */
void execute(char *const argv[], char *const envp[]);
/* The service (H.service_argv) in a session of its own; its pid, or -1 with err filled. */
pid_t start_service(Buf *err);

/* -- kill.c ---------------------------------------------------------------------------------- */

typedef int (*Selector)(pid_t pid, pid_t ppid, pid_t pgrp, pid_t sid, void *ctx);
void kill_cgroup(int track_fd, const char *mode, const char *name);
/* Remove a command's cgroup and those below it as far as they are empty; whether it is gone. */
int remove_cgroup_tree(int track_fd, const char *name);
/* SIGKILL the selected processes and their descendants (never pid 1), call after_kill (a
 * thaw: see thaw_below) unless NULL, and wait. */
void kill_tree(Selector selected, void *ctx, void (*after_kill)(void));
/* Thaw every cgroup below the tracking cgroup, parents first: a process killed in a frozen
 * cgroup dies only once it is thawed (v1). */
void thaw_below(int track_fd, const char *mode);
long long oom_kills(void);
int environ_has(pid_t pid, const char *entry, size_t entry_len);

/* -- shell.c --------------------------------------------------------------------------------- */

typedef struct Shell {
    Proc proc;
    char *name;
    Buf state;
    int ended, has_ended;   /* the bash's status, once reaped and not yet settled */
    int has_run;
    Capture run;            /* the current run's output */
    long long run_id;
    long long run_oom_before;
    char token[17];
    int messages, reports;  /* message pipe (write end), status pipe (read end) */
    int outputs[2];         /* output pipes: stdout, stderr; -1 once at EOF */
    Buf outbox, inbox;
    size_t scanned;
    int saving, exiting;
    char *waiting_head;     /* a run for the next bash: its request's JSON and command */
    size_t waiting_head_len;
    char *waiting_cmd;
    size_t waiting_len;
    struct Shell *next;
} Shell;

Shell *shell_get(const char *name, int create);
void shell_remove(Shell *s);
int shell_start_run(Shell *s, const char *head_text, size_t head_len, const char *command,
                    size_t len, Buf *err);
void shell_free(Shell *s);
void shell_close(Shell *s);
void shell_cancel(Shell *s, long long request_id);
void shell_settle(Shell *s);
void shell_take(Shell *s, int fd, const char *data, size_t n);
void shell_on_status(Shell *s);
void shell_flush(Shell *s);

#endif
