/* Buffers, the clock, whole reads and writes, and the output capture of a command. */
#include "helper.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        static const char msg[] = "palaestra-helper: out of memory\n";
        (void)!write(2, msg, sizeof msg - 1);
        _exit(70);
    }
    return p;
}

void *xcalloc(size_t n, size_t size) {
    void *p = xmalloc(n * size);
    memset(p, 0, n * size);
    return p;
}

char *xstrndup(const char *s, size_t n) {
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

void buf_add(Buf *b, const void *data, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown) xmalloc((size_t)-1); /* reports and exits */
        b->data = grown;
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = 0;
}

void buf_adds(Buf *b, const char *s) { buf_add(b, s, strlen(s)); }

void buf_addf(Buf *b, const char *fmt, ...) {
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof small) {
        buf_add(b, small, (size_t)n);
        return;
    }
    char *big = xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    buf_add(b, big, (size_t)n);
    free(big);
}

void buf_drop(Buf *b, size_t n) {
    if (n >= b->len) {
        b->len = 0;
    } else {
        memmove(b->data, b->data + n, b->len - n);
        b->len -= n;
    }
    if (b->data) b->data[b->len] = 0;
}

void buf_free(Buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void write_all(int fd, const void *data, size_t n) {
    const char *p = data;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            _exit(0); /* the host is gone: exiting takes the sandbox down with us */
        }
        p += w;
        n -= (size_t)w;
    }
}

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

char *read_at(int dir_fd, const char *path) {
    int fd = openat(dir_fd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    Buf b = {0};
    char chunk[4096];
    for (;;) {
        ssize_t r = read(fd, chunk, sizeof chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        buf_add(&b, chunk, (size_t)r);
    }
    close(fd);
    if (!b.data) buf_add(&b, "", 0);
    return b.data;
}

int write_at(int dir_fd, const char *path, const char *text) {
    int fd = openat(dir_fd, path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t w = write(fd, text, strlen(text));
    int saved = errno;
    close(fd);
    errno = saved;
    return w < 0 ? -1 : 0;
}

void fail_request(Buf *err, const char *kind, const char *fmt, ...) {
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    err->len = 0;
    buf_addf(err, "%s: %s", kind, text);
}

/* -- capture --------------------------------------------------------------------------------- */

void capture_take(Capture *c, int stream, const char *data, size_t n) {
    Buf *b = &c->out[stream];
    size_t room = c->limit > b->len ? c->limit - b->len : 0;
    if (n > room) {
        c->truncated = 1;
        n = room;
    }
    buf_add(b, data, n);
}

void capture_answer(Capture *c, long long id, int has_code, int code, int timed_out, int oom) {
    Buf head = {0};
    buf_addf(&head, "{\"id\":%lld,\"exit_code\":", id);
    if (has_code)
        buf_addf(&head, "%d", code);
    else
        buf_adds(&head, "null");
    buf_addf(&head, ",\"timed_out\":%s,\"truncated\":%s,\"oom_killed\":%s,\"stdout_len\":%zu}",
             timed_out ? "true" : "false", c->truncated ? "true" : "false",
             oom ? "true" : "false", c->out[0].len);
    Buf blob = {0};
    buf_add(&blob, c->out[0].data, c->out[0].len);
    buf_add(&blob, c->out[1].data, c->out[1].len);
    send_frame(&head, blob.data, blob.len);
    buf_free(&head);
    buf_free(&blob);
}

void capture_free(Capture *c) {
    buf_free(&c->out[0]);
    buf_free(&c->out[1]);
}
