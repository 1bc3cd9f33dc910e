/* SPDX-License-Identifier: MIT */
/*
 * A minimal test runner: TEST(name) defines a case, RUN_TESTS() runs them all and prints the
 * plain closing line "N passed, N failed". A failed CHECK ends its case and reports file:line.
 */
#ifndef STRATA_TEST_H
#define STRATA_TEST_H

#include <linux/capability.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

typedef void (*st_test_fn)(void);
typedef struct {
    const char *name;
    st_test_fn fn;
} st_test_case_t;

#define ST_MAX_TESTS 256
static st_test_case_t st_tests[ST_MAX_TESTS];
static int st_ntests;
static jmp_buf st_test_jmp;

#define TEST(name)                                                                                 \
    static void test_##name(void);                                                                 \
    __attribute__((constructor)) static void reg_##name(void)                                      \
    {                                                                                              \
        st_tests[st_ntests++] = (st_test_case_t){#name, test_##name};                              \
    }                                                                                              \
    static void test_##name(void)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "  %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);             \
            longjmp(st_test_jmp, 1);                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_EQ(a, b)                                                                             \
    do {                                                                                           \
        long long va_ = (long long)(a), vb_ = (long long)(b);                                      \
        if (va_ != vb_) {                                                                          \
            fprintf(stderr, "  %s:%d: CHECK_EQ failed: %s == %lld, %s == %lld\n", __FILE__,        \
                    __LINE__, #a, va_, #b, vb_);                                                   \
            longjmp(st_test_jmp, 1);                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_STR(a, b) CHECK(strcmp((a), (b)) == 0)

/* True where every test must run in full (CI=true, or STRATA_NO_SKIP=1 as for the e2e tests):
 * there a case that cannot do what it is for fails instead of passing with a note. */
static inline int st_no_skip(void)
{
    const char *ci = getenv("CI"), *ns = getenv("STRATA_NO_SKIP");
    return (ci && strcmp(ci, "true") == 0) || (ns && strcmp(ns, "1") == 0);
}

/* Says why the case cannot be exercised here: a note (and the case goes on) on a developer's
 * machine, a failure of the case under st_no_skip(). */
#define NOT_EXERCISED(...)                                                                         \
    do {                                                                                           \
        if (st_no_skip()) {                                                                        \
            fprintf(stderr, "  %s:%d: cannot run here, and CI runs every test: ", __FILE__,        \
                    __LINE__);                                                                     \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            longjmp(st_test_jmp, 1);                                                               \
        }                                                                                          \
        printf("# not exercised: ");                                                               \
        printf(__VA_ARGS__);                                                                       \
        putchar('\n');                                                                             \
    } while (0)

/* ---- cases run in a child process of their own: a case that changes the process's limits,
 * scheduling policy or capabilities leaves the rest of the file alone ---- */

/* A CHECK in such a child: says what failed and ends the child with status 1. */
#define KID_CHECK(cond)                                                                            \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "  %s:%d: CHECK failed in the child: %s\n", __FILE__, __LINE__,        \
                    #cond);                                                                        \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)
/* The child could not do what the case is for here (the case says why, NOT_EXERCISED). */
#define KID_NOT_EXERCISED() _exit(2)

/* Runs fn in a child: 0 when it returned, 1 when a KID_CHECK failed (or it died), 2 for
 * KID_NOT_EXERCISED. */
static inline int st_in_child(void (*fn)(void))
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        fn();
        _exit(0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return 1;
    return WEXITSTATUS(status);
}

/* A case that is fn run in a child: it passes when the child returned; a KID_NOT_EXERCISED says
 * why (NOT_EXERCISED, below: a failure under CI). */
#define RUN_IN_CHILD(fn, ...)                                                                      \
    do {                                                                                           \
        int rc_ = st_in_child(fn);                                                                 \
        if (rc_ == 2)                                                                              \
            NOT_EXERCISED(__VA_ARGS__);                                                            \
        else                                                                                       \
            CHECK_EQ(rc_, 0);                                                                      \
    } while (0)

/* Makes this process (a child's) as unprivileged about scheduling as the Docker image's user: no
 * CAP_SYS_NICE in the thread's effective set, RLIMIT_NICE 0; false if it could not. */
static inline int st_unprivileged_nice(void)
{
    struct rlimit rl = {0, 0};
    if (setrlimit(RLIMIT_NICE, &rl) != 0) return 0;
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    if (syscall(SYS_capget, &h, d) != 0) return 0;
    d[CAP_SYS_NICE / 32].effective &= ~(1u << (CAP_SYS_NICE % 32));
    return syscall(SYS_capset, &h, d) == 0;
}

static inline int st_run_tests(const char *suite)
{
    volatile int passed = 0, failed = 0;
    for (volatile int i = 0; i < st_ntests; i++) {
        if (setjmp(st_test_jmp) == 0) {
            st_tests[i].fn();
            printf("ok - %s.%s\n", suite, st_tests[i].name);
            passed++;
        } else {
            printf("FAILED - %s.%s\n", suite, st_tests[i].name);
            failed++;
        }
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

#define RUN_TESTS(suite)                                                                           \
    int main(void)                                                                                 \
    {                                                                                              \
        return st_run_tests(suite);                                                                \
    }

#endif
