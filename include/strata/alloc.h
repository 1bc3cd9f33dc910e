/* SPDX-License-Identifier: MIT */
/*
 * alloc: which malloc strata runs on, and what it holds (issue 48). Release builds link
 * jemalloc (CMake setting ST_JEMALLOC: AUTO links it when found and no sanitizer is built in,
 * ON requires it, OFF never): a background thread of its own gives freed pages back to the
 * system a second or so after a burst, so the loop never stops for it. Sanitizer and fuzz builds,
 * and builds without jemalloc, keep glibc's malloc, whose free pages inside the heap come back only
 * through malloc_trim (ws/ring.c). Loop thread only (the metrics registry is).
 */
#ifndef STRATA_ALLOC_H
#define STRATA_ALLOC_H

#include "strata/core.h"

/* True when the allocator gives freed memory back by itself, off the loop (jemalloc with its
 * background thread): then nobody needs to call malloc_trim. */
bool st_alloc_purges_itself(void);
/* Registers strata_malloc_* gauges: the allocator's name and, with jemalloc, its allocated,
 * active, resident, dirty and retained bytes, read at each scrape after one stats refresh. */
void st_alloc_metrics_open(void);

#endif
