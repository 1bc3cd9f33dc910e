/* SPDX-License-Identifier: MIT */
/*
 * What one fan-out frame costs the sender, the way strata's fan-out sends it (src/ws/fan.c,
 * session 19): CONNS loopback TCP connections, a reader thread on CPU 1 draining them all
 * through epoll, and the sender on CPU 0 writing one FRAME-byte frame to every connection,
 * ROUNDS times (2 ms apart, as posts come), alternately with one non-blocking send() each and
 * with io_uring batches of CHUNK sends per io_uring_enter(). Prints, per pass, the sender
 * thread's CPU per frame (user + system): the part a server pays per subscriber.
 *
 * usage: strata-sendcost [CONNS] [ROUNDS] [PASSES] [CHUNK] [FRAME]
 */
#define _GNU_SOURCE /* CPU affinity, RUSAGE_THREAD */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct {
    int *fds, n;
    atomic_bool stop;
} st__reader_t;

static double st__thread_cpu(void)
{
    struct rusage r;
    getrusage(RUSAGE_THREAD, &r);
    return (double)r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6 + (double)r.ru_stime.tv_sec +
           r.ru_stime.tv_usec / 1e6;
}

static void st__pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s); /* best effort: 1 CPU runs both */
}

static void *st__read_all(void *arg)
{
    st__reader_t *r = arg;
    st__pin(1);
    int ep = epoll_create1(0);
    for (int i = 0; i < r->n; i++) {
        struct epoll_event e = {.events = EPOLLIN, .data.fd = r->fds[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, r->fds[i], &e);
    }
    struct epoll_event ev[256];
    static char buf[65536];
    while (!atomic_load(&r->stop)) {
        int n = epoll_wait(ep, ev, 256, 100);
        for (int i = 0; i < n; i++)
            while (recv(ev[i].data.fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
            }
    }
    close(ep);
    return NULL;
}

/* Connects n pairs over loopback: srv[i] (the sender's, non-blocking, TCP_NODELAY as strata's
 * streams) and cli[i] (the reader's). Returns 0, or -1 with errno. */
static int st__connect(int *srv, int *cli, int n)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 4096) != 0 ||
        getsockname(l, (struct sockaddr *)&a, &al) != 0)
        return -1;
    for (int i = 0; i < n; i++) {
        int one = 1;
        cli[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (cli[i] < 0 || connect(cli[i], (struct sockaddr *)&a, sizeof a) != 0) return -1;
        srv[i] = accept(l, NULL, NULL);
        if (srv[i] < 0) return -1;
        setsockopt(srv[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fcntl(srv[i], F_SETFL, O_NONBLOCK);
    }
    close(l);
    return 0;
}

/* One round through io_uring: chunks of `chunk` sends, one io_uring_enter() each. Returns the
 * sends that failed. */
static long st__round_uring(struct io_uring *ring, const int *fds, int n, int chunk,
                            const char *frame, size_t len)
{
    long fails = 0;
    for (int i = 0; i < n; i += chunk) {
        int k = 0;
        for (; k < chunk && i + k < n; k++)
            io_uring_prep_send(io_uring_get_sqe(ring), fds[i + k], frame, len,
                               MSG_NOSIGNAL | MSG_DONTWAIT);
        io_uring_submit_and_wait(ring, (unsigned)k);
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(ring, head, cqe)
        {
            fails += cqe->res < 0;
            seen++;
        }
        io_uring_cq_advance(ring, seen);
    }
    return fails;
}

int main(int argc, char **argv)
{
    int conns = argc > 1 ? atoi(argv[1]) : 1000, rounds = argc > 2 ? atoi(argv[2]) : 200;
    int passes = argc > 3 ? atoi(argv[3]) : 6, chunk = argc > 4 ? atoi(argv[4]) : 16;
    size_t flen = argc > 5 ? (size_t)atoi(argv[5]) : 120;
    if (conns < 1 || rounds < 1 || passes < 1 || chunk < 1 || chunk > 4096 || flen < 1 ||
        flen > 65536) {
        fprintf(stderr, "usage: %s [CONNS] [ROUNDS] [PASSES] [CHUNK 1-4096] [FRAME 1-65536]\n",
                argv[0]);
        return 2;
    }
    int *srv = calloc((size_t)conns, sizeof *srv), *cli = calloc((size_t)conns, sizeof *cli);
    char *frame = malloc(flen);
    struct io_uring ring;
    int rc = srv && cli && frame ? io_uring_queue_init((unsigned)chunk, &ring, 0) : -ENOMEM;
    if (rc != 0) {
        fprintf(stderr, "io_uring: %s\n", strerror(-rc));
        return 1;
    }
    if (st__connect(srv, cli, conns) != 0) {
        perror("connect (raise ulimit -n?)");
        return 1;
    }
    memset(frame, 'x', flen);
    st__reader_t rd = {.fds = cli, .n = conns};
    atomic_init(&rd.stop, false);
    pthread_t t;
    pthread_create(&t, NULL, st__read_all, &rd);
    st__pin(0);
    for (int p = 0; p < passes; p++) {
        bool uring = p % 2;
        long fails = 0;
        double c0 = st__thread_cpu();
        for (int r = 0; r < rounds; r++) {
            if (uring) {
                fails += st__round_uring(&ring, srv, conns, chunk, frame, flen);
            } else {
                for (int i = 0; i < conns; i++)
                    fails += send(srv[i], frame, flen, MSG_NOSIGNAL | MSG_DONTWAIT) < 0;
            }
            usleep(2000);
        }
        double us = (st__thread_cpu() - c0) / ((double)rounds * conns) * 1e6;
        printf("%s conns=%d chunk=%d frame=%zu cpu_us_per_frame=%.2f failed=%ld\n",
               uring ? "io_uring" : "send", conns, uring ? chunk : 1, flen, us, fails);
    }
    atomic_store(&rd.stop, true);
    pthread_join(t, NULL);
    io_uring_queue_exit(&ring);
    return 0;
}
