/* The sandbox probe's parts (see probe.c). */
#ifndef PALAESTRA_PROBE_H
#define PALAESTRA_PROBE_H
#include <stddef.h>

/* A growing list of strings: what a check found the sandbox can do. */
struct list {
    char **items;
    size_t n, cap;
};

extern const char *only;
void add(struct list *l, const char *item);
/* Print one line (and free exposed's items). */
void emit(const char *check, const char *result, struct list *exposed);
/* Whether check runs (its name starts with the prefix asked for). */
int wanted(const char *check);
/* The checks that call a syscall (syscalls.c). */
void syscall_checks(void);

#endif
