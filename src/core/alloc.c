/* SPDX-License-Identifier: MIT */
/*
 * The allocator's settings and figures (include/strata/alloc.h).
 *
 * With jemalloc, malloc_conf below is read at its first allocation (the MALLOC_CONF environment
 * variable, read after it, may change any of them):
 *  - background_thread:true — purging (giving dirty pages back with madvise) runs in jemalloc's
 *    own thread, woken as pages decay; without it the purges run inline, inside whichever
 *    malloc or free on the loop crosses a decay step;
 *  - dirty_decay_ms:1000 — freed pages go back to the system over about a second after a burst
 *    instead of jemalloc's 10 s (the decay is a curve over that window, not a cliff; a burst that
 *    comes back within it reuses the pages). Shorter costs more madvise calls and page faults
 *    when bursts follow each other closely; bench/RESULTS.md (session 20) measured 1 s;
 *  - muzzy_decay_ms:0 — pages go straight back (MADV_DONTNEED) rather than through a lazy
 *    MADV_FREE stage: lazily freed pages stay counted in the process's RSS until the kernel
 *    needs them, which is what an operator (and issue 48's measure) reads;
 *  - max_background_threads:1 — one purging thread is plenty for a single-loop server; the
 *    default is one per CPU.
 */
#include "strata/alloc.h"

#include "strata/metrics.h"

#include <stdio.h>

#ifdef ST_JEMALLOC
#include <jemalloc/jemalloc.h>

const char *malloc_conf = "background_thread:true,max_background_threads:1,"
                          "dirty_decay_ms:1000,muzzy_decay_ms:0";

/* jemalloc's statistics are a snapshot taken at the last "epoch" refresh, which merges every
 * arena's figures under their locks: taken once at the start of each scrape (a metrics render
 * hook), then every strata_malloc_* gauge reads that one snapshot. */
static void st__alloc_refresh(void *arg)
{
    (void)arg;
    uint64_t epoch = 1;
    size_t n = sizeof epoch;
    mallctl("epoch", &epoch, &n, &epoch, n);
}

/* A jemalloc statistic of size_t, as of the scrape's refresh; arg is its mallctl name. 0 if the
 * name is unknown to this jemalloc. */
static double st__alloc_stat(void *arg)
{
    size_t v = 0, n = sizeof v;
    if (mallctl((const char *)arg, &v, &n, NULL, 0) != 0) return 0;
    return (double)v;
}

/* Dirty pages of every arena (freed, not yet given back), in bytes. */
static double st__alloc_dirty(void *arg)
{
    (void)arg;
    size_t page = 0, n = sizeof page;
    if (mallctl("arenas.page", &page, &n, NULL, 0) != 0) return 0;
    char name[64];
    snprintf(name, sizeof name, "stats.arenas.%u.pdirty", (unsigned)MALLCTL_ARENAS_ALL);
    return st__alloc_stat(name) * (double)page;
}

bool st_alloc_purges_itself(void)
{
    bool on = false;
    size_t n = sizeof on;
    return mallctl("background_thread", &on, &n, NULL, 0) == 0 && on;
}

static void st__alloc_stats_open(void)
{
    static const struct {
        const char *name, *help, *ctl;
    } stats[] = {
        {"strata_malloc_allocated_bytes",
         "Bytes the process has allocated and not freed (jemalloc)", "stats.allocated"},
        {"strata_malloc_active_bytes", "Bytes of the pages holding those allocations (jemalloc)",
         "stats.active"},
        {"strata_malloc_resident_bytes",
         "Bytes of the allocator's pages in physical memory: active, dirty and its metadata "
         "(jemalloc)",
         "stats.resident"},
        {"strata_malloc_retained_bytes",
         "Address space the allocator gave back to the system but keeps mapped for reuse; "
         "not in RSS (jemalloc)",
         "stats.retained"},
        {"strata_malloc_background_threads",
         "jemalloc's purging threads running (0: purges run inside malloc and free)",
         "stats.background_thread.num_threads"},
    };
    st_metrics_on_render(st__alloc_refresh, NULL);
    for (size_t i = 0; i < sizeof stats / sizeof stats[0]; i++)
        st_metrics_gauge_fn(stats[i].name, stats[i].help, "", st__alloc_stat, (void *)stats[i].ctl);
    st_metrics_gauge_fn("strata_malloc_dirty_bytes",
                        "Freed pages jemalloc has not given back yet (they decay within about "
                        "dirty_decay_ms)",
                        "", st__alloc_dirty, NULL);
}

#else /* glibc's malloc: its figures would cost a walk of the heap under its lock */

bool st_alloc_purges_itself(void)
{
    return false;
}

static void st__alloc_stats_open(void) {}

#endif

void st_alloc_metrics_open(void)
{
#ifdef ST_JEMALLOC
    const double jemalloc = 1;
#else
    const double jemalloc = 0;
#endif
    st_metric_set(st_metrics_gauge("strata_malloc_jemalloc",
                                   "1 when the allocator is jemalloc (freed memory given back by "
                                   "its background thread), 0 with glibc's malloc",
                                   ""),
                  jemalloc);
    st__alloc_stats_open();
}
