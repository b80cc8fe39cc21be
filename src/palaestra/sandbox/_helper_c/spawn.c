/* Starting a command: as which user, in a new session, in its cgroup, under its rlimit
 * (the Python helper's _helper/spawn.py). */
#include "helper.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static int all_digits(const char *s) {
    if (!*s) return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return 0;
    return 1;
}

/* A uid or gid: digits only, below (uid_t)-1 (no wrap-around to 0 from a crafted passwd). */
static int valid_id(const char *s) {
    return all_digits(s) && strlen(s) <= 10 && strtoull(s, NULL, 10) < 0xFFFFFFFFull;
}

/* The first /etc/passwd line naming the user (by name, or by uid when name is NULL). */
static int passwd_entry(const char *name, long long uid, uid_t *u, gid_t *g, char **home) {
    char *text = read_at(AT_FDCWD, "/etc/passwd");
    if (!text) return 0;
    int found = 0;
    for (char *line = text; line && *line && !found;) {
        char *next = strchr(line, '\n');
        if (next) *next++ = 0;
        char *fields[7];
        int n = 0;
        for (char *f = line; n < 7;) {
            fields[n++] = f;
            char *colon = strchr(f, ':');
            if (!colon) break;
            *colon = 0;
            f = colon + 1;
        }
        if (n == 7 && valid_id(fields[2]) && valid_id(fields[3])) {
            long long line_uid = strtoll(fields[2], NULL, 10);
            if (name ? strcmp(fields[0], name) == 0 : line_uid == uid) {
                *u = (uid_t)line_uid;
                *g = (gid_t)strtoll(fields[3], NULL, 10);
                *home = strdup(fields[5]);
                found = 1;
            }
        }
        line = next;
    }
    free(text);
    return found;
}

int resolve_user(const Json *user, uid_t *uid, gid_t *gid, char **home, Buf *err) {
    *uid = (uid_t)-1, *gid = (gid_t)-1, *home = NULL;
    if (!user || user->type == J_NULL) return 0;
    const char *name = NULL;
    long long id = 0;
    if (user->type == J_STR && !all_digits(user->str)) {
        name = user->str;
    } else if (user->type == J_STR && valid_id(user->str)) {
        id = strtoll(user->str, NULL, 10);
    } else if (user->type == J_NUM && user->is_int && user->integer >= 0 &&
               user->integer < 0xFFFFFFFFll) {
        id = user->integer;
    } else {
        fail_request(err, "ValueError", "a user is a name or an id below 4294967295");
        return -1;
    }
    if (passwd_entry(name, id, uid, gid, home)) return 0;
    if (name) {
        Buf quoted = {0};
        json_quote(&quoted, name, strlen(name));
        quoted.data[0] = quoted.data[quoted.len - 1] = '\'';
        fail_request(err, "ValueError", "no user %s in the sandbox's /etc/passwd", quoted.data);
        buf_free(&quoted);
        return -1;
    }
    *uid = (uid_t)id, *gid = (gid_t)id;
    return 0;
}

void execute(char *const argv[], char *const envp[]) {
    if (strchr(argv[0], '/')) {
        execve(argv[0], argv, envp);
        return;
    }
    const char *path = "/usr/bin:/bin";
    for (char *const *e = envp; *e; e++)
        if (strncmp(*e, "PATH=", 5) == 0) path = *e + 5;
    int denied = 0;
    char candidate[4096];
    for (const char *dir = path;;) {
        const char *colon = strchr(dir, ':');
        size_t n = colon ? (size_t)(colon - dir) : strlen(dir);
        if (snprintf(candidate, sizeof candidate, "%.*s/%s", (int)(n ? n : 1), n ? dir : ".",
                     argv[0]) < (int)sizeof candidate) {
            execve(candidate, argv, envp);
            if (errno == EACCES || errno == EPERM) denied = errno;
            else if (errno != ENOENT && errno != ENOTDIR) return;
        }
        if (!colon) break;
        dir = colon + 1;
    }
    errno = denied ? denied : ENOENT;
}

static void reset_signals(void) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGXFSZ, SIG_DFL);
}

/* In the child: tell the parent why it could not start, and end. */
static void child_failed(int fail_w, const char *what, const char *subject) {
    int code = errno;
    char message[4200];
    int n = snprintf(message, sizeof message, "%d:%s%s%s", code, subject ? subject : "",
                     subject ? ": " : "", what);
    (void)!write(fail_w, message, (size_t)(n < (int)sizeof message ? n : (int)sizeof message - 1));
    _exit(127);
}

int spawn(char *const argv[], const char *cwd, char *const envp[], uid_t uid, gid_t gid,
          int with_stdin, int procs_fd, const int keep_fds[2], int *pid, int *in_w,
          int *out_r, int *err_r, int *errno_out, Buf *message) {
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, fail[2] = {-1, -1};
    int ok = with_stdin ? pipe2(in, O_CLOEXEC) == 0
                        : (in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;
    ok = ok && pipe2(out, O_CLOEXEC) == 0 && pipe2(err, O_CLOEXEC) == 0 &&
         pipe2(fail, O_CLOEXEC) == 0;
    pid_t child = ok ? fork() : -1;
    if (child == 0) {
        setsid();
        if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0)
            child_failed(fail[1], "cannot set up its pipes", NULL);
        for (int i = 0; i < 2; i++)
            if (keep_fds && keep_fds[i] >= 0) fcntl(keep_fds[i], F_SETFD, 0);
        if (procs_fd >= 0 && write(procs_fd, "0", 1) < 0)
            child_failed(fail[1], "cannot enter its cgroup", NULL);
        if (H.has_rlimit_as) {
            struct rlimit lim = {H.rlimit_as, H.rlimit_as};
            if (setrlimit(RLIMIT_AS, &lim) < 0) child_failed(fail[1], "setrlimit", NULL);
        }
        reset_signals();
        if (chdir(cwd) < 0) child_failed(fail[1], strerror(errno), cwd);
        if (gid != (gid_t)-1 && (setgroups(0, NULL) < 0 || setregid(gid, gid) < 0))
            child_failed(fail[1], strerror(errno), "cannot change group");
        if (uid != (uid_t)-1 && setreuid(uid, uid) < 0)
            child_failed(fail[1], strerror(errno), "cannot change user");
        execute(argv, envp);
        child_failed(fail[1], errno == ENOENT ? "command not found" : strerror(errno), argv[0]);
    }
    int saved = errno;
    int *ends[] = {&in[0], &out[1], &err[1], &fail[1]};
    for (size_t i = 0; i < 4; i++)
        if (*ends[i] >= 0) close(*ends[i]);
    if (child < 0) {
        int *rest[] = {&in[1], &out[0], &err[0], &fail[0]};
        for (size_t i = 0; i < 4; i++)
            if (*rest[i] >= 0) close(*rest[i]);
        *errno_out = saved;
        message->len = 0;
        buf_addf(message, "cannot start %s: %s", argv[0], strerror(saved));
        return -1;
    }
    Buf failure = {0};
    char chunk[1024];
    for (;;) {
        ssize_t r = read(fail[0], chunk, sizeof chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        buf_add(&failure, chunk, (size_t)r);
    }
    close(fail[0]);
    if (failure.len) {
        while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {
        }
        if (in[1] >= 0) close(in[1]);
        close(out[0]);
        close(err[0]);
        char *colon = strchr(failure.data, ':');
        *errno_out = atoi(failure.data);
        if (!*errno_out) *errno_out = EINVAL;
        message->len = 0;
        buf_adds(message, colon ? colon + 1 : failure.data);
        buf_free(&failure);
        return -1;
    }
    *pid = child, *in_w = in[1], *out_r = out[0], *err_r = err[0];
    return 0;
}

pid_t start_service(Buf *err) {
    char *const *argv = H.service_argv;
    int fail[2];
    if (pipe2(fail, O_CLOEXEC) < 0) {
        fail_request(err, "OSError", "cannot start the service: %s", strerror(errno));
        return -1;
    }
    pid_t child = fork();
    if (child == 0) {
        setsid();
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null >= 0 && null != 0) dup2(null, 0);
        dup2(2, 1);
        reset_signals();
        execute(argv, H.env);
        child_failed(fail[1], strerror(errno), argv[0]);
    }
    int saved = errno;
    close(fail[1]);
    char why[512] = {0};
    ssize_t r = 0;
    while (child > 0 && (r = read(fail[0], why, sizeof why - 1)) < 0 && errno == EINTR) {
    }
    close(fail[0]);
    if (child < 0 || r > 0) {
        if (child > 0)
            while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {
            }
        char *colon = strchr(why, ':');
        fail_request(err, "OSError", "cannot start the service %s: %s", argv[0],
                     child < 0 ? strerror(saved) : colon ? colon + 1 : why);
        return -1;
    }
    return child;
}
