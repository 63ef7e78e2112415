/* Native scanner for the traceEvents array of a Kineto (Chrome trace) JSON document.
 *
 * scan(buf, pos, x_routes, flow_cats) reads complete events from buf[pos:] and returns their
 * fields as Arrow buffers (validity bitmaps, int64 values, large-string offsets + data), one set
 * per group (the four tables, flows, metadata), so no Python object is built per event. Events
 * of no group are only counted by their (ph, cat) pair. It validates the JSON it reads (grammar and UTF-8) and stops, without
 * guessing, wherever the careful Python path must decide instead:
 *
 *   status 0  the buffer ended (inside an event or between events): read more and call again;
 *   status 1  the array closed: `end` is just after its `]`;
 *   status 2  something it does not handle (bad JSON, invalid UTF-8, a non-object element):
 *             `end` is just after the last complete element before it (separators may follow);
 *             the caller hands the rest to the Python path.
 *
 * Events whose fields have unusual types (a string pid, a float id, an escaped name, an
 * exponent in ts, an integer beyond int64, a null args) are valid JSON but are not converted
 * here: their byte spans (start, end, index) are returned in `slow` and decoded by the Python path, which counts
 * every coercion. Times are decimal microseconds turned into int64 ns exactly: three fraction
 * digits, further digits rounded half to even (as polars' str.to_decimal(scale=3) does).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { S_PH, S_CAT, S_NAME, S_ANAME, S_DIMS, S_TYPES, S_STRIDES, S_CONCRETE, S_GRID, S_BLOCK, S_CDTYPE, NSTR };
enum { I_PID, I_TID, I_TS, I_DUR, I_ID, I_EXT, I_CORR, I_DEV, I_STREAM, I_REGS, I_SMEM, I_BYTES,
       I_GRAPH, I_GNODE, I_SEQ, I_COMM, I_MBYTES, I_MTOTAL, I_MRES, I_ADDR, I_DTYPE, I_DID,
       I_EV, NINT }; /* I_EV: the element's index in this call, in file order */
#define I_LAST_ARG I_DID /* the args' integer fields are I_EXT..I_LAST_ARG */
#define N_PLAIN 4 /* S_PH..S_ANAME hold string contents; the others hold raw JSON text */

#include "_kjson.h"
#include "_knest.h"
#include "_karrow.h"

typedef struct { char *p; size_t len, cap; } buf_t;

static int grow(buf_t *b, size_t extra) {
    if (b->len + extra <= b->cap) return 0;
    size_t nc = b->cap ? b->cap : 1 << 14;
    while (nc < b->len + extra) nc *= 2;
    char *q = realloc(b->p, nc);
    if (!q) return -1;
    b->p = q;
    b->cap = nc;
    return 0;
}

typedef struct {
    Py_ssize_t str_start[NSTR], str_len[NSTR];
    int64_t ival[NINT];
    unsigned char has_str[NSTR], has_int[NINT];
    int slow;
} rec_t;

#define KEY(lit) (klen == sizeof(lit) - 1 && memcmp(k, lit, sizeof(lit) - 1) == 0)

static int top_field(const unsigned char *k, Py_ssize_t klen, int *is_str) {
    *is_str = 1;
    if (KEY("ph")) return S_PH;
    if (KEY("cat")) return S_CAT;
    if (KEY("name")) return S_NAME;
    *is_str = 0;
    if (KEY("pid")) return I_PID;
    if (KEY("tid")) return I_TID;
    if (KEY("ts")) return I_TS;
    if (KEY("dur")) return I_DUR;
    if (KEY("id")) return I_ID;
    if (KEY("args")) return -2;
    return -1;
}

static int arg_field(const unsigned char *k, Py_ssize_t klen, int *is_str) {
    *is_str = 1;
    if (KEY("name")) return S_ANAME;
    if (KEY("Input Dims")) return S_DIMS;
    if (KEY("Input type")) return S_TYPES;
    if (KEY("Input Strides")) return S_STRIDES;
    if (KEY("Concrete Inputs")) return S_CONCRETE;
    if (KEY("grid")) return S_GRID;
    if (KEY("block")) return S_BLOCK;
    if (KEY("dtype")) return S_CDTYPE; /* a collective's element type (c10d kernels and ops) */
    *is_str = 0;
    if (KEY("External id")) return I_EXT;
    if (KEY("correlation")) return I_CORR;
    if (KEY("device")) return I_DEV;
    if (KEY("stream")) return I_STREAM;
    if (KEY("registers per thread")) return I_REGS;
    if (KEY("shared memory")) return I_SMEM;
    if (KEY("bytes")) return I_BYTES;
    if (KEY("graph id")) return I_GRAPH;
    if (KEY("graph node id")) return I_GNODE; /* the node's toolsId: (graph id << 32) | node */
    if (KEY("Sequence number")) return I_SEQ;
    if (KEY("In msg nelems")) return I_COMM; /* a collective's input message, in elements */
    /* [memory] instant events (profile_memory=True) */
    if (KEY("Bytes")) return I_MBYTES;
    if (KEY("Total Allocated")) return I_MTOTAL;
    if (KEY("Total Reserved")) return I_MRES;
    if (KEY("Addr")) return I_ADDR;
    if (KEY("Device Type")) return I_DTYPE;
    if (KEY("Device Id")) return I_DID;
    return -1;
}

/* One field value into the record (or a slow mark). */
static int field(P *x, rec_t *r, int f, int is_str) {
    Py_ssize_t v0 = x->p;
    unsigned char c = x->s[v0];
    int rc, esc, kind;
    if (c == 'n') { /* null: absent */
        if ((rc = literal(x, "null")) != OK) return rc;
        if (is_str) r->has_str[f] = 0; else r->has_int[f] = 0;
        return OK;
    }
    if (is_str && f >= N_PLAIN) { /* raw JSON text of any value */
        if ((rc = value(x, 1)) != OK) return rc;
        r->str_start[f] = v0;
        r->str_len[f] = x->p - v0;
        r->has_str[f] = 1;
        return OK;
    }
    if (is_str) {
        if (c != '"') { r->slow = 1; return value(x, 1); }
        if ((rc = string(x, &esc)) != OK) return rc;
        if (esc) { r->slow = 1; return OK; }
        r->str_start[f] = v0 + 1;
        r->str_len[f] = x->p - v0 - 2;
        r->has_str[f] = 1;
        return OK;
    }
    if (c != '-' && !(c >= '0' && c <= '9')) { r->slow = 1; return value(x, 1); }
    if ((rc = number(x, &kind)) != OK) return rc;
    int ok;
    if (f == I_TS || f == I_DUR) ok = kind != 2 && parse_ns(x->s + v0, x->p - v0, &r->ival[f]);
    else ok = kind == 0 && parse_int(x->s + v0, x->p - v0, &r->ival[f]);
    if (!ok) r->slow = 1;
    else r->has_int[f] = 1;
    return OK;
}

/* An object whose keys are matched by `lookup`; `args` (top level only) recurses once. */
static int object(P *x, rec_t *r, int top) {
    int rc, esc, is_str;
    x->p++; /* '{' */
    ws(x);
    if (x->p >= x->n) return INCOMPLETE;
    if (x->s[x->p] == '}') { x->p++; return OK; }
    for (;;) {
        Py_ssize_t k0, klen;
        if ((rc = key(x, &esc, &k0, &klen)) != OK) return rc;
        int f = top ? top_field(x->s + k0, klen, &is_str) : arg_field(x->s + k0, klen, &is_str);
        if (esc) { r->slow = 1; f = -1; } /* an escaped key might name a field: let Python decide */
        if (f == -2) {
            /* A repeated "args" replaces the earlier one (as msgspec decodes it): forget its fields. */
            memset(r->has_str + S_ANAME, 0, S_CDTYPE - S_ANAME + 1);
            memset(r->has_int + I_EXT, 0, I_LAST_ARG - I_EXT + 1);
            if (x->s[x->p] == '{') rc = object(x, r, 0);
            else { r->slow = 1; rc = value(x, 1); }
        } else if (f >= 0) {
            rc = field(x, r, f, is_str);
        } else {
            rc = value(x, 1);
        }
        if (rc != OK) return rc;
        ws(x);
        if (x->p >= x->n) return INCOMPLETE;
        unsigned char c = x->s[x->p];
        if (c == '}') { x->p++; return OK; }
        if (c != ',') return BAD;
        x->p++;
        ws(x);
        if (x->p >= x->n) return INCOMPLETE;
    }
}

/* Output columns of one group: one row capacity for all; validity kept as a byte per row,
 * packed into Arrow bitmaps at the end. */
typedef struct {
    buf_t sval[NSTR];
    int64_t *soff[NSTR], *ival[NINT];
    unsigned char *svalid[NSTR], *ivalid[NINT];
    Py_ssize_t rows, cap;
} out_t;

static void out_free(out_t *o) {
    for (int i = 0; i < NSTR; i++) { free(o->sval[i].p); free(o->soff[i]); free(o->svalid[i]); }
    for (int i = 0; i < NINT; i++) { free(o->ival[i]); free(o->ivalid[i]); }
}

#define REALLOC(ptr, n) do { void *q_ = realloc((ptr), (n)); if (!q_) return -1; (ptr) = q_; } while (0)

static int reserve_rows(out_t *o) {
    if (o->rows + 1 < o->cap) return 0;
    Py_ssize_t cap = o->cap ? o->cap * 2 : 1024;
    for (int i = 0; i < NSTR; i++) {
        REALLOC(o->soff[i], (size_t)(cap + 1) * 8);
        REALLOC(o->svalid[i], (size_t)cap);
        if (o->cap == 0) o->soff[i][0] = 0;
    }
    for (int i = 0; i < NINT; i++) {
        REALLOC(o->ival[i], (size_t)cap * 8);
        REALLOC(o->ivalid[i], (size_t)cap);
    }
    o->cap = cap;
    return 0;
}

static int commit(out_t *o, const rec_t *r, const unsigned char *s) {
    if (reserve_rows(o)) return -1;
    Py_ssize_t row = o->rows;
    for (int i = 0; i < NSTR; i++) {
        buf_t *val = &o->sval[i];
        int has = r->has_str[i];
        if (has && r->str_len[i]) {
            size_t len = (size_t)r->str_len[i];
            if (grow(val, len)) return -1;
            memcpy(val->p + val->len, s + r->str_start[i], len);
            val->len += len;
        }
        o->soff[i][row + 1] = (int64_t)val->len;
        o->svalid[i][row] = (unsigned char)has;
    }
    for (int i = 0; i < NINT; i++) {
        int has = r->has_int[i];
        o->ival[i][row] = has ? r->ival[i] : 0;
        o->ivalid[i][row] = (unsigned char)has;
    }
    o->rows++;
    return 0;
}

static const int64_t ZERO = 0;

static PyObject *as_bytes(const void *p, size_t n) {
    return PyBytes_FromStringAndSize(n ? (const char *)p : "", (Py_ssize_t)n);
}

/* A byte per row → an Arrow validity bitmap; None when every row is valid. */
static PyObject *bitmap(const unsigned char *valid, Py_ssize_t rows) {
    Py_ssize_t all = 1;
    for (Py_ssize_t i = 0; i < rows && all; i++) all = valid[i];
    if (all) Py_RETURN_NONE;
    PyObject *b = PyBytes_FromStringAndSize(NULL, (rows + 7) / 8);
    if (!b) return NULL;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(b);
    memset(p, 0, (size_t)(rows + 7) / 8);
    for (Py_ssize_t i = 0; i < rows; i++) p[i >> 3] |= (unsigned char)(valid[i] << (i & 7));
    return b;
}

static int any_valid(const unsigned char *valid, Py_ssize_t rows) {
    for (Py_ssize_t i = 0; i < rows; i++) if (valid[i]) return 1;
    return 0;
}

/* (rows, strings, ints) of one group as Python objects. An integer field no row of the group has
 * is (None, None): no buffers to hold (a window's groups wait in memory until their frames are
 * built, and most fields belong to one group only). */
static PyObject *group_result(const out_t *o) {
    Py_ssize_t n = o->rows;
    PyObject *strs = PyTuple_New(NSTR), *ints = PyTuple_New(NINT), *res = NULL;
    if (!strs || !ints) goto done;
    for (int i = 0; i < NSTR; i++) {
        PyObject *t = n ? Py_BuildValue("(NNN)", bitmap(o->svalid[i], n), as_bytes(o->soff[i], (size_t)(n + 1) * 8),
                                        as_bytes(o->sval[i].p, o->sval[i].len))
                        : Py_BuildValue("(ONN)", Py_None, as_bytes(&ZERO, 8), as_bytes("", 0));
        if (!t) goto done;
        PyTuple_SET_ITEM(strs, i, t);
    }
    for (int i = 0; i < NINT; i++) {
        PyObject *t = n && !any_valid(o->ivalid[i], n)
                          ? Py_BuildValue("(OO)", Py_None, Py_None)
                          : Py_BuildValue("(NN)", n ? bitmap(o->ivalid[i], n) : Py_NewRef(Py_None),
                                          as_bytes(o->ival[i], (size_t)n * 8));
        if (!t) goto done;
        PyTuple_SET_ITEM(ints, i, t);
    }
    res = Py_BuildValue("(nOO)", n, strs, ints);
done:
    Py_XDECREF(strs);
    Py_XDECREF(ints);
    return res;
}

/* Routing, given by the caller: `X` events by category to groups 0..3 and `i` (instant) events
 * by category to the groups named with phase 'i' (6: memory), flow phases (s/f/t) of the flow
 * categories to group 4, `M` events to group 5; every event outside groups 0..3 is also counted
 * by its (ph, cat) pair. */
#define MAX_ROUTES 64
#define MAX_PAIRS 256
#define N_GROUPS 7
#define G_FLOW 4
#define G_META 5
typedef struct { const char *s; Py_ssize_t n; int group; unsigned char ph; } route_t;
typedef struct { Py_ssize_t ph0, phn, cat0, catn; int has_ph, has_cat; int64_t count; } pair_t;

static int same(const unsigned char *a, Py_ssize_t an, const char *b, Py_ssize_t bn) {
    return an == bn && memcmp(a, b, (size_t)an) == 0;
}

static int route(const rec_t *r, const unsigned char *s, const route_t *x_routes, int nx,
                 const route_t *flows, int nf) {
    if (!r->has_str[S_PH] || r->str_len[S_PH] != 1) return -1;
    unsigned char ph = s[r->str_start[S_PH]];
    const unsigned char *cat = s + r->str_start[S_CAT];
    Py_ssize_t catn = r->str_len[S_CAT];
    if ((ph == 'X' || ph == 'i') && r->has_str[S_CAT]) {
        for (int i = 0; i < nx; i++)
            if (x_routes[i].ph == ph && same(cat, catn, x_routes[i].s, x_routes[i].n)) return x_routes[i].group;
    } else if ((ph == 's' || ph == 'f' || ph == 't') && r->has_str[S_CAT]) {
        for (int i = 0; i < nf; i++) if (same(cat, catn, flows[i].s, flows[i].n)) return G_FLOW;
    } else if (ph == 'M') {
        return G_META;
    }
    return -1;
}

/* Count the (ph, cat) pair of r; 0 when the table of pairs is full. Pairs point into `s`. */
static int count_pair(pair_t *pairs, int *np, const rec_t *r, const unsigned char *s) {
    for (int i = 0; i < *np; i++) {
        pair_t *q = &pairs[i];
        if (q->has_ph == r->has_str[S_PH] && q->has_cat == r->has_str[S_CAT] &&
            (!q->has_ph || (q->phn == r->str_len[S_PH] && !memcmp(s + q->ph0, s + r->str_start[S_PH], (size_t)q->phn))) &&
            (!q->has_cat || (q->catn == r->str_len[S_CAT] && !memcmp(s + q->cat0, s + r->str_start[S_CAT], (size_t)q->catn)))) {
            q->count++;
            return 1;
        }
    }
    if (*np >= MAX_PAIRS) return 0;
    pair_t *q = &pairs[(*np)++];
    q->has_ph = r->has_str[S_PH];
    q->has_cat = r->has_str[S_CAT];
    q->ph0 = r->str_start[S_PH];
    q->phn = q->has_ph ? r->str_len[S_PH] : 0;
    q->cat0 = r->str_start[S_CAT];
    q->catn = q->has_cat ? r->str_len[S_CAT] : 0;
    q->count = 1;
    return 1;
}

static int parse_routes(PyObject *seq, route_t *out, int *n, int flows) {
    PyObject *fast = PySequence_Fast(seq, "routes must be a sequence");
    if (!fast) return -1;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(fast);
    if (k > MAX_ROUTES) { Py_DECREF(fast); PyErr_SetString(PyExc_ValueError, "too many routes"); return -1; }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i), *name = item;
        int group = G_FLOW;
        unsigned char ph = 'X';
        if (!flows && !PyArg_ParseTuple(item, "Si|b", &name, &group, &ph)) { Py_DECREF(fast); return -1; }
        if (!flows && (group < 0 || group >= N_GROUPS)) { Py_DECREF(fast); PyErr_SetString(PyExc_ValueError, "route group out of range"); return -1; }
        if (!PyBytes_Check(name)) { Py_DECREF(fast); PyErr_SetString(PyExc_TypeError, "route names are bytes"); return -1; }
        out[i].s = PyBytes_AS_STRING(name);
        out[i].n = PyBytes_GET_SIZE(name);
        out[i].group = group;
        out[i].ph = ph;
    }
    *n = (int)k;
    Py_DECREF(fast);  /* the names stay alive: the caller's sequences hold them */
    return 0;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t pos;
    PyObject *x_seq, *flow_seq;
    route_t x_routes[MAX_ROUTES], flows[MAX_ROUTES];
    int nx = 0, nf = 0;
    if (!PyArg_ParseTuple(args, "y*nOO", &view, &pos, &x_seq, &flow_seq)) return NULL;
    if (parse_routes(x_seq, x_routes, &nx, 0) || parse_routes(flow_seq, flows, &nf, 1)) {
        PyBuffer_Release(&view);
        return NULL;
    }
    P x = {(const unsigned char *)view.buf, view.len, pos};
    out_t o[N_GROUPS];
    memset(o, 0, sizeof o);
    buf_t slow = {0};
    pair_t pairs[MAX_PAIRS];
    int npairs = 0, status = 0, oom = 0;
    Py_ssize_t end = pos;
    Py_BEGIN_ALLOW_THREADS
    int need_sep = 0;
    int64_t k = 0;
    rec_t r;
    for (;;) {
        ws(&x);
        if (x.p >= x.n) { status = 0; break; }
        unsigned char c = x.s[x.p];
        if (c == ']') { status = 1; end = x.p + 1; break; }
        if (c == ',') { x.p++; need_sep = 0; continue; }
        if (need_sep || c != '{') { status = 2; break; }
        Py_ssize_t e0 = x.p;
        memset(r.has_str, 0, sizeof r.has_str);
        memset(r.has_int, 0, sizeof r.has_int);
        r.slow = 0;
        int rc = object(&x, &r, 1);
        if (rc == INCOMPLETE) { status = 0; break; }
        if (rc == BAD) { status = 2; break; }
        /* An event counts only when a separator follows it (as on the Python path): an object
         * followed by garbage is a fragment of damage, and one at the end of the buffer is
         * read again with what follows. */
        Py_ssize_t after = x.p;
        ws(&x);
        if (x.p >= x.n) { status = 0; break; }
        if (x.s[x.p] != ',' && x.s[x.p] != ']') { status = 2; break; }
        x.p = after;
        int g = r.slow ? -1 : route(&r, x.s, x_routes, nx, flows, nf);
        if (!r.slow && (g < 0 || g >= G_FLOW) && !count_pair(pairs, &npairs, &r, x.s)) r.slow = 1;
        if (r.slow) {
            int64_t span[3] = {(int64_t)e0, (int64_t)x.p, k};
            if (grow(&slow, 24)) { oom = 1; break; }
            memcpy(slow.p + slow.len, span, 24);
            slow.len += 24;
        } else if (g >= 0) {
            r.ival[I_EV] = k;
            r.has_int[I_EV] = 1;
            if (commit(&o[g], &r, x.s)) { oom = 1; break; }
        }
        k++;
        end = x.p;
        need_sep = 1;
    }
    Py_END_ALLOW_THREADS
    PyObject *groups = NULL, *counts = NULL, *res = NULL;
    if (oom) { PyErr_NoMemory(); goto done; }
    if (!(groups = PyTuple_New(N_GROUPS)) || !(counts = PyList_New(npairs))) goto done;
    for (int i = 0; i < N_GROUPS; i++) {
        PyObject *t = group_result(&o[i]);
        if (!t) goto done;
        PyTuple_SET_ITEM(groups, i, t);
    }
    for (int i = 0; i < npairs; i++) {
        pair_t *q = &pairs[i];
        PyObject *ph = q->has_ph ? PyUnicode_DecodeUTF8((const char *)x.s + q->ph0, q->phn, "replace") : Py_NewRef(Py_None);
        PyObject *cat = q->has_cat ? PyUnicode_DecodeUTF8((const char *)x.s + q->cat0, q->catn, "replace") : Py_NewRef(Py_None);
        PyObject *t = (ph && cat) ? Py_BuildValue("(NNL)", ph, cat, (long long)q->count) : NULL;
        if (!t) { Py_XDECREF(ph); Py_XDECREF(cat); goto done; }
        PyList_SET_ITEM(counts, i, t);
    }
    res = Py_BuildValue("(inOON)", status, end, groups, counts, as_bytes(slow.p, slow.len));
done:
    PyBuffer_Release(&view);
    Py_XDECREF(groups);
    Py_XDECREF(counts);
    for (int i = 0; i < N_GROUPS; i++) out_free(&o[i]);
    free(slow.p);
    return res;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(buf, pos, x_routes, flow_cats) -> (status, end, groups, pair_counts, slow): the "
     "complete trace events of buf[pos:] as Arrow buffers by group; see "
     "tracekit/sources/kineto_native.py."},
    {"nest", nest, METH_VARARGS,
     "nest(keys, start, end) -> (depth int32 bytes, parent row int64 bytes), in row order: "
     "interval nesting within groups of equal int64 keys; see tracekit/_knest.h."},
    {"frame", frame, METH_VARARGS,
     "frame(rows, columns) -> (schema capsule, array capsule): the columns as one Arrow struct "
     "array in malloc'd memory (tracekit/sources/kineto/_native/_karrow.h)."},
    {"int64s", int64s, METH_O,
     "int64s(stream capsule) -> bytes: the values of an exported int64 column."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kscan", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__kscan(void) {
    init_json_tables();
    return PyModule_Create(&module);
}
