/* SPDX-License-Identifier: MIT */
/*
 * What one durable log write costs on this disk, the way strata's redo log does it (issue 22):
 * THREADS threads each write 4 KiB blocks in place into a preallocated, zero-filled file of
 * their own, either buffered + fdatasync (strata before) or O_DIRECT|O_DSYNC (the redo log
 * now), for SECONDS; prints syncs per second and the mean time of one. Several threads show
 * whether the device overlaps flushes.
 *
 * usage: strata-syncbench DIR [SECONDS] [THREADS] [direct 0|1]
 */
#define _GNU_SOURCE /* O_DIRECT */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ST__FILE (64L << 20)
#define ST__BLK  4096

typedef struct {
    const char *dir;
    int idx, secs, direct;
    long n;
    int err;
} st__job_t;

static double st__now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *st__run(void *arg)
{
    st__job_t *j = arg;
    char path[1100];
    snprintf(path, sizeof path, "%s/syncbench.%d", j->dir, j->idx);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    void *blk = NULL;
    if (fd < 0 || posix_memalign(&blk, ST__BLK, 1 << 20) != 0) {
        j->err = 1;
        return NULL;
    }
    memset(blk, 0, 1 << 20);
    for (long off = 0; off < ST__FILE; off += 1 << 20)
        if (pwrite(fd, blk, 1 << 20, off) != 1 << 20) j->err = 1;
    fsync(fd);
    int wfd = j->direct ? open(path, O_RDWR | O_DIRECT | O_DSYNC) : fd;
    if (wfd < 0) {
        j->err = 1;
        return NULL;
    }
    memset(blk, 'x', ST__BLK);
    double end = st__now() + j->secs;
    long off = 0;
    while (!j->err && st__now() < end) {
        if (pwrite(wfd, blk, ST__BLK, off) != ST__BLK) j->err = 1;
        if (!j->direct && fdatasync(wfd) != 0) j->err = 1;
        off = (off + ST__BLK) % ST__FILE;
        j->n++;
    }
    if (wfd != fd) close(wfd);
    close(fd);
    unlink(path);
    free(blk);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: strata-syncbench DIR [SECONDS] [THREADS] [direct 0|1]\n");
        return 2;
    }
    int secs = argc > 2 ? atoi(argv[2]) : 3, nth = argc > 3 ? atoi(argv[3]) : 1;
    int direct = argc > 4 ? atoi(argv[4]) : 0;
    if (secs < 1 || nth < 1 || nth > 16) return 2;
    st__job_t jobs[16];
    pthread_t th[16];
    for (int i = 0; i < nth; i++) {
        jobs[i] = (st__job_t){argv[1], i, secs, direct, 0, 0};
        pthread_create(&th[i], NULL, st__run, &jobs[i]);
    }
    long total = 0;
    int err = 0;
    for (int i = 0; i < nth; i++) {
        pthread_join(th[i], NULL);
        total += jobs[i].n;
        err |= jobs[i].err;
    }
    if (err || !total) {
        fprintf(stderr, "syncbench: a write or sync failed\n");
        return 1;
    }
    printf("%s, %d thread(s): %.0f durable 4 KiB writes/s, %.3f ms each\n",
           direct ? "O_DIRECT|O_DSYNC write" : "buffered write + fdatasync", nth,
           (double)total / secs, (double)secs * nth * 1000.0 / (double)total);
    return 0;
}
