/* SPDX-License-Identifier: MIT */
/* The metrics registry and its Prometheus text rendering. */
#include "strata/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { ST_M_COUNTER, ST_M_GAUGE, ST_M_GAUGE_FN, ST_M_HIST } st_mkind_t;

struct st_metric {
    st_map_node_t node; /* key: name '\0' labels */
    st_metric_t *next_in_order;
    st_mkind_t kind;
    char *key;
    size_t name_len;
    const char *labels;
    const char *help;
    double value;
    st_gauge_fn fn;
    void *fn_arg;
    double *bounds;
    uint64_t *buckets; /* nbounds + 1 */
    size_t nbounds;
    double sum;
    uint64_t count;
};

static st_map_t st__reg;
static bool st__reg_init;
static st_metric_t *st__first, *st__last;
static struct {
    void (*fn)(void *arg);
    void *arg;
} st__hooks[ST_METRICS_HOOKS_MAX];
static size_t st__nhooks;

const double st_metrics_latency_bounds[] = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                            0.005,   0.01,   0.025,   0.05,   0.1,   0.25,
                                            0.5,     1,      2.5,     10};
const size_t st_metrics_latency_nbounds =
    sizeof st_metrics_latency_bounds / sizeof st_metrics_latency_bounds[0];
const double st_metrics_size_bounds[] = {1,   2,   4,   8,    16,   32,    64,
                                         128, 256, 512, 1024, 4096, 16384, 65536};
const size_t st_metrics_size_nbounds =
    sizeof st_metrics_size_bounds / sizeof st_metrics_size_bounds[0];

static st_metric_t *st__metric(st_mkind_t kind, const char *name, const char *help,
                               const char *labels)
{
    if (!st__reg_init) {
        st_map_init(&st__reg);
        st__reg_init = true;
    }
    size_t nl = strlen(name), ll = strlen(labels);
    char *key = st_malloc(nl + ll + 2);
    memcpy(key, name, nl + 1);
    memcpy(key + nl + 1, labels, ll + 1);
    st_map_node_t *n = st_map_get(&st__reg, key, nl + ll + 1);
    if (n) {
        free(key);
        return (st_metric_t *)n;
    }
    st_metric_t *m = st_calloc(1, sizeof *m);
    m->kind = kind;
    m->key = key;
    m->name_len = nl;
    m->labels = key + nl + 1;
    m->help = help;
    m->node.key = key;
    m->node.klen = nl + ll + 1;
    st_map_insert(&st__reg, &m->node);
    if (st__last)
        st__last->next_in_order = m;
    else
        st__first = m;
    st__last = m;
    return m;
}

st_metric_t *st_metrics_counter(const char *name, const char *help, const char *labels)
{
    return st__metric(ST_M_COUNTER, name, help, labels);
}

st_metric_t *st_metrics_gauge(const char *name, const char *help, const char *labels)
{
    return st__metric(ST_M_GAUGE, name, help, labels);
}

void st_metrics_gauge_fn(const char *name, const char *help, const char *labels, st_gauge_fn fn,
                         void *arg)
{
    st_metric_t *m = st__metric(ST_M_GAUGE_FN, name, help, labels);
    m->fn = fn;
    m->fn_arg = arg;
}

void st_metrics_on_render(void (*fn)(void *arg), void *arg)
{
    for (size_t i = 0; i < st__nhooks; i++)
        if (st__hooks[i].fn == fn && st__hooks[i].arg == arg) return;
    if (st__nhooks == ST_METRICS_HOOKS_MAX)
        st_fatal("metrics: more than %d render hooks", ST_METRICS_HOOKS_MAX);
    st__hooks[st__nhooks].fn = fn;
    st__hooks[st__nhooks++].arg = arg;
}

st_metric_t *st_metrics_histogram(const char *name, const char *help, const char *labels,
                                  const double *bounds, size_t nbounds)
{
    st_metric_t *m = st__metric(ST_M_HIST, name, help, labels);
    if (!m->bounds) {
        m->bounds = st_malloc(nbounds * sizeof *bounds);
        memcpy(m->bounds, bounds, nbounds * sizeof *bounds);
        m->buckets = st_calloc(nbounds + 1, sizeof *m->buckets);
        m->nbounds = nbounds;
    }
    return m;
}

void st_metric_add(st_metric_t *m, double v)
{
    m->value += v;
}

void st_metric_set(st_metric_t *m, double v)
{
    m->value = v;
}

double st_metric_value(const st_metric_t *m)
{
    return m->kind == ST_M_GAUGE_FN ? m->fn(m->fn_arg) : m->value;
}

void st_metric_observe(st_metric_t *m, double v)
{
    size_t i = 0;
    while (i < m->nbounds && v > m->bounds[i])
        i++;
    m->buckets[i]++;
    m->sum += v;
    m->count++;
}

static void st__render_labels(st_buf_t *out, const char *labels, const char *extra)
{
    if (!*labels && !extra) return;
    st_buf_appendc(out, '{');
    st_buf_puts(out, labels);
    if (extra) {
        if (*labels) st_buf_appendc(out, ',');
        st_buf_puts(out, extra);
    }
    st_buf_appendc(out, '}');
}

static void st__render_series(st_buf_t *out, const st_metric_t *m)
{
    if (m->kind != ST_M_HIST) {
        st_buf_puts(out, m->key);
        st__render_labels(out, m->labels, NULL);
        st_buf_printf(out, " %.17g\n", st_metric_value(m));
        return;
    }
    uint64_t cum = 0;
    for (size_t i = 0; i <= m->nbounds; i++) {
        cum += m->buckets[i];
        char le[48];
        if (i < m->nbounds)
            snprintf(le, sizeof le, "le=\"%g\"", m->bounds[i]);
        else
            snprintf(le, sizeof le, "le=\"+Inf\"");
        st_buf_printf(out, "%s_bucket", m->key);
        st__render_labels(out, m->labels, le);
        st_buf_printf(out, " %llu\n", (unsigned long long)cum);
    }
    st_buf_printf(out, "%s_sum", m->key);
    st__render_labels(out, m->labels, NULL);
    st_buf_printf(out, " %.17g\n%s_count", m->sum, m->key);
    st__render_labels(out, m->labels, NULL);
    st_buf_printf(out, " %llu\n", (unsigned long long)m->count);
}

static bool st__same_name(const st_metric_t *a, const st_metric_t *b)
{
    return a->name_len == b->name_len && memcmp(a->key, b->key, a->name_len) == 0;
}

void st_metrics_render(st_buf_t *out)
{
    static const char *types[] = {"counter", "gauge", "gauge", "histogram"};
    for (size_t i = 0; i < st__nhooks; i++)
        st__hooks[i].fn(st__hooks[i].arg);
    /* The text format wants every series of a family together, under one HELP/TYPE. Families
     * are few (tens), so finding "already printed" by scanning earlier entries is fine. */
    for (st_metric_t *m = st__first; m; m = m->next_in_order) {
        bool printed = false;
        for (st_metric_t *p = st__first; p != m; p = p->next_in_order)
            if (st__same_name(p, m)) {
                printed = true;
                break;
            }
        if (printed) continue;
        st_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", m->key, m->help, m->key, types[m->kind]);
        for (st_metric_t *s = m; s; s = s->next_in_order)
            if (st__same_name(s, m)) st__render_series(out, s);
    }
}

void st_metrics_shutdown(void)
{
    st_metric_t *m = st__first;
    while (m) {
        st_metric_t *next = m->next_in_order;
        free(m->key);
        free(m->bounds);
        free(m->buckets);
        free(m);
        m = next;
    }
    st__first = st__last = NULL;
    st__nhooks = 0;
    if (st__reg_init) st_map_free(&st__reg);
    st__reg_init = false;
}
