/* Interval nesting for the native module (included by _kscan.c only): the definition of
 * tracekit.intervals.nest, computed per thread in one pass over rows sorted here (an index sort:
 * 8 bytes a row, where a polars multi-column sort needs ~100).
 *
 * Rows are ordered by (keys..., start asc, end desc, row asc); a group is a run of equal keys.
 * Within a group, with pos the row's index there:
 *   closed  = rows of the group whose end <= this start (zero-length rows at this start included)
 *   zl_over = zero-length rows with this start at or after this row (they sort last among equal
 *             starts; they are not closed before the rows ahead of them, nor before themselves)
 *   depth   = max(0, pos - closed + zl_over)
 *   parent  = the latest earlier row of the group whose depth is depth - 1 (none at depth 0).
 * One pass; the sibling rule for sub-µs overlaps (tracekit.tables.intervals.sibling_ends) runs
 * between passes in sources/kineto/reading/native.nest, on ends it passes in here.
 */
#ifndef TRACEKIT_KNEST_H
#define TRACEKIT_KNEST_H

#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

#define NEST_MAX_KEYS 8

typedef struct {
    const int64_t *key[NEST_MAX_KEYS];
    int nkeys;
    const int64_t *start, *end;
} nest_ctx;

/* The sort's context: qsort_r's signature differs between glibc and the BSDs, so plain qsort
 * with a per-thread pointer (the GIL is released while nesting). */
static _Thread_local const nest_ctx *sort_ctx;

static int cmp_rows(const void *a, const void *b) {
    const nest_ctx *c = sort_ctx;
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    for (int k = 0; k < c->nkeys; k++) {
        int64_t x = c->key[k][i], y = c->key[k][j];
        if (x != y) return x < y ? -1 : 1;
    }
    if (c->start[i] != c->start[j]) return c->start[i] < c->start[j] ? -1 : 1;
    if (c->end[i] != c->end[j]) return c->end[i] > c->end[j] ? -1 : 1;
    return (i > j) - (i < j);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int same_group(const nest_ctx *c, int64_t i, int64_t j) {
    for (int k = 0; k < c->nkeys; k++) if (c->key[k][i] != c->key[k][j]) return 0;
    return 1;
}

/* Number of values <= t in sorted v[0..n). */
static Py_ssize_t count_le(const int64_t *v, Py_ssize_t n, int64_t t) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (v[mid] <= t) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* depth[row] and parent[row] (the parent's row, -1 for none) for rows [0, n). 0 on success. */
static int nest_rows(const nest_ctx *c, Py_ssize_t n, int32_t *depth, int64_t *parent) {
    size_t m0 = (size_t)(n ? n : 1);
    int64_t *order = malloc(sizeof(int64_t) * m0), *ends = malloc(sizeof(int64_t) * m0);
    int64_t *last = malloc(sizeof(int64_t) * (m0 + 1));
    if (!order || !ends || !last) { free(order); free(ends); free(last); return -1; }
    for (Py_ssize_t i = 0; i < n; i++) order[i] = i;
    sort_ctx = c;
    qsort(order, (size_t)n, sizeof(int64_t), cmp_rows);
    sort_ctx = NULL;
    const int64_t *start = c->start, *end = c->end;
    Py_ssize_t g0 = 0;
    while (g0 < n) {
        Py_ssize_t g1 = g0 + 1;
        while (g1 < n && same_group(c, order[g1], order[g0])) g1++;
        Py_ssize_t m = g1 - g0;
        for (Py_ssize_t i = 0; i < m; i++) ends[i] = end[order[g0 + i]];
        qsort(ends, (size_t)m, sizeof(int64_t), cmp_i64);
        for (Py_ssize_t d = 0; d <= m; d++) last[d] = -1;
        Py_ssize_t b0 = g0;
        while (b0 < g1) { /* a block of equal starts */
            int64_t t = start[order[b0]];
            Py_ssize_t b1 = b0 + 1;
            while (b1 < g1 && start[order[b1]] == t) b1++;
            Py_ssize_t closed = count_le(ends, m, t), zl = 0;
            for (Py_ssize_t i = b0; i < b1; i++) zl += end[order[i]] == t;
            for (Py_ssize_t i = b0; i < b1; i++) {
                int64_t row = order[i];
                Py_ssize_t d = (i - g0) - closed + zl;
                if (d < 0) d = 0;
                depth[row] = (int32_t)d;
                parent[row] = d > 0 && last[d - 1] >= 0 ? order[last[d - 1]] : -1;
                last[d] = i;
                zl -= end[row] == t;
            }
            b0 = b1;
        }
        g0 = g1;
    }
    free(order);
    free(ends);
    free(last);
    return 0;
}

static PyObject *nest(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *keys_seq;
    Py_buffer s, e, kb[NEST_MAX_KEYS];
    int nk = 0;
    PyObject *res = NULL, *keys = NULL;
    if (!PyArg_ParseTuple(args, "Oy*y*", &keys_seq, &s, &e)) return NULL;
    Py_ssize_t n = s.len / 8;
    if (!(keys = PySequence_Fast(keys_seq, "nest: keys must be a sequence"))) goto done;
    if (PySequence_Fast_GET_SIZE(keys) > NEST_MAX_KEYS || e.len != s.len || s.len % 8) {
        PyErr_SetString(PyExc_ValueError, "nest: at most 8 keys; int64 buffers of equal length");
        goto done;
    }
    nest_ctx c = {.nkeys = 0, .start = s.buf, .end = e.buf};
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(keys); k++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(keys, k), &kb[nk], PyBUF_SIMPLE)) goto done;
        nk++;
        if (kb[k].len != s.len) { PyErr_SetString(PyExc_ValueError, "nest: key length differs"); goto done; }
        c.key[k] = kb[k].buf;
    }
    c.nkeys = nk;
    PyObject *d = PyBytes_FromStringAndSize(NULL, n * 4), *p = PyBytes_FromStringAndSize(NULL, n * 8);
    if (!d || !p) { Py_XDECREF(d); Py_XDECREF(p); goto done; }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = nest_rows(&c, n, (int32_t *)PyBytes_AS_STRING(d), (int64_t *)PyBytes_AS_STRING(p));
    Py_END_ALLOW_THREADS
    if (rc) { Py_DECREF(d); Py_DECREF(p); PyErr_NoMemory(); goto done; }
    res = Py_BuildValue("(NN)", d, p);
done:
    for (int k = 0; k < nk; k++) PyBuffer_Release(&kb[k]);
    Py_XDECREF(keys);
    PyBuffer_Release(&s);
    PyBuffer_Release(&e);
    return res;
}

#endif
