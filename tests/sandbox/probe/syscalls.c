/* The probe's syscall checks: each calls the real syscall, with arguments that do nothing
 * harmful when it is allowed, and reports its errno (see probe.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe.h"

#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif


/* An errno that means the kernel (or a seccomp filter) refused the call itself; any other
 * outcome means the call reached what it asked for. */
static int refusal(int err) {
    return err == EPERM || err == EACCES || err == ENOSYS || err == EROFS || err == ENOSPC ||
           err == EUSERS;
}

/* Report a syscall's outcome: ret and err as the call left them. */
static void outcome(const char *check, long ret, int err) {
    char text[96];
    struct list exposed = {0};
    if (ret != -1) {
        snprintf(text, sizeof text, "allowed");
    } else if (err == ENOSYS) { /* not in this kernel, or a filter says so: unreachable */
        snprintf(text, sizeof text, "unavailable (ENOSYS)");
    } else if (refusal(err)) {
        snprintf(text, sizeof text, "denied (%s)", strerrorname_np(err));
    } else {
        snprintf(text, sizeof text, "allowed (%s)", strerrorname_np(err));
    }
    if (ret != -1 || !refusal(err))
        add(&exposed, "allowed");
    emit(check, text, &exposed);
}

/* Run fn in a forked child (what it changes dies with it); its result: the child's errno, or 0
 * when the call succeeded. */
static void in_child(const char *check, int (*fn)(void)) {
    if (!wanted(check))
        return;
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10);
        _exit(fn());
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        emit(check, "probe failed (child did not exit)", NULL);
        return;
    }
    int err = WEXITSTATUS(status);
    outcome(check, err ? -1 : 0, err);
}

#define CALL(expr) ((expr) == -1 ? errno : 0)

static char scratch[64] = "/tmp/.palaestra-probe-XXXXXX";

static int do_unshare_user(void) { return CALL(unshare(CLONE_NEWUSER)); }
static int do_unshare_mount(void) { return CALL(unshare(CLONE_NEWNS)); }
static int do_unshare_net(void) { return CALL(unshare(CLONE_NEWNET)); }
static int do_unshare_pid(void) { return CALL(unshare(CLONE_NEWPID)); }
static int do_unshare_uts(void) { return CALL(unshare(CLONE_NEWUTS)); }
static int do_unshare_ipc(void) { return CALL(unshare(CLONE_NEWIPC)); }
static int do_unshare_cgroup(void) { return CALL(unshare(CLONE_NEWCGROUP)); }
static int do_mount(void) { return CALL(mount("probe", scratch, "tmpfs", 0, "size=16k")); }

static int write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    int err = write(fd, text, strlen(text)) < 0 ? errno : 0;
    close(fd);
    return err;
}

/* `unshare -U -r` then mount: the way around a missing CAP_SYS_ADMIN. */
static int do_mount_in_userns(void) {
    char map[64];
    uid_t uid = geteuid();
    gid_t gid = getegid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) == -1)
        return errno;
    write_file("/proc/self/setgroups", "deny");
    snprintf(map, sizeof map, "0 %u 1", (unsigned)uid);
    int err = write_file("/proc/self/uid_map", map);
    if (err)
        return err;
    snprintf(map, sizeof map, "0 %u 1", (unsigned)gid);
    write_file("/proc/self/gid_map", map);
    return CALL(mount("probe", scratch, "tmpfs", 0, "size=16k"));
}

static int do_clone3_userns(void) {
    uint64_t args[11] = {0}; /* struct clone_args: flags, pidfd, child_tid, parent_tid, exit */
    args[0] = CLONE_NEWUSER;
    args[4] = SIGCHLD;
    long pid = syscall(SYS_clone3, args, 8 * 8);
    if (pid == 0)
        _exit(0);
    if (pid == -1)
        return errno;
    waitpid((pid_t)pid, NULL, 0);
    return 0;
}

static int do_setns(void) {
    int fd = open("/proc/self/ns/uts", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    return CALL(setns(fd, CLONE_NEWUTS));
}

static int do_personality(void) {
    return CALL(syscall(SYS_personality, 0x0400000 /* READ_IMPLIES_EXEC */));
}

static int do_chroot(void) { return CALL(chroot("/")); }
#if defined(__x86_64__)
static int do_ioperm(void) { return CALL(syscall(SYS_ioperm, 0x80, 1, 1)); }
static int do_iopl(void) { return CALL(syscall(SYS_iopl, 3)); }
#endif

static void call(const char *check, long ret) {
    int err = errno;
    if (wanted(check))
        outcome(check, ret, err);
}

static void mknods(void) {
    char path[96];
    snprintf(path, sizeof path, "%s/node", scratch);
    if (wanted("mknod block device")) {
        long ret = mknod(path, S_IFBLK | 0600, makedev(8, 0));
        outcome("mknod block device", ret, errno);
        unlink(path);
    }
    if (wanted("mknod char device")) {
        long ret = mknod(path, S_IFCHR | 0600, makedev(1, 3));
        outcome("mknod char device", ret, errno);
        unlink(path);
    }
}

static void keyring_and_kernel(void) {
    char name[256] = "";
    gethostname(name, sizeof name - 1);
    call("sethostname", sethostname(name, strlen(name)));
    call("keyctl", syscall(SYS_keyctl, 0 /* GET_KEYRING_ID */, -3 /* SESSION */, 0));
    if (wanted("bpf")) {
        union bpf_attr attr;
        memset(&attr, 0, sizeof attr);
        attr.map_type = BPF_MAP_TYPE_ARRAY;
        attr.key_size = attr.value_size = 4;
        attr.max_entries = 1;
        long fd = syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr);
        outcome("bpf", fd, errno);
        if (fd >= 0)
            close((int)fd);
    }
    if (wanted("perf_event_open")) {
        struct perf_event_attr attr;
        memset(&attr, 0, sizeof attr);
        attr.size = sizeof attr;
        attr.type = PERF_TYPE_SOFTWARE;
        attr.config = PERF_COUNT_SW_TASK_CLOCK;
        attr.disabled = attr.exclude_kernel = attr.exclude_hv = 1;
        long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
        outcome("perf_event_open", fd, errno);
        if (fd >= 0)
            close((int)fd);
    }
    /* Flags no architecture has: refused after the capability check, loads nothing. */
    call("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0xfffe0000UL));
    call("init_module", syscall(SYS_init_module, NULL, 0, ""));
    call("finit_module", syscall(SYS_finit_module, -1, "", 0));
    call("acct", syscall(SYS_acct, "/nonexistent/palaestra-probe"));
    call("swapon", syscall(SYS_swapon, "/nonexistent/palaestra-probe", 0));
    call("reboot", syscall(SYS_reboot, 0, 0, 0, NULL)); /* bad magic: EINVAL once allowed */
    char buf[64];
    call("syslog (read the kernel log)", syscall(SYS_syslog, 3 /* READ_ALL */, buf, sizeof buf));
    if (wanted("userfaultfd")) {
        long fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
        outcome("userfaultfd", fd, errno);
        if (fd >= 0)
            close((int)fd);
    }
}

/* The "shocker" escape: a file handle opened without a path, past any mount. */
static void open_by_handle(void) {
    if (!wanted("open_by_handle_at"))
        return;
    struct {
        struct file_handle fh;
        unsigned char bytes[MAX_HANDLE_SZ];
    } h;
    int mount_id;
    h.fh.handle_bytes = MAX_HANDLE_SZ;
    if (name_to_handle_at(AT_FDCWD, "/", &h.fh, &mount_id, 0) == -1) {
        h.fh.handle_bytes = 8; /* a made-up handle: the capability check comes first */
        h.fh.handle_type = 1;
        memset(h.fh.f_handle, 0, 8);
    }
    int root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    long fd = syscall(SYS_open_by_handle_at, root, &h.fh, O_RDONLY | O_CLOEXEC);
    outcome("open_by_handle_at", fd, errno);
    if (fd >= 0)
        close((int)fd);
    close(root);
}

/* ptrace of a process the probe did not start: an orphan (reparented away from the probe, as a
 * service or another session's process is), and pid 1. */
static void ptraces(void) {
    if (wanted("ptrace another process")) {
        int pipefd[2];
        pid_t target = -1;
        if (pipe(pipefd) == 0) {
            pid_t child = fork();
            if (child == 0) {
                pid_t grandchild = fork();
                if (grandchild == 0) {
                    alarm(30);
                    for (;;)
                        pause();
                }
                if (write(pipefd[1], &grandchild, sizeof grandchild) < 0)
                    _exit(1);
                _exit(0);
            }
            if (child > 0) {
                if (read(pipefd[0], &target, sizeof target) != sizeof target)
                    target = -1;
                waitpid(child, NULL, 0);
            }
            close(pipefd[0]);
            close(pipefd[1]);
        }
        if (target > 0) {
            long ret = ptrace(PTRACE_SEIZE, target, 0, 0);
            int err = errno;
            kill(target, SIGKILL);
            if (ret == 0)
                waitpid(target, NULL, __WALL);
            outcome("ptrace another process", ret, err);
        } else {
            emit("ptrace another process", "probe failed (no target)", NULL);
        }
    }
    if (wanted("ptrace pid 1")) {
        long ret = ptrace(PTRACE_SEIZE, 1, 0, 0);
        int err = errno;
        if (ret == 0)
            ptrace(PTRACE_DETACH, 1, 0, 0);
        outcome("ptrace pid 1", ret, err);
    }
}

void syscall_checks(void) {
    in_child("unshare user namespace", do_unshare_user);
    in_child("unshare mount namespace", do_unshare_mount);
    in_child("unshare network namespace", do_unshare_net);
    in_child("unshare pid namespace", do_unshare_pid);
    in_child("unshare uts namespace", do_unshare_uts);
    in_child("unshare ipc namespace", do_unshare_ipc);
    in_child("unshare cgroup namespace", do_unshare_cgroup);
    in_child("clone3 with CLONE_NEWUSER", do_clone3_userns);
    in_child("setns", do_setns);
    int have_scratch = mkdtemp(scratch) != NULL;
    if (have_scratch) {
        in_child("mount tmpfs", do_mount);
        in_child("mount tmpfs in a new user namespace", do_mount_in_userns);
        mknods();
        umount2(scratch, MNT_DETACH); /* only if a mount above was allowed */
        rmdir(scratch);
    } else if (wanted("m")) {
        emit("mount tmpfs", "probe failed (no scratch directory in /tmp)", NULL);
    }
    keyring_and_kernel();
    open_by_handle();
    ptraces();
    in_child("personality READ_IMPLIES_EXEC", do_personality);
#if defined(__x86_64__)
    in_child("ioperm", do_ioperm);
    in_child("iopl", do_iopl);
#endif
    in_child("chroot", do_chroot);
}
