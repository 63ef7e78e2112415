/* JSON grammar for the native Kineto scanner (included by _kscan.c only).
 *
 * Every function reads x->s[x->p .. x->n) and returns OK (x->p after the value), INCOMPLETE
 * (the buffer ended first: the caller waits for more input) or BAD (not JSON). Strings are
 * checked for escapes and UTF-8 (overlong forms and surrogates are rejected); skipped values are
 * validated as strictly as the ones that are read.
 */
#ifndef TRACEKIT_KJSON_H
#define TRACEKIT_KJSON_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { OK = 0, INCOMPLETE = -1, BAD = -2 };
#define MAX_DEPTH 256

typedef struct {
    const unsigned char *s;
    Py_ssize_t n, p;
} P;

static unsigned char BLANK[256];

static inline void ws(P *x) {
    while (x->p < x->n && BLANK[x->s[x->p]]) x->p++;
}

static int utf8_ok(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) { i++; continue; }
        int k;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) { k = 1; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { k = 2; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { k = 3; cp = c & 0x07; }
        else return 0;
        for (int j = 1; j <= k; j++) {
            if (i + j >= n || (s[i + j] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if ((k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += k + 1;
    }
    return 1;
}

#define ONES 0x0101010101010101ULL
#define HAS_ZERO(v) (((v) - ONES) & ~(v) & (ONES * 0x80))
#define HAS_LESS(v, n) (((v) - ONES * (n)) & ~(v) & (ONES * 0x80))

/* Bytes that end a run of plain string content: '"', '\\', controls and high bytes. */
static unsigned char STRING_STOP[256];

static void init_json_tables(void) {
    for (int c = 0; c < 256; c++) BLANK[c] = c == ' ' || c == '\n' || c == '\r' || c == '\t';
    for (int c = 0; c < 256; c++) STRING_STOP[c] = c == '"' || c == '\\' || c < 0x20 || c >= 0x80;
}

static inline int hexd(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* The value of four hex digits at x->s[at..at+4), or INCOMPLETE / BAD. */
static int hex4(const P *x, Py_ssize_t at) {
    int v = 0;
    for (int j = 0; j < 4; j++) {
        if (at + j >= x->n) return INCOMPLETE;
        unsigned char c = x->s[at + j];
        if (!hexd(c)) return BAD;
        v = v * 16 + (c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    return v;
}

/* At '"'. On OK, x->p is after the closing quote; *esc tells whether escapes occurred. */
static int string(P *x, int *esc) {
    Py_ssize_t start = ++x->p;
    int high = 0;
    *esc = 0;
    for (;;) {
        const unsigned char *q = x->s + x->p;
        const unsigned char *e = x->s + x->n;
        /* Eight bytes at a time while none is a quote, a backslash, a control or a high byte. */
        while (e - q >= 8) {
            uint64_t v;
            memcpy(&v, q, 8);
            uint64_t stop = HAS_ZERO(v ^ (ONES * '"')) | HAS_ZERO(v ^ (ONES * '\\')) |
                            HAS_LESS(v, 0x20) | (v & (ONES * 0x80));
            if (stop) break;
            q += 8;
        }
        while (q < e && !STRING_STOP[*q]) q++;
        if (q < e && *q >= 0x80) { high = 1; q++; x->p = q - x->s; continue; }
        x->p = q - x->s;
        if (x->p >= x->n) return INCOMPLETE;
        unsigned char c = *q;
        if (c == '"') break;
        if (c < 0x20) return BAD;
        *esc = 1; /* a backslash */
        if (x->p + 1 >= x->n) return INCOMPLETE;
        c = x->s[x->p + 1];
        if (c == 'u') {
            /* msgspec (the Python path) rejects unpaired surrogates: so does this. */
            int u = hex4(x, x->p + 2);
            if (u == INCOMPLETE || u == BAD) return u;
            if (u >= 0xDC00 && u <= 0xDFFF) return BAD;
            if (u >= 0xD800 && u <= 0xDBFF) {
                if (x->p + 7 >= x->n) return INCOMPLETE;
                if (x->s[x->p + 6] != '\\' || x->s[x->p + 7] != 'u') return BAD;
                int lo = hex4(x, x->p + 8);
                if (lo == INCOMPLETE || lo == BAD) return lo;
                if (lo < 0xDC00 || lo > 0xDFFF) return BAD;
                x->p += 6;
            }
            x->p += 6;
        } else if (strchr("\"\\/bfnrt", c) && c) {
            x->p += 2;
        } else {
            return BAD;
        }
    }
    if (high && !utf8_ok(x->s + start, x->p - start)) return BAD;
    x->p++;
    return OK;
}

/* A JSON number. *kind: 0 integer literal, 1 has a fraction, 2 has an exponent. */
static int number(P *x, int *kind) {
    Py_ssize_t p = x->p, n = x->n;
    const unsigned char *s = x->s;
    *kind = 0;
    if (p < n && s[p] == '-') p++;
    if (p >= n) return INCOMPLETE;
    if (s[p] == '0') p++;
    else if (s[p] >= '1' && s[p] <= '9') { while (p < n && s[p] >= '0' && s[p] <= '9') p++; }
    else return BAD;
    if (p < n && s[p] == '.') {
        *kind = 1;
        p++;
        if (p >= n) return INCOMPLETE;
        if (!(s[p] >= '0' && s[p] <= '9')) return BAD;
        while (p < n && s[p] >= '0' && s[p] <= '9') p++;
    }
    if (p < n && (s[p] == 'e' || s[p] == 'E')) {
        *kind = 2;
        p++;
        if (p < n && (s[p] == '+' || s[p] == '-')) p++;
        if (p >= n) return INCOMPLETE;
        if (!(s[p] >= '0' && s[p] <= '9')) return BAD;
        while (p < n && s[p] >= '0' && s[p] <= '9') p++;
    }
    if (p >= n) return INCOMPLETE; /* the number may continue in the next chunk */
    x->p = p;
    return OK;
}

static int literal(P *x, const char *word) {
    size_t k = strlen(word);
    for (size_t i = 0; i < k; i++) {
        if (x->p + (Py_ssize_t)i >= x->n) return INCOMPLETE;
        if (x->s[x->p + i] != (unsigned char)word[i]) return BAD;
    }
    x->p += k;
    return OK;
}

static int value(P *x, int depth);

/* An object key and its ':' (blanks around skipped); on OK x->p is at the value, the key's
 * contents are x->s[*k0 .. *k0 + *klen) and *esc tells whether they hold escapes. */
static int key(P *x, int *esc, Py_ssize_t *k0, Py_ssize_t *klen) {
    int r;
    if (x->s[x->p] != '"') return BAD;
    *k0 = x->p + 1;
    if ((r = string(x, esc)) != OK) return r;
    *klen = x->p - 1 - *k0;
    ws(x);
    if (x->p >= x->n) return INCOMPLETE;
    if (x->s[x->p] != ':') return BAD;
    x->p++;
    ws(x);
    return x->p >= x->n ? INCOMPLETE : OK;
}

static int container(P *x, int depth) {
    unsigned char close = x->s[x->p] == '{' ? '}' : ']';
    int obj = close == '}', r, esc;
    if (depth > MAX_DEPTH) return BAD;
    x->p++;
    ws(x);
    if (x->p >= x->n) return INCOMPLETE;
    if (x->s[x->p] == close) { x->p++; return OK; }
    for (;;) {
        Py_ssize_t k0, klen;
        if (obj && (r = key(x, &esc, &k0, &klen)) != OK) return r;
        if ((r = value(x, depth + 1)) != OK) return r;
        ws(x);
        if (x->p >= x->n) return INCOMPLETE;
        unsigned char c = x->s[x->p];
        if (c == close) { x->p++; return OK; }
        if (c != ',') return BAD;
        x->p++;
        ws(x);
        if (x->p >= x->n) return INCOMPLETE;
    }
}

/* Any JSON value at x->p (blanks already skipped). */
static int value(P *x, int depth) {
    int kind, esc;
    switch (x->s[x->p]) {
    case '"': return string(x, &esc);
    case '{': case '[': return container(x, depth);
    case 't': return literal(x, "true");
    case 'f': return literal(x, "false");
    case 'n': return literal(x, "null");
    default: return number(x, &kind);
    }
}

/* An integer literal that fits int64; 0 when it does not (or is not an integer). */
static int parse_int(const unsigned char *s, Py_ssize_t n, int64_t *out) {
    Py_ssize_t i = 0;
    int neg = 0;
    uint64_t v = 0;
    if (s[0] == '-') { neg = 1; i = 1; }
    for (; i < n; i++) {
        unsigned d = s[i] - '0';
        if (d > 9) return 0;
        if (v > (UINT64_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1) return 0;
        *out = (int64_t)(0 - v);
    } else {
        if (v > (uint64_t)INT64_MAX) return 0;
        *out = (int64_t)v;
    }
    return 1;
}

/* Decimal µs text (no exponent) → ns, rounded half to even beyond the third fraction digit. */
static int parse_ns(const unsigned char *s, Py_ssize_t n, int64_t *out) {
    Py_ssize_t i = 0;
    int neg = 0;
    unsigned __int128 v = 0;
    if (s[0] == '-') { neg = 1; i = 1; }
    for (; i < n && s[i] != '.'; i++) {
        v = v * 10 + (s[i] - '0');
        if (v > ((unsigned __int128)1 << 64)) return 0;
    }
    int digits = 0, d4 = 0, sticky = 0;
    if (i < n) i++; /* the '.' */
    for (; i < n; i++, digits++) {
        unsigned d = s[i] - '0';
        if (digits < 3) v = v * 10 + d;
        else if (digits == 3) d4 = (int)d;
        else if (d) sticky = 1;
    }
    for (; digits < 3; digits++) v *= 10;
    if (d4 > 5 || (d4 == 5 && (sticky || (v & 1)))) v += 1;
    if (neg) {
        if (v > (unsigned __int128)INT64_MAX + 1) return 0;
        *out = (int64_t)(0 - (uint64_t)v);
    } else {
        if (v > (unsigned __int128)INT64_MAX) return 0;
        *out = (int64_t)v;
    }
    return 1;
}

#endif
