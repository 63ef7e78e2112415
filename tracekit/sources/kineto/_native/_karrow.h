/* Arrow C data interface, both ways, for the native module (included by _kscan.c only), so that
 * reading a Kineto trace never imports pyarrow (≈ 0.2 s of every command's start-up):
 *
 *   frame(rows, columns) -> (schema capsule, array capsule): one struct array whose children are
 *       the given columns, each copied into malloc'd memory that the release callbacks free with
 *       plain free() — no Python object, no GIL — whichever thread polars drops them on.
 *       columns: ((name bytes, format bytes b"l" | b"i" | b"U", validity bitmap | None,
 *                  values | offsets, None | string data), ...); b"l" int64, b"i" int32,
 *       b"U" large UTF-8 (int64 offsets). A Python object returning this pair from
 *       __arrow_c_array__ is what polars.DataFrame() imports.
 *   int64s(stream capsule) -> bytes: the values of an int64 column exported by polars
 *       (Series.__arrow_c_stream__()), chunks concatenated (nulls are not looked at).
 *
 * Struct layouts are those of the Arrow specification (arrow/c/abi.h).
 */
#ifndef TRACEKIT_KARROW_H
#define TRACEKIT_KARROW_H

#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE
#define ARROW_FLAG_NULLABLE 2
struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};
struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};
#endif
#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE
struct ArrowArrayStream {
    int (*get_schema)(struct ArrowArrayStream *, struct ArrowSchema *out);
    int (*get_next)(struct ArrowArrayStream *, struct ArrowArray *out);
    const char *(*get_last_error)(struct ArrowArrayStream *);
    void (*release)(struct ArrowArrayStream *);
    void *private_data;
};
#endif

/* --- export -------------------------------------------------------------------------------- */

static void ka_release_schema(struct ArrowSchema *s) {
    for (int64_t i = 0; s->children && i < s->n_children; i++) {
        struct ArrowSchema *c = s->children[i];
        if (c->release) c->release(c);
        free(c);
    }
    free(s->children);
    free((void *)s->name);
    free((void *)s->format);
    s->release = NULL;
}

/* A leaf array owns its buffers (private_data = the buffers array, each entry malloc'd). */
static void ka_release_leaf(struct ArrowArray *a) {
    for (int64_t i = 0; a->buffers && i < a->n_buffers; i++) free((void *)a->buffers[i]);
    free(a->buffers);
    a->release = NULL;
}

static void ka_release_struct(struct ArrowArray *a) {
    for (int64_t i = 0; a->children && i < a->n_children; i++) {
        struct ArrowArray *c = a->children[i];
        if (c->release) c->release(c);
        free(c);
    }
    free(a->children);
    free(a->buffers);
    a->release = NULL;
}

static void ka_capsule_schema(PyObject *cap) {
    struct ArrowSchema *s = PyCapsule_GetPointer(cap, "arrow_schema");
    if (!s) { PyErr_Clear(); return; }
    if (s->release) s->release(s);
    free(s);
}

static void ka_capsule_array(PyObject *cap) {
    struct ArrowArray *a = PyCapsule_GetPointer(cap, "arrow_array");
    if (!a) { PyErr_Clear(); return; }
    if (a->release) a->release(a);
    free(a);
}

static char *ka_strdup(const char *p, Py_ssize_t n) {
    char *s = malloc((size_t)n + 1);
    if (s) { memcpy(s, p, (size_t)n); s[n] = 0; }
    return s;
}

/* A malloc'd copy of a bytes-like object (at least 8 bytes, zero-filled past its end). */
static void *ka_copy(PyObject *o, Py_ssize_t *len) {
    Py_buffer b;
    if (PyObject_GetBuffer(o, &b, PyBUF_SIMPLE)) return NULL;
    void *p = malloc(b.len > 8 ? (size_t)b.len : 8);
    if (!p) { PyBuffer_Release(&b); PyErr_NoMemory(); return NULL; }
    memset(p, 0, 8);
    if (b.len) memcpy(p, b.buf, (size_t)b.len);
    if (len) *len = b.len;
    PyBuffer_Release(&b);
    return p;
}

static PyObject *frame(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t rows;
    PyObject *cols;
    if (!PyArg_ParseTuple(args, "nO!", &rows, &PyTuple_Type, &cols)) return NULL;
    Py_ssize_t nc = PyTuple_GET_SIZE(cols);
    struct ArrowSchema *sch = calloc(1, sizeof *sch);
    struct ArrowArray *arr = calloc(1, sizeof *arr);
    if (!sch || !arr) { free(sch); free(arr); return PyErr_NoMemory(); }
    sch->format = ka_strdup("+s", 2);
    sch->name = ka_strdup("", 0);
    sch->children = calloc((size_t)nc + 1, sizeof *sch->children);
    sch->release = ka_release_schema;
    arr->length = rows;
    arr->n_buffers = 1;
    arr->buffers = calloc(1, sizeof(void *));
    arr->children = calloc((size_t)nc + 1, sizeof *arr->children);
    arr->release = ka_release_struct;
    if (!sch->format || !sch->name || !sch->children || !arr->buffers || !arr->children) { PyErr_NoMemory(); goto fail; }
    for (Py_ssize_t i = 0; i < nc; i++) {
        PyObject *c = PyTuple_GET_ITEM(cols, i);
        const char *name, *fmt;
        Py_ssize_t name_len, fmt_len;
        PyObject *valid, *b1, *b2;
        if (!PyArg_ParseTuple(c, "y#y#OOO", &name, &name_len, &fmt, &fmt_len, &valid, &b1, &b2)) goto fail;
        int is_str = fmt_len == 1 && fmt[0] == 'U';
        if (!(fmt_len == 1 && (fmt[0] == 'l' || fmt[0] == 'i' || is_str))) {
            PyErr_SetString(PyExc_ValueError, "frame: format must be b'l', b'i' or b'U'");
            goto fail;
        }
        struct ArrowSchema *cs = calloc(1, sizeof *cs);
        struct ArrowArray *ca = calloc(1, sizeof *ca);
        if (!cs || !ca) { free(cs); free(ca); PyErr_NoMemory(); goto fail; }
        sch->children[i] = cs;
        arr->children[i] = ca;
        sch->n_children = arr->n_children = i + 1;
        cs->format = ka_strdup(fmt, fmt_len);
        cs->name = ka_strdup(name, name_len);
        cs->flags = ARROW_FLAG_NULLABLE;
        cs->release = ka_release_schema;
        ca->length = rows;
        ca->n_buffers = is_str ? 3 : 2;
        ca->buffers = calloc((size_t)ca->n_buffers, sizeof(void *));
        ca->release = ka_release_leaf;
        if (!cs->format || !cs->name || !ca->buffers) { PyErr_NoMemory(); goto fail; }
        ca->null_count = valid == Py_None ? 0 : -1;
        Py_ssize_t len = 0;
        if (valid != Py_None && !(ca->buffers[0] = ka_copy(valid, NULL))) goto fail;
        if (!(ca->buffers[1] = ka_copy(b1, &len))) goto fail;
        Py_ssize_t need = is_str ? (rows + 1) * 8 : rows * (fmt[0] == 'l' ? 8 : 4);
        if (len < need) { PyErr_SetString(PyExc_ValueError, "frame: buffer shorter than the rows"); goto fail; }
        if (is_str && !(ca->buffers[2] = ka_copy(b2, NULL))) goto fail;
    }
    PyObject *s_cap = PyCapsule_New(sch, "arrow_schema", ka_capsule_schema);
    if (!s_cap) goto fail;
    PyObject *a_cap = PyCapsule_New(arr, "arrow_array", ka_capsule_array);
    if (!a_cap) { Py_DECREF(s_cap); arr->release(arr); free(arr); return NULL; }  /* s_cap frees sch */
    return Py_BuildValue("(NN)", s_cap, a_cap);
fail:
    if (sch->release) sch->release(sch);
    if (arr->release) arr->release(arr);
    free(sch);
    free(arr);
    return NULL;
}

/* --- import -------------------------------------------------------------------------------- */

static PyObject *int64s(PyObject *self, PyObject *cap) {
    (void)self;
    struct ArrowArrayStream *st = PyCapsule_GetPointer(cap, "arrow_array_stream");
    if (!st) return NULL;
    struct ArrowSchema sch = {0};
    if (st->get_schema(st, &sch)) { PyErr_SetString(PyExc_ValueError, "int64s: no schema"); return NULL; }
    int ok = sch.format && strcmp(sch.format, "l") == 0;
    if (sch.release) sch.release(&sch);
    if (!ok) { PyErr_SetString(PyExc_TypeError, "int64s: the column is not int64"); return NULL; }
    char *out = NULL;
    size_t n = 0;
    for (;;) {
        struct ArrowArray a = {0};
        if (st->get_next(st, &a)) { free(out); PyErr_SetString(PyExc_ValueError, "int64s: stream error"); return NULL; }
        if (!a.release) break;  /* end of stream */
        if (a.length > 0) {
            char *grown = realloc(out, (n + (size_t)a.length) * 8);
            if (!grown) { a.release(&a); free(out); return PyErr_NoMemory(); }
            out = grown;
            memcpy(out + n * 8, (const int64_t *)a.buffers[1] + a.offset, (size_t)a.length * 8);
            n += (size_t)a.length;
        }
        a.release(&a);
    }
    PyObject *res = PyBytes_FromStringAndSize(out ? out : "", (Py_ssize_t)n * 8);
    free(out);
    return res;
}

#endif
