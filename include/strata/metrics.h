/* SPDX-License-Identifier: MIT */
/*
 * metrics: a process-wide registry of counters, gauges and histograms rendered in the Prometheus
 * text format. Loop-thread only: other threads hand their figures to the loop first.
 * Handles returned here are owned by the registry and live until st_metrics_shutdown().
 */
#ifndef STRATA_METRICS_H
#define STRATA_METRICS_H

#include "strata/core.h"

typedef struct st_metric st_metric_t;
typedef double (*st_gauge_fn)(void *arg);

/* Same (name, labels) returns the same handle. labels is e.g. `route="x",status="200"` or "". */
st_metric_t *st_metrics_counter(const char *name, const char *help, const char *labels);
st_metric_t *st_metrics_gauge(const char *name, const char *help, const char *labels);
/* A gauge whose value is read from fn(arg) at render time. */
void st_metrics_gauge_fn(const char *name, const char *help, const char *labels, st_gauge_fn fn,
                         void *arg);
/* fn(arg) runs once at the start of each st_metrics_render, before any gauge's fn: a source whose
 * figures cost a refresh (jemalloc's stats epoch) takes it once a scrape, not once a gauge. The
 * same fn and arg again count once; up to ST_METRICS_HOOKS_MAX, until st_metrics_shutdown. */
#define ST_METRICS_HOOKS_MAX 8
void st_metrics_on_render(void (*fn)(void *arg), void *arg);
/* bounds: ascending upper bounds (copied); +Inf is implied. */
st_metric_t *st_metrics_histogram(const char *name, const char *help, const char *labels,
                                  const double *bounds, size_t nbounds);

void st_metric_add(st_metric_t *m, double v);
void st_metric_set(st_metric_t *m, double v);
void st_metric_observe(st_metric_t *m, double v);
double st_metric_value(const st_metric_t *m);

/* Standard bucket sets. */
extern const double st_metrics_latency_bounds[]; /* seconds, 50 µs .. 10 s */
extern const size_t st_metrics_latency_nbounds;
extern const double st_metrics_size_bounds[]; /* counts, 1 .. 65536 */
extern const size_t st_metrics_size_nbounds;

void st_metrics_render(st_buf_t *out);
void st_metrics_shutdown(void);

#endif
