/* What a process in a sandbox may do to the kernel: one JSON line per check.
 *
 * Built statically with the host's cc (tests/sandbox/probe/__init__.py) so that it runs in any
 * sandbox, whatever its image holds. Every syscall check calls the real syscall, with arguments
 * that do nothing harmful when the call is allowed (a bad magic, a missing path, the process's
 * own namespace, a fork that exits), and records its errno. Nothing is ever written: a file's
 * check opens it for writing and closes it.
 *
 * Each line: {"check": name, "result": text, "exposed": [what the sandbox can do]}. A sandbox is
 * no weaker than another on a line when its "exposed" is a subset of the other's.
 *
 * argv[1], when given, is a prefix: only the checks whose name starts with it run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probe.h"

const char *only = "";

/* ---- output -------------------------------------------------------------------------------- */

static void json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

void add(struct list *l, const char *item) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->items = realloc(l->items, l->cap * sizeof *l->items);
        if (!l->items)
            abort();
    }
    l->items[l->n++] = strdup(item);
}

void emit(const char *check, const char *result, struct list *exposed) {
    printf("{\"check\": ");
    json_string(check);
    printf(", \"result\": ");
    json_string(result);
    printf(", \"exposed\": [");
    for (size_t i = 0; exposed && i < exposed->n; i++) {
        if (i)
            printf(", ");
        json_string(exposed->items[i]);
        free(exposed->items[i]);
    }
    printf("]}\n");
    fflush(stdout);
    if (exposed)
        free(exposed->items);
}

int wanted(const char *check) { return strncmp(check, only, strlen(only)) == 0; }

/* ---- files --------------------------------------------------------------------------------- */

/* Every file under path that opens for writing (never written); depth-limited, no links. */
static void walk(const char *path, int depth, struct list *writable, int *seen) {
    DIR *dir = opendir(path);
    if (!dir)
        return;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char child[4096];
        snprintf(child, sizeof child, "%s/%s", path, e->d_name);
        unsigned char type = e->d_type;
        struct stat st;
        if (type == DT_UNKNOWN && lstat(child, &st) == 0) /* a file system without d_type */
            type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
        if (type == DT_DIR && depth < 12) {
            walk(child, depth + 1, writable, seen);
        } else if (type == DT_REG) {
            ++*seen;
            int fd = open(child, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
            if (fd >= 0) {
                add(writable, child);
                close(fd);
            }
        }
    }
    closedir(dir);
}

static void writes_under(const char *check, const char *path) {
    if (!wanted(check))
        return;
    char text[160];
    struct list writable = {0};
    struct stat st;
    int seen = 0;
    if (stat(path, &st) == -1) {
        snprintf(text, sizeof text, "absent");
    } else if (S_ISDIR(st.st_mode)) {
        walk(path, 0, &writable, &seen);
        if (writable.n)
            snprintf(text, sizeof text, "%zu of %d files writable", writable.n, seen);
        else
            snprintf(text, sizeof text, "none of %d files writable", seen);
    } else {
        int fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd >= 0) {
            add(&writable, path);
            close(fd);
            snprintf(text, sizeof text, "writable");
        } else {
            snprintf(text, sizeof text, "denied (%s)", strerrorname_np(errno));
        }
    }
    emit(check, text, &writable);
}

/* What reading path shows: its bytes, or a directory's entries. Docker masks these. */
static void reads(const char *path) {
    char check[128], text[96];
    snprintf(check, sizeof check, "read %s", path);
    if (!wanted(check))
        return;
    struct list exposed = {0};
    struct stat st;
    if (stat(path, &st) == -1) {
        snprintf(text, sizeof text, "absent");
    } else if (S_ISDIR(st.st_mode)) {
        DIR *dir = opendir(path);
        int n = 0;
        struct dirent *e;
        while (dir && (e = readdir(dir)))
            n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
        if (!dir)
            snprintf(text, sizeof text, "denied (%s)", strerrorname_np(errno));
        else
            snprintf(text, sizeof text, n ? "%d entries" : "empty", n);
        if (dir)
            closedir(dir);
        if (n)
            add(&exposed, "readable");
    } else {
        int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        char buf[4096];
        ssize_t got = fd < 0 ? -1 : read(fd, buf, sizeof buf);
        if (fd < 0 || got < 0)
            snprintf(text, sizeof text, "denied (%s)", strerrorname_np(errno));
        else
            snprintf(text, sizeof text, got ? "readable (%zd+ bytes)" : "empty", got);
        if (got > 0)
            add(&exposed, "readable");
        if (fd >= 0)
            close(fd);
    }
    emit(check, text, &exposed);
}

/* ---- credentials --------------------------------------------------------------------------- */

static const char *CAPS[] = {
    "chown", "dac_override", "dac_read_search", "fowner", "fsetid", "kill", "setgid", "setuid",
    "setpcap", "linux_immutable", "net_bind_service", "net_broadcast", "net_admin", "net_raw",
    "ipc_lock", "ipc_owner", "sys_module", "sys_rawio", "sys_chroot", "sys_ptrace", "sys_pacct",
    "sys_admin", "sys_boot", "sys_nice", "sys_resource", "sys_time", "sys_tty_config", "mknod",
    "lease", "audit_write", "audit_control", "setfcap", "mac_override", "mac_admin", "syslog",
    "wake_alarm", "block_suspend", "audit_read", "perfmon", "bpf", "checkpoint_restore",
};

/* The value of a "Name:" line of /proc/self/status, or NULL. */
static char *status_field(const char *name, char *out, size_t size) {
    FILE *f = fopen("/proc/self/status", "re");
    char line[512];
    size_t len = strlen(name);
    char *found = NULL;
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, name, len) && line[len] == ':') {
            snprintf(out, size, "%s", line + len + 1 + strspn(line + len + 1, " \t"));
            out[strcspn(out, "\n")] = 0;
            found = out;
            break;
        }
    }
    if (f)
        fclose(f);
    return found;
}

static void capabilities(const char *check, const char *field) {
    if (!wanted(check))
        return;
    char value[64], text[96];
    struct list exposed = {0};
    if (!status_field(field, value, sizeof value)) {
        emit(check, "probe failed (no such status line)", NULL);
        return;
    }
    unsigned long long mask = strtoull(value, NULL, 16);
    int n = 0;
    for (unsigned bit = 0; bit < 64; bit++) {
        if (!(mask >> bit & 1))
            continue;
        n++;
        char name[32];
        if (bit < sizeof CAPS / sizeof *CAPS)
            snprintf(name, sizeof name, "cap_%s", CAPS[bit]);
        else
            snprintf(name, sizeof name, "cap_%u", bit);
        add(&exposed, name);
    }
    snprintf(text, sizeof text, "%d capabilities (%s)", n, value);
    emit(check, text, &exposed);
}

static void modes(void) {
    char value[64], text[96];
    if (wanted("seccomp mode")) {
        struct list exposed = {0};
        int mode = status_field("Seccomp", value, sizeof value) ? atoi(value) : -1;
        snprintf(text, sizeof text, "%d (%s)", mode,
                 mode == 2 ? "filter" : mode == 1 ? "strict" : mode == 0 ? "none" : "unknown");
        if (mode == 0 || mode == -1)
            add(&exposed, "syscalls unfiltered");
        emit("seccomp mode", text, &exposed);
    }
    if (wanted("no_new_privs")) {
        struct list exposed = {0};
        int nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
        snprintf(text, sizeof text, "%d", nnp);
        if (nnp != 1)
            add(&exposed, "exec can gain privileges");
        emit("no_new_privs", text, &exposed);
    }
}

/* ---- main ---------------------------------------------------------------------------------- */

/* Docker's masked paths (moby oci/defaults.go), read. */
static const char *MASKED[] = {
    "/proc/asound",     "/proc/acpi",       "/proc/kcore",        "/proc/keys",
    "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
    "/proc/scsi",       "/sys/firmware",    "/sys/devices/virtual/powercap",
};

int main(int argc, char **argv) {
    if (argc > 1)
        only = argv[1];
    capabilities("capabilities: effective", "CapEff");
    capabilities("capabilities: bounding", "CapBnd");
    capabilities("capabilities: permitted", "CapPrm");
    modes();
    /* Docker's read-only paths (moby oci/defaults.go), each file opened for writing. */
    writes_under("write /proc/sys", "/proc/sys");
    writes_under("write /proc/sysrq-trigger", "/proc/sysrq-trigger");
    writes_under("write /proc/bus", "/proc/bus");
    writes_under("write /proc/fs", "/proc/fs");
    writes_under("write /proc/irq", "/proc/irq");
    writes_under("write /sys/fs/cgroup", "/sys/fs/cgroup");
    for (size_t i = 0; i < sizeof MASKED / sizeof *MASKED; i++)
        reads(MASKED[i]);
    syscall_checks();
    return 0;
}

