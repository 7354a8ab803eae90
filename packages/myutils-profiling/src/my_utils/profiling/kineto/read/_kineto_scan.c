/* Kineto trace events straight from JSON text into the aggregator's columns.
 *
 * The optional compiled half of ``trace_scan.py``: one C pass over a run of trace events
 * (the text between two event seams that ``TraceStream`` hands over) that reads the fields
 * ``TraceAggregator`` uses and fills its columns, without building a Python object per
 * event. It is deliberately narrow: whatever it is not certain to read exactly as the typed
 * decoder (msgspec, ``trace_events.KinetoEvent``) reads it -- a value of another type, an
 * escaped key or category, a number outside 64 bits, a duplicate field, a lone surrogate,
 * deep nesting, anything that is not strict JSON -- makes it *decline* the whole run
 * (return None), and the caller decodes that run the typed way, which keeps deciding, and
 * wording, what such an event means. A declined run leaves the aggregator as it was, except
 * names it interned, which the caller removes.
 *
 * scan(text, start, end, codes, code_of, names, name_list) -> None | tuple:
 *   text       str whose characters [start, end) are events separated by commas (no brackets),
 *              e.g. '{...},{...}' (an ASCII text is read in place, without a copy); or the
 *              file's bytes (bytes, bytearray: any buffer), read in place; a run holding a
 *              byte of 0x80 or more is declined where the scan meets it (the caller decodes
 *              the run: UTF-8 is checked there)
 *   codes      dict: category (str or None) -> group code (see trace_aggregate: 0-3 device,
 *              4-5 host, 6 runtime, 7 instant, -1 not aggregated)
 *   code_of    callable(category) -> code, for a category not in codes (adds it there)
 *   names      dict: name -> id; name_list: list of names by id (new names appended here in
 *              order of first appearance, as TraceAggregator._nid does)
 * The tuple: (event count, {category: count}, dev_code, dev_name, dev_ts, dev_dur, dev_corr,
 *   host_code, host_name, host_ts, host_dur, rt_corr, rt_ts, [(ts, dur, step)],
 *   mem_ts, mem_allocated, mem_reserved, mem_device), the columns as bytes in the native
 *   layout of array typecodes b, i, d, d, q / b, i, d, d / q, d / d, d, d, b.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* The token readers are called at many places for every event: inlined, the calls' own
 * instructions (saving registers, about a sixth of a scan) go away. */
#if defined(__GNUC__) || defined(__clang__)
#define HOT static inline __attribute__((always_inline))
#else
#define HOT static inline
#endif

#define MAX_DEPTH 64          /* nesting of a skipped value; deeper: declined */
#define MAX_NUMBER 64         /* characters of one number token; longer: declined */
#define MAX_INT_DIGITS 18     /* an integer of more digits may leave int64: declined */

enum { DEV_LAST = 3, HOST_FIRST = 4, HOST_LAST = 5, RUNTIME = 6, INSTANT = 7 };

/* ---- growable byte buffers (the columns) ------------------------------------------------ */

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Buf;

static int buf_grow(Buf *b, Py_ssize_t n) {
    Py_ssize_t cap = b->cap ? b->cap * 2 : 4096;
    while (cap < b->len + n) cap *= 2;
    char *p = PyMem_Realloc(b->data, (size_t)cap);
    if (p == NULL) { PyErr_NoMemory(); return -1; }
    b->data = p;
    b->cap = cap;
    return 0;
}

/* inlined: each call's size is a constant there, and its memcpy a single move */
HOT int buf_put(Buf *b, const void *src, Py_ssize_t n) {
    if (b->len + n > b->cap && buf_grow(b, n) < 0) return -1;
    memcpy(b->data + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

/* ---- a small table from byte spans to (object, number) ---------------------------------- */

typedef struct {
    const char *key;   /* points into the scanned text, which outlives the table */
    Py_ssize_t len;
    uint64_t hash;
    PyObject *obj;     /* owned */
    long long value;
    long long count;
} Slot;

typedef struct {
    Slot *slots;
    Py_ssize_t cap, used;
} Table;

/* A word-at-a-time hash of a span (every event hashes its name and category: a byte-at-a-time
 * FNV-1a took ~5 % of a scan). Equal spans hash alike on any machine; the table compares the
 * bytes on a hit, so the hash's quality only sets how often a probe goes on. */
static uint64_t span_hash(const char *s, Py_ssize_t n) {
    const uint64_t k = 0x9E3779B97F4A7C15ULL;
    uint64_t h = (uint64_t)n * k, w;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, s + i, 8);
        h = (h ^ w) * k;
        h ^= h >> 29;
    }
    if (i < n) {
        w = 0;
        memcpy(&w, s + i, (size_t)(n - i));
        h = (h ^ w) * k;
        h ^= h >> 29;
    }
    return h ^ (h >> 32);
}

static void table_free(Table *t) {
    for (Py_ssize_t i = 0; i < t->cap; i++) Py_XDECREF(t->slots[i].obj);
    PyMem_Free(t->slots);
    t->slots = NULL;
    t->cap = t->used = 0;
}

static int table_grow(Table *t) {
    Py_ssize_t cap = t->cap ? t->cap * 2 : 64;
    Slot *slots = PyMem_Calloc((size_t)cap, sizeof(Slot));
    if (slots == NULL) { PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = 0; i < t->cap; i++) {
        Slot *s = &t->slots[i];
        if (s->key == NULL) continue;
        Py_ssize_t j = (Py_ssize_t)(s->hash & (uint64_t)(cap - 1));
        while (slots[j].key != NULL) j = (j + 1) & (cap - 1);
        slots[j] = *s;
    }
    PyMem_Free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return 0;
}

/* The slot of span (s, n): found, or a new empty one (key set, obj NULL); NULL on memory error. */
static Slot *table_slot(Table *t, const char *s, Py_ssize_t n) {
    if ((t->used + 1) * 2 > t->cap && table_grow(t) < 0) return NULL;
    uint64_t h = span_hash(s, n);
    Py_ssize_t j = (Py_ssize_t)(h & (uint64_t)(t->cap - 1));
    for (;;) {
        Slot *slot = &t->slots[j];
        if (slot->key == NULL) {
            slot->key = s;
            slot->len = n;
            slot->hash = h;
            t->used++;
            return slot;
        }
        if (slot->hash == h && slot->len == n && memcmp(slot->key, s, (size_t)n) == 0) return slot;
        j = (j + 1) & (t->cap - 1);
    }
}

/* ---- strict JSON tokens ----------------------------------------------------------------- */

typedef struct {
    const char *p, *end;
    int ascii_only;  /* the file's undecoded bytes: a non-ASCII byte declines (the caller checks UTF-8) */
} Cursor;

/* A string's plain bytes sixteen at a time where the machine has SSE2 (every x86-64), else eight
 * as one word. A block's mask has bit i set when byte i ends the plain part; the byte loops after each
 * block search stay the judges, so a block search only ever skips bytes it proved plain. Reads
 * never pass c->end: a block is only loaded when that many bytes remain. */
#if defined(__SSE2__) && !defined(MYUTILS_SCAN_PORTABLE)  /* PORTABLE: the tests build the fallbacks too */
#include <emmintrin.h>
#define BLOCK 16
typedef unsigned block_mask;
/* bytes that end a string's plain part: '"', '\\', below 0x20 (and, signed, 0x80 and above:
 * non-ASCII text then takes the byte loop, slower, never wrong) */
static inline block_mask string_stops(const char *p) {
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                          _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                             _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));
    return (block_mask)_mm_movemask_epi8(m);
}
static inline int first_bit(block_mask m) { return __builtin_ctz(m); }
#else
/* one 8-byte word: only "is there such a byte" (the byte loop finds which) */
#define BLOCK 8
typedef uint64_t block_mask;
#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
static inline uint64_t word_at(const char *p) { uint64_t w; memcpy(&w, p, 8); return w; }
/* the "has a zero byte" test on w xor '"', w xor '\\' and w minus 0x20 per byte, and any byte of
 * 0x80 or more (as SSE2's signed compare flags it): never misses one */
static inline block_mask string_stops(const char *p) {
    uint64_t w = word_at(p), q = w ^ (ONES * '"'), b = w ^ (ONES * '\\');
    return ((q - ONES) & ~q & HIGHS) | ((b - ONES) & ~b & HIGHS) | ((w - ONES * 0x20) & ~w & HIGHS) | (w & HIGHS);
}
static inline int first_bit(block_mask m) { (void)m; return 0; }
#endif

/* Digits eight at a time on a little-endian machine: in each byte of w, (w & 0xF0) ^ 0x30 and
 * ((w + 6) & 0xF0) ^ 0x30 are both zero exactly when it is '0'..'9'; a carry out of a byte only
 * comes from a non-digit and only reaches higher bytes, so the lowest flagged byte is exact. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && !defined(MYUTILS_SCAN_PORTABLE)
#define WORD_DIGITS 1
static inline uint64_t non_digits(uint64_t w) {
    const uint64_t hi = 0xF0F0F0F0F0F0F0F0ULL, zeros = 0x3030303030303030ULL;
    return ((w & hi) ^ zeros) | (((w + 0x0606060606060606ULL) & hi) ^ zeros);
}
/* The value of eight ASCII digits (the first at the lowest address): pairs, then fours, then all. */
static inline uint64_t eight_digits(uint64_t w) {
    w -= 0x3030303030303030ULL;
    w = (w * 10 + (w >> 8)) & 0x00FF00FF00FF00FFULL;
    w = (w * 100 + (w >> 16)) & 0x0000FFFF0000FFFFULL;
    return (w * 10000 + (w >> 32)) & 0xFFFFFFFFULL;
}
#else
#define WORD_DIGITS 0
#endif

static inline const char *skip_digits(const char *p, const char *end) {
#if WORD_DIGITS
    while (end - p >= 8) {
        uint64_t w, nd;
        memcpy(&w, p, 8);
        nd = non_digits(w);
        if (nd) return p + (__builtin_ctzll(nd) >> 3);
        p += 8;
    }
#endif
    while (p < end && *p >= '0' && *p <= '9') p++;
    return p;
}

static const unsigned char IS_SPACE[256] = {[' '] = 1, ['\n'] = 1, ['\r'] = 1, ['\t'] = 1};

/* Whitespace runs are short (one space after a colon, a line's indentation): a byte loop beats
 * a block search here (measured), so blocks are used for the strings only. */
HOT void skip_ws(Cursor *c) {
    const char *p = c->p, *end = c->end;
    while (p < end && IS_SPACE[(unsigned char)*p]) p++;
    c->p = p;
}

static inline int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* A string at the cursor ('"' there): its raw content span; *escaped tells a backslash was in
 * it. 0, or -1 to decline (bad escape, surrogate escape, control character, no end). */
HOT int read_string(Cursor *c, const char **s, Py_ssize_t *n, int *escaped) {
    const char *p = c->p + 1;
    *escaped = 0;
    *s = p;
    while (p < c->end) {
        /* plain bytes a block at a time (see string_stops); the byte test below decides */
        while (c->end - p >= BLOCK) {
            block_mask m = string_stops(p);
            if (m) { p += first_bit(m); break; }
            p += BLOCK;
        }
        if (p >= c->end) break;
        unsigned char ch = (unsigned char)*p;
        if (ch == '"') {
            *n = p - *s;
            c->p = p + 1;
            return 0;
        }
        if (ch < 0x20) return -1;
        if (ch >= 0x80 && c->ascii_only) return -1;  /* outside strings, any such byte declines anyway */
        if (ch == '\\') {
            *escaped = 1;
            if (p + 1 >= c->end) return -1;
            char e = p[1];
            if (e == 'u') {
                if (p + 6 > c->end) return -1;
                int v = 0;
                for (int k = 2; k < 6; k++) {
                    int h = hexval(p[k]);
                    if (h < 0) return -1;
                    v = v * 16 + h;
                }
                if (v >= 0xD800 && v <= 0xDFFF) return -1;  /* pairs and lone halves: the typed decoder decides */
                p += 6;
                continue;
            }
            if (!strchr("\"\\/bfnrt", e) || e == '\0') return -1;
            p += 2;
            continue;
        }
        p++;
    }
    return -1;
}

/* A number token at the cursor, strictly JSON. *is_int: no fraction and no exponent. */
HOT int read_number(Cursor *c, const char **s, Py_ssize_t *n, int *is_int) {
    const char *p = c->p, *start = p;
    *is_int = 1;
    if (p < c->end && *p == '-') p++;
    if (p >= c->end) return -1;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') p = skip_digits(p + 1, c->end);
    else return -1;
    if (p < c->end && *p == '.') {
        *is_int = 0;
        p++;
        if (p >= c->end || *p < '0' || *p > '9') return -1;
        p = skip_digits(p + 1, c->end);
    }
    if (p < c->end && (*p == 'e' || *p == 'E')) {
        *is_int = 0;
        p++;
        if (p < c->end && (*p == '+' || *p == '-')) p++;
        if (p >= c->end || *p < '0' || *p > '9') return -1;
        while (p < c->end && *p >= '0' && *p <= '9') p++;
    }
    *s = start;
    *n = p - start;
    c->p = p;
    return 0;
}

/* An integer token as int64; -1 to decline (too many digits, "-0"). */
HOT int int_value(const char *s, Py_ssize_t n, long long *out) {
    int neg = s[0] == '-';
    Py_ssize_t digits = n - neg;
    if (digits > MAX_INT_DIGITS) return -1;
    if (neg && digits == 1 && s[1] == '0') return -1;
    long long v = 0;
    Py_ssize_t i = neg;
#if WORD_DIGITS
    for (; n - i >= 8; i += 8) {  /* at most 18 digits: the value stays below 10**18 */
        uint64_t w;
        memcpy(&w, s + i, 8);
        v = v * 100000000LL + (long long)eight_digits(w);
    }
#endif
    for (; i < n; i++) v = v * 10 + (s[i] - '0');
    *out = neg ? -v : v;
    return 0;
}

/* Clinger's fast path: a decimal of at most 15 significant digits times 10^e, |e| <= 22, is one
 * exact double times (or over) another exact one, so one IEEE operation rounds it correctly --
 * the double dtoa gives. 1: done; 0: not such a number. */
static const double POW10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14,
                                 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int exact_decimal(const char *s, Py_ssize_t n, double *out) {
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
    (void)s; (void)n; (void)out;
    return 0;  /* wider intermediate precision (x87) could round twice: dtoa reads every number */
#else
    const char *p = s, *end = s + n;
    int neg = 0, digits = 0;
    long long m = 0, e = 0;
    if (*p == '-') { neg = 1; p++; }
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        if (m || *p != '0') { if (++digits > 15) return 0; }
        m = m * 10 + (*p - '0');
    }
    if (p < end && *p == '.') {
        for (p++; p < end && *p >= '0' && *p <= '9'; p++) {
            if (m || *p != '0') { if (++digits > 15) return 0; }
            m = m * 10 + (*p - '0');
            e--;
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        int eneg = 0;
        long long x = 0;
        p++;
        if (*p == '+' || *p == '-') eneg = *p++ == '-';
        for (; p < end; p++) { if (x < 1000) x = x * 10 + (*p - '0'); }
        e += eneg ? -x : x;
    }
    if (e < -22 || e > 22) return 0;
    double v = (double)m;
    v = e < 0 ? v / POW10[-e] : v * POW10[e];
    *out = neg ? -v : v;
    return 1;
#endif
}

/* A number token as a finite double, as the typed decoder gives it; -1 to decline. */
static int float_value(const char *s, Py_ssize_t n, int is_int, double *out) {
    if (is_int) {
        long long v;
        if (int_value(s, n, &v) < 0) return -1;
        *out = (double)v;
        return 0;
    }
    if (exact_decimal(s, n, out)) return 0;
    char tmp[MAX_NUMBER + 1];
    if (n > MAX_NUMBER) return -1;
    memcpy(tmp, s, (size_t)n);
    tmp[n] = '\0';
    char *stop = NULL;
    double v = PyOS_string_to_double(tmp, &stop, NULL);  /* correctly rounded (dtoa), as the decoders */
    if (v == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return -1; }
    if (stop != tmp + n || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

/* An object's key and its ':' (unescaped keys only: an escaped one is declined). 0, or -1 to decline. */
HOT int read_key(Cursor *c, const char **k, Py_ssize_t *kn) {
    int esc;
    skip_ws(c);
    if (c->p >= c->end || *c->p != '"' || read_string(c, k, kn, &esc) < 0 || esc) return -1;
    skip_ws(c);
    if (c->p >= c->end || *c->p != ':') return -1;
    c->p++;
    skip_ws(c);
    return 0;
}

/* After a member's value: 1 when another member follows (',' taken), 0 at `close` (taken), -1 otherwise. */
HOT int next_member(Cursor *c, char close) {
    skip_ws(c);
    if (c->p >= c->end) return -1;
    if (*c->p == ',') { c->p++; return 1; }
    if (*c->p == close) { c->p++; return 0; }
    return -1;
}

static int skip_value(Cursor *c, int depth);

static int skip_container(Cursor *c, int depth, char close) {
    if (depth > MAX_DEPTH) return -1;
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == close) { c->p++; return 0; }
    for (;;) {
        skip_ws(c);
        if (close == '}') {  /* a skipped object's keys may hold escapes */
            const char *s; Py_ssize_t n; int esc;
            if (c->p >= c->end || *c->p != '"' || read_string(c, &s, &n, &esc) < 0) return -1;
            skip_ws(c);
            if (c->p >= c->end || *c->p != ':') return -1;
            c->p++;
            skip_ws(c);
        }
        if (skip_value(c, depth + 1) < 0) return -1;
        int more = next_member(c, close);
        if (more <= 0) return more;
    }
}

static int skip_value(Cursor *c, int depth) {
    if (c->p >= c->end) return -1;
    char ch = *c->p;
    const char *s; Py_ssize_t n; int flag;
    switch (ch) {
    case '"': return read_string(c, &s, &n, &flag);
    case '{': return skip_container(c, depth, '}');
    case '[': return skip_container(c, depth, ']');
    case 't': if (c->end - c->p >= 4 && memcmp(c->p, "true", 4) == 0) { c->p += 4; return 0; } return -1;
    case 'f': if (c->end - c->p >= 5 && memcmp(c->p, "false", 5) == 0) { c->p += 5; return 0; } return -1;
    case 'n': if (c->end - c->p >= 4 && memcmp(c->p, "null", 4) == 0) { c->p += 4; return 0; } return -1;
    default:
        if (ch == '-' || (ch >= '0' && ch <= '9')) return read_number(c, &s, &n, &flag);
        return -1;
    }
}

static inline int at_null(Cursor *c) {
    if (c->end - c->p >= 4 && memcmp(c->p, "null", 4) == 0) { c->p += 4; return 1; }
    return 0;
}

/* ---- one event -------------------------------------------------------------------------- */

typedef struct {
    int has_ph, has_cat, has_name, has_ts, has_dur, has_args;
    const char *ph; Py_ssize_t ph_len; int ph_null;
    const char *cat; Py_ssize_t cat_len; int cat_null;
    const char *name; Py_ssize_t name_len; int name_escaped;
    double ts, dur;
    long long corr;
    int has_corr, has_alloc, has_reserved, has_device;
    double alloc, reserved;
    int reserved_null;
    long long device;
} Event;

static inline int key_is(const char *s, Py_ssize_t n, const char *lit) {
    size_t k = strlen(lit);
    return (size_t)n == k && memcmp(s, lit, k) == 0;
}

/* A number for a float field (ts, dur, counters). */
HOT int float_field(Cursor *c, double *out) {
    const char *s; Py_ssize_t n; int is_int;
    if (c->p >= c->end || !(*c->p == '-' || (*c->p >= '0' && *c->p <= '9'))) return -1;
    if (read_number(c, &s, &n, &is_int) < 0) return -1;
    return float_value(s, n, is_int, out);
}

/* An integer for an int64 field (correlation, device type). */
HOT int int_field(Cursor *c, long long *out) {
    const char *s; Py_ssize_t n; int is_int;
    if (c->p >= c->end || !(*c->p == '-' || (*c->p >= '0' && *c->p <= '9'))) return -1;
    if (read_number(c, &s, &n, &is_int) < 0 || !is_int) return -1;
    return int_value(s, n, out);
}

/* A string or null field (ph, cat): unescaped strings only. */
HOT int text_or_null(Cursor *c, const char **s, Py_ssize_t *n, int *is_null) {
    int esc;
    if (at_null(c)) { *is_null = 1; return 0; }
    *is_null = 0;
    if (c->p >= c->end || *c->p != '"') return -1;
    if (read_string(c, s, n, &esc) < 0 || esc) return -1;
    return 0;
}

static int read_args(Cursor *c, Event *ev) {
    if (c->p >= c->end || *c->p != '{') return -1;
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') { c->p++; return 0; }
    for (;;) {
        const char *k; Py_ssize_t kn;
        if (read_key(c, &k, &kn) < 0) return -1;
        if (key_is(k, kn, "correlation")) {
            if (ev->has_corr++ || int_field(c, &ev->corr) < 0) return -1;
        } else if (key_is(k, kn, "Total Allocated")) {
            if (ev->has_alloc++ || float_field(c, &ev->alloc) < 0) return -1;
        } else if (key_is(k, kn, "Total Reserved")) {
            if (ev->has_reserved++) return -1;
            if (at_null(c)) ev->reserved_null = 1;
            else if (float_field(c, &ev->reserved) < 0) return -1;
        } else if (key_is(k, kn, "Device Type")) {
            if (ev->has_device++ || int_field(c, &ev->device) < 0) return -1;
        } else if (skip_value(c, 2) < 0) {
            return -1;
        }
        int more = next_member(c, '}');
        if (more <= 0) return more;
    }
}

static int read_event(Cursor *c, Event *ev) {
    memset(ev, 0, sizeof(*ev));
    ev->name = "";  /* absent: "" (a table key is never NULL) */
    ev->corr = -1;
    ev->device = -1;
    if (c->p >= c->end || *c->p != '{') return -1;
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') { c->p++; return 0; }
    for (;;) {
        const char *k; Py_ssize_t kn;
        if (read_key(c, &k, &kn) < 0) return -1;
        int r = 0;
        if (key_is(k, kn, "ph")) {
            r = ev->has_ph++ ? -1 : text_or_null(c, &ev->ph, &ev->ph_len, &ev->ph_null);
        } else if (key_is(k, kn, "cat")) {
            r = ev->has_cat++ ? -1 : text_or_null(c, &ev->cat, &ev->cat_len, &ev->cat_null);
        } else if (key_is(k, kn, "name")) {
            if (ev->has_name++ || c->p >= c->end || *c->p != '"') r = -1;
            else r = read_string(c, &ev->name, &ev->name_len, &ev->name_escaped);
        } else if (key_is(k, kn, "ts")) {
            r = ev->has_ts++ ? -1 : float_field(c, &ev->ts);
        } else if (key_is(k, kn, "dur")) {
            r = ev->has_dur++ ? -1 : float_field(c, &ev->dur);
        } else if (key_is(k, kn, "args")) {
            r = ev->has_args++ ? -1 : read_args(c, ev);
        } else {
            r = skip_value(c, 1);
        }
        if (r < 0) return -1;
        int more = next_member(c, '}');
        if (more <= 0) return more;
    }
}

/* ---- the scan --------------------------------------------------------------------------- */

typedef struct {
    Buf dev_code, dev_name, dev_ts, dev_dur, dev_corr;
    Buf host_code, host_name, host_ts, host_dur;
    Buf rt_corr, rt_ts;
    Buf mem_ts, mem_alloc, mem_res, mem_dev;
} Columns;

#define N_COLUMNS 15

static Buf *column(Columns *cols, int i) { return &((Buf *)cols)[i]; }

/* The UTF-8 of a JSON string's content with its escapes resolved (read_string checked them: simple
 * escapes and \uXXXX outside the surrogates) into out (at least n bytes: never longer than the raw). */
static Py_ssize_t unescape(const char *s, Py_ssize_t n, char *out) {
    Py_ssize_t o = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch != '\\') { out[o++] = ch; continue; }
        char e = s[++i];
        switch (e) {
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'n': out[o++] = '\n'; break;
        case 'r': out[o++] = '\r'; break;
        case 't': out[o++] = '\t'; break;
        case 'u': {
            unsigned v = 0;
            for (int k = 1; k <= 4; k++) v = v * 16 + (unsigned)hexval(s[i + k]);
            i += 4;
            if (v < 0x80) out[o++] = (char)v;
            else if (v < 0x800) { out[o++] = (char)(0xC0 | (v >> 6)); out[o++] = (char)(0x80 | (v & 0x3F)); }
            else {
                out[o++] = (char)(0xE0 | (v >> 12));
                out[o++] = (char)(0x80 | ((v >> 6) & 0x3F));
                out[o++] = (char)(0x80 | (v & 0x3F));
            }
            break;
        }
        default: out[o++] = e;  /* " \ / */
        }
    }
    return o;
}

/* The name of an event as UTF-8: the raw span, or (escaped) its resolution in *scratch; NULL on memory error. */
static const char *plain_name(const Event *ev, Buf *scratch, Py_ssize_t *n) {
    if (!ev->name_escaped) { *n = ev->name_len; return ev->name; }
    scratch->len = 0;
    if (ev->name_len > scratch->cap) {
        char *p = PyMem_Realloc(scratch->data, (size_t)ev->name_len);
        if (p == NULL) { PyErr_NoMemory(); return NULL; }
        scratch->data = p;
        scratch->cap = ev->name_len;
    }
    *n = unescape(ev->name, ev->name_len, scratch->data);
    return scratch->data;
}

/* The id of a name (interned into names/name_list on first sight); -1 with an error set. Spans are
 * the raw text: two spellings of one name are two slots that find the same id in names. */
static long long name_id(Table *seen, const Event *ev, Buf *scratch, PyObject *names, PyObject *name_list) {
    Slot *slot = table_slot(seen, ev->name, ev->name_len);
    if (slot == NULL) return -1;
    if (slot->obj != NULL) return slot->value;
    Py_ssize_t n;
    const char *text = plain_name(ev, scratch, &n);
    if (text == NULL) return -1;
    PyObject *name = PyUnicode_DecodeUTF8(text, n, "strict");
    if (name == NULL) return -1;
    slot->obj = name;
    PyObject *id = PyDict_GetItemWithError(names, name);
    if (id == NULL) {
        if (PyErr_Occurred()) return -1;
        Py_ssize_t next = PyList_GET_SIZE(name_list);
        if (next > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "more than 2**31 distinct names in one trace");
            return -1;
        }
        PyObject *value = PyLong_FromSsize_t(next);
        if (value == NULL) return -1;
        int bad = PyDict_SetItem(names, name, value) < 0 || PyList_Append(name_list, name) < 0;
        Py_DECREF(value);
        if (bad) return -1;
        slot->value = next;
    } else {
        slot->value = PyLong_AsLongLong(id);
        if (slot->value == -1 && PyErr_Occurred()) return -1;
    }
    return slot->value;
}

/* Whether a host name (UTF-8, escapes resolved) is a ProfilerStep#N span: 1 with *step, 0 not,
 * -2 to decline: non-ASCII after the '#' (Python's \d reads other digits), a final newline
 * (which '$' lets through), or more digits than int64 holds. */
static int step_number(const char *name, Py_ssize_t len, long long *step) {
    static const char prefix[] = "ProfilerStep#";
    const Py_ssize_t k = (Py_ssize_t)sizeof(prefix) - 1;
    if (len <= k || memcmp(name, prefix, (size_t)k) != 0) return 0;
    long long v = 0;
    for (Py_ssize_t i = k; i < len; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (ch == '\n' && i == len - 1 && i > k) return -2;
        if (ch >= 0x80) return -2;
        if (ch < '0' || ch > '9') return 0;
        if (i - k >= MAX_INT_DIGITS) return -2;
        v = v * 10 + (ch - '0');
    }
    *step = v;
    return 1;
}

/* 1 = declined; 0 = done; -1 = error set. */
static int scan_events(const char *text, Py_ssize_t size, PyObject *codes, PyObject *code_of,
                       PyObject *names, PyObject *name_list, Table *cats, Slot *no_cat, Table *seen,
                       Buf *scratch, Columns *cols, PyObject *steps, long long *count, int ascii_only) {
    Cursor c = {text, text + size, ascii_only};
    Event ev;
    skip_ws(&c);
    if (c.p >= c.end) return 1;
    for (;;) {
        if (read_event(&c, &ev) < 0) return 1;
        (*count)++;
        /* the category: its code, and its count (None: absent or null) */
        int cat_none = !ev.has_cat || ev.cat_null;
        Slot *cs = cat_none ? no_cat : table_slot(cats, ev.cat, ev.cat_len);
        if (cs == NULL) return -1;
        if (cs->obj == NULL) {
            PyObject *cat = cat_none ? Py_NewRef(Py_None) : PyUnicode_DecodeUTF8(ev.cat, ev.cat_len, "strict");
            if (cat == NULL) return -1;
            cs->obj = cat;
            PyObject *code = PyDict_GetItemWithError(codes, cat);
            if (code == NULL) {
                if (PyErr_Occurred()) return -1;
                code = PyObject_CallOneArg(code_of, cat);
                if (code == NULL) return -1;
                cs->value = PyLong_AsLongLong(code);
                Py_DECREF(code);
            } else {
                cs->value = PyLong_AsLongLong(code);
            }
            if (cs->value == -1 && PyErr_Occurred()) return -1;
        }
        cs->count++;
        long long code = cs->value;
        if (code >= 0) {
            int is_x = ev.has_ph && !ev.ph_null && ev.ph_len == 1 && ev.ph[0] == 'X';
            if (is_x) {
                if (!ev.has_ts) return 1;  /* no ts: the event-by-event reading says where */
                if (code <= DEV_LAST) {
                    long long nid = name_id(seen, &ev, scratch, names, name_list);
                    if (nid == -1) return -1;
                    signed char g = (signed char)code;
                    int32_t n32 = (int32_t)nid;
                    if (buf_put(&cols->dev_ts, &ev.ts, 8) < 0 || buf_put(&cols->dev_dur, &ev.dur, 8) < 0
                        || buf_put(&cols->dev_corr, &ev.corr, 8) < 0 || buf_put(&cols->dev_code, &g, 1) < 0
                        || buf_put(&cols->dev_name, &n32, 4) < 0) return -1;
                } else if (code == RUNTIME) {
                    if (ev.corr != -1
                        && (buf_put(&cols->rt_corr, &ev.corr, 8) < 0 || buf_put(&cols->rt_ts, &ev.ts, 8) < 0))
                        return -1;
                } else if (code <= HOST_LAST) {
                    long long step = 0;
                    Py_ssize_t len;
                    const char *name = plain_name(&ev, scratch, &len);
                    if (name == NULL) return -1;
                    int is_step = step_number(name, len, &step);
                    if (is_step == -2) return 1;
                    if (is_step) {
                        PyObject *t = Py_BuildValue("(ddL)", ev.ts, ev.dur, step);
                        if (t == NULL) return -1;
                        int bad = PyList_Append(steps, t) < 0;
                        Py_DECREF(t);
                        if (bad) return -1;
                    } else {
                        long long nid = name_id(seen, &ev, scratch, names, name_list);
                        if (nid == -1) return -1;
                        signed char g = (signed char)code;
                        int32_t n32 = (int32_t)nid;
                        if (buf_put(&cols->host_ts, &ev.ts, 8) < 0 || buf_put(&cols->host_dur, &ev.dur, 8) < 0
                            || buf_put(&cols->host_code, &g, 1) < 0 || buf_put(&cols->host_name, &n32, 4) < 0)
                            return -1;
                    }
                }
            } else if (code == INSTANT && ev.has_ph && !ev.ph_null && ev.ph_len == 1 && ev.ph[0] == 'i') {
                Py_ssize_t len;
                const char *name = plain_name(&ev, scratch, &len);
                if (name == NULL) return -1;
                if (!key_is(name, len, "[memory]") || !ev.has_alloc) goto next;
                if (!ev.has_ts || ev.device < -128 || ev.device > 127) return 1;
                double reserved = ev.reserved_null ? 0.0 : ev.reserved;  /* absent: 0.0; null: 0 */
                signed char d = (signed char)ev.device;
                if (buf_put(&cols->mem_ts, &ev.ts, 8) < 0 || buf_put(&cols->mem_alloc, &ev.alloc, 8) < 0
                    || buf_put(&cols->mem_res, &reserved, 8) < 0 || buf_put(&cols->mem_dev, &d, 1) < 0)
                    return -1;
            }
        }
    next:
        skip_ws(&c);
        if (c.p >= c.end) return 0;
        if (*c.p != ',') return 1;
        c.p++;
        skip_ws(&c);
    }
}

static PyObject *scan(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "scan(text, start, end, codes, code_of, names, name_list)");
        return NULL;
    }
    PyObject *text = args[0], *codes = args[3], *code_of = args[4], *names = args[5], *name_list = args[6];
    int is_text = PyUnicode_Check(text);
    if ((!is_text && !PyObject_CheckBuffer(text)) || !PyDict_Check(codes) || !PyDict_Check(names)
            || !PyList_Check(name_list)) {
        PyErr_SetString(PyExc_TypeError, "scan(str | bytes-like, int, int, dict, callable, dict, list)");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]), end = PyLong_AsSsize_t(args[2]);
    if ((start == -1 || end == -1) && PyErr_Occurred()) return NULL;
    Py_buffer view = {0};
    int viewed = 0;  /* the buffer is released at the end: the tables' keys point into it */
    if (!is_text) {
        if (PyObject_GetBuffer(text, &view, PyBUF_SIMPLE) < 0) return NULL;
        viewed = 1;
    }
    Py_ssize_t length = is_text ? PyUnicode_GET_LENGTH(text) : view.len;
    if (start < 0 || end < start || end > length) {
        if (viewed) PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "scan: 0 <= start <= end <= len(text)");
        return NULL;
    }
    PyObject *piece = NULL;  /* a non-ASCII text: the slice, encoded (character and byte offsets differ) */
    Py_ssize_t size;
    const char *utf8;
    if (!is_text) {
        utf8 = (const char *)view.buf + start;
        size = end - start;  /* a non-ASCII byte declines the run when it is met (Cursor.ascii_only) */
    } else if (PyUnicode_IS_ASCII(text)) {
        utf8 = (const char *)PyUnicode_DATA(text) + start;
        size = end - start;
    } else {
        piece = PyUnicode_Substring(text, start, end);
        if (piece == NULL) return NULL;
        utf8 = PyUnicode_AsUTF8AndSize(piece, &size);
        if (utf8 == NULL) {  /* a lone surrogate in the text: the typed decoder decides */
            PyErr_Clear();
            Py_DECREF(piece);
            Py_RETURN_NONE;
        }
    }
    Columns cols;
    memset(&cols, 0, sizeof(cols));
    Table cats = {0}, seen = {0};
    Slot no_cat;  /* the events without a category (absent or null): None */
    memset(&no_cat, 0, sizeof(no_cat));
    no_cat.key = "";
    PyObject *steps = PyList_New(0), *result = NULL;
    long long count = 0;
    if (steps == NULL) {
        Py_XDECREF(piece);
        if (viewed) PyBuffer_Release(&view);
        return NULL;
    }
    Buf scratch = {0};
    int r = scan_events(utf8, size, codes, code_of, names, name_list, &cats, &no_cat, &seen, &scratch, &cols, steps,
                        &count, !is_text);
    PyMem_Free(scratch.data);
    if (r == 1) {
        result = Py_NewRef(Py_None);
    } else if (r == 0) {
        PyObject *counts = PyDict_New();
        result = counts == NULL ? NULL : PyTuple_New(3 + N_COLUMNS);
        if (result != NULL) {
            PyTuple_SET_ITEM(result, 0, PyLong_FromLongLong(count));
            PyTuple_SET_ITEM(result, 1, counts);
            counts = NULL;
            for (int i = 0; i < N_COLUMNS; i++) {
                Buf *b = column(&cols, i);
                PyTuple_SET_ITEM(result, 2 + i + (i >= 11), PyBytes_FromStringAndSize(b->data ? b->data : "", b->len));
            }
            PyTuple_SET_ITEM(result, 13, Py_NewRef(steps));
            for (Py_ssize_t i = 0; i < 3 + N_COLUMNS; i++) {
                if (PyTuple_GET_ITEM(result, i) == NULL) { Py_CLEAR(result); break; }
            }
        }
        Py_XDECREF(counts);
        if (result != NULL) {
            PyObject *out = PyTuple_GET_ITEM(result, 1);
            for (Py_ssize_t i = -1; i < cats.cap; i++) {
                Slot *s = i < 0 ? &no_cat : &cats.slots[i];
                if (s->key == NULL || s->obj == NULL) continue;
                PyObject *n = PyLong_FromLongLong(s->count);
                if (n == NULL || PyDict_SetItem(out, s->obj, n) < 0) { Py_XDECREF(n); Py_CLEAR(result); break; }
                Py_DECREF(n);
            }
        }
    }
    for (int i = 0; i < N_COLUMNS; i++) PyMem_Free(column(&cols, i)->data);
    table_free(&cats);
    table_free(&seen);
    Py_XDECREF(no_cat.obj);
    Py_XDECREF(piece);  /* last: the tables' keys pointed into it (or into the buffer) */
    if (viewed) PyBuffer_Release(&view);
    Py_DECREF(steps);
    return result;
}

/* ---- finish: step indices, launch times, grouped sums ------------------------------------ */

/* A contiguous buffer of `itemsize`-byte items; 0, or -1 with an error set. */
static int items_of(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->len % itemsize != 0) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "%s: a buffer of %zd-byte items", what, itemsize);
        return -1;
    }
    return 0;
}

/* step_index(starts, ends, times) -> bytes of int32: for each time, the index i of the last start
 * <= time (bisect_right - 1) when time < ends[i], else -1. starts/ends/times: doubles. */
static PyObject *step_index(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3) { PyErr_SetString(PyExc_TypeError, "step_index(starts, ends, times)"); return NULL; }
    Py_buffer vs, ve, vt;
    if (items_of(args[0], &vs, 8, "starts") < 0) return NULL;
    if (items_of(args[1], &ve, 8, "ends") < 0) { PyBuffer_Release(&vs); return NULL; }
    if (items_of(args[2], &vt, 8, "times") < 0) { PyBuffer_Release(&vs); PyBuffer_Release(&ve); return NULL; }
    PyObject *out = NULL;
    Py_ssize_t ns = vs.len / 8, nt = vt.len / 8;
    if (ve.len / 8 != ns) {
        PyErr_SetString(PyExc_ValueError, "step_index: as many ends as starts");
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, nt * 4);
    if (out == NULL) goto done;
    const double *starts = vs.buf, *ends = ve.buf, *times = vt.buf;
    int32_t *idx = (int32_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t k = 0; k < nt; k++) {
        double t = times[k];
        Py_ssize_t lo = 0, hi = ns;
        while (lo < hi) {  /* bisect_right: the first start > t */
            Py_ssize_t mid = (lo + hi) / 2;
            if (t < starts[mid]) hi = mid; else lo = mid + 1;
        }
        Py_ssize_t i = lo - 1;
        idx[k] = (i >= 0 && t < ends[i]) ? (int32_t)i : -1;
    }
done:
    PyBuffer_Release(&vs); PyBuffer_Release(&ve); PyBuffer_Release(&vt);
    return out;
}

/* launch_times(corr, ts, rt_corr, rt_ts) -> bytes of doubles: per device row, the time of the first
 * runtime call (file order) with its correlation when corr >= 0 and one exists, else its own ts. */
static PyObject *launch_times(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4) { PyErr_SetString(PyExc_TypeError, "launch_times(corr, ts, rt_corr, rt_ts)"); return NULL; }
    Py_buffer v[4];
    static const char *what[4] = {"corr", "ts", "rt_corr", "rt_ts"};
    int got = 0;
    PyObject *out = NULL;
    long long *keys = NULL;
    double *vals = NULL;
    char *used = NULL;
    for (; got < 4; got++) if (items_of(args[got], &v[got], 8, what[got]) < 0) goto done;
    Py_ssize_t n = v[0].len / 8, nr = v[2].len / 8;
    if (v[1].len / 8 != n || v[3].len / 8 != nr) {
        PyErr_SetString(PyExc_ValueError, "launch_times: columns of unequal lengths");
        goto done;
    }
    Py_ssize_t cap = 16;
    while (cap < 2 * nr) cap *= 2;
    keys = PyMem_Malloc((size_t)cap * sizeof(long long));
    vals = PyMem_Malloc((size_t)cap * sizeof(double));
    used = PyMem_Calloc((size_t)cap, 1);
    if (keys == NULL || vals == NULL || used == NULL) { PyErr_NoMemory(); goto done; }
    const long long *rc = v[2].buf;
    const double *rt = v[3].buf;
    for (Py_ssize_t k = 0; k < nr; k++) {
        if (rc[k] < 0) continue;  /* never looked up: a device row with a negative correlation keeps its ts */
        uint64_t h = (uint64_t)rc[k] * 0x9E3779B97F4A7C15ULL;
        Py_ssize_t j = (Py_ssize_t)(h >> 32) & (cap - 1);
        while (used[j] && keys[j] != rc[k]) j = (j + 1) & (cap - 1);
        if (!used[j]) { used[j] = 1; keys[j] = rc[k]; vals[j] = rt[k]; }  /* the first one stays */
    }
    out = PyBytes_FromStringAndSize(NULL, n * 8);
    if (out == NULL) goto done;
    const long long *dc = v[0].buf;
    const double *dt = v[1].buf;
    double *res = (double *)PyBytes_AS_STRING(out);
    for (Py_ssize_t k = 0; k < n; k++) {
        res[k] = dt[k];
        if (dc[k] < 0) continue;
        uint64_t h = (uint64_t)dc[k] * 0x9E3779B97F4A7C15ULL;
        Py_ssize_t j = (Py_ssize_t)(h >> 32) & (cap - 1);
        while (used[j]) {
            if (keys[j] == dc[k]) { res[k] = vals[j]; break; }
            j = (j + 1) & (cap - 1);
        }
    }
done:
    for (int i = 0; i < got; i++) PyBuffer_Release(&v[i]);
    PyMem_Free(keys); PyMem_Free(vals); PyMem_Free(used);
    return out;
}

/* numpy's pairwise summation of a[0:n] (8 running sums per block of up to 128, halves above):
 * trace_aggregate._pairwise, digit for digit. */
static double pairwise(const double *a, Py_ssize_t n) {
    if (n < 8) {
        double res = 0.0;
        for (Py_ssize_t i = 0; i < n; i++) res += a[i];
        return res;
    }
    if (n <= 128) {
        double r[8];
        for (int k = 0; k < 8; k++) r[k] = a[k];
        Py_ssize_t end = n - n % 8, i;
        for (i = 8; i < end; i += 8)
            for (int k = 0; k < 8; k++) r[k] += a[i + k];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (i = end; i < n; i++) res += a[i];
        return res;
    }
    Py_ssize_t half = n / 2;
    half -= half % 8;
    return pairwise(a, half) + pairwise(a + half, n - half);
}

typedef struct {
    int32_t g, n, si;
    Py_ssize_t at;  /* row order in the file: keeps the sort stable */
} RowKey;

static int row_cmp(const void *x, const void *y) {
    const RowKey *a = x, *b = y;
    if (a->g != b->g) return a->g < b->g ? -1 : 1;
    if (a->n != b->n) return a->n < b->n ? -1 : 1;
    if (a->si != b->si) return a->si < b->si ? -1 : 1;
    return a->at < b->at ? -1 : (a->at > b->at);
}

static int same_key(const RowKey *a, const RowKey *b) { return a->g == b->g && a->n == b->n && a->si == b->si; }

/* The four column buffers of a grouping helper (item sizes `size`), all of one row count: that
 * count, or -1 with an exception set and no buffer held. */
static Py_ssize_t four_columns(PyObject *const *args, Py_buffer v[4], const Py_ssize_t size[4],
                               const char *const what[4], const char *func) {
    int got = 0;
    for (; got < 4; got++)
        if (items_of(args[got], &v[got], size[got], what[got]) < 0) goto fail;
    for (int i = 1; i < 4; i++) {
        if (v[i].len / size[i] != v[0].len / size[0]) {
            PyErr_Format(PyExc_ValueError, "%s: columns of unequal lengths", func);
            goto fail;
        }
    }
    return v[0].len / size[0];
fail:
    for (int i = 0; i < got; i++) PyBuffer_Release(&v[i]);
    return -1;
}

/* One key of group_rows and where its durations lie in the gathered column. */
typedef struct {
    int32_t g, n, si;
    Py_ssize_t first, count;
} Group;

static int group_cmp(const void *x, const void *y) {
    const Group *a = x, *b = y;
    if (a->g != b->g) return a->g < b->g ? -1 : 1;
    if (a->n != b->n) return a->n < b->n ? -1 : 1;
    return (a->si > b->si) - (a->si < b->si);
}

static inline Py_ssize_t group_hash(int32_t g, int32_t n, int32_t si, Py_ssize_t cap) {
    uint64_t h = ((uint64_t)(uint32_t)g << 56) ^ ((uint64_t)(uint32_t)n << 20) ^ (uint64_t)(uint32_t)si;
    h *= 0x9E3779B97F4A7C15ULL;
    return (Py_ssize_t)(h >> 32) & (cap - 1);
}

/* The table of keys (slot -> group index, -1 empty), rebuilt twice as large past half full. 0, or -1 (memory). */
static int group_table_grow(int32_t **slots, Py_ssize_t *cap, const Group *groups, Py_ssize_t used) {
    Py_ssize_t ncap = *cap ? *cap * 2 : 256;
    int32_t *ns = PyMem_Malloc((size_t)ncap * sizeof(int32_t));
    if (ns == NULL) { PyErr_NoMemory(); return -1; }
    memset(ns, 0xff, (size_t)ncap * sizeof(int32_t));
    for (Py_ssize_t u = 0; u < used; u++) {
        Py_ssize_t j = group_hash(groups[u].g, groups[u].n, groups[u].si, ncap);
        while (ns[j] >= 0) j = (j + 1) & (ncap - 1);
        ns[j] = (int32_t)u;
    }
    PyMem_Free(*slots);
    *slots = ns;
    *cap = ncap;
    return 0;
}

/* group_rows(group, name, step, dur) -> [(group, name, step, total, count, max, min)] sorted by
 * (group, name, step): per key, the sum trace_aggregate._reduceat_sum gives over its durations in
 * file order (the first plus the pairwise sum of the rest), their count, max and min (the first
 * largest / smallest, as Python's max and min). Columns: int8, int32, int32, double.
 * A trace has up to millions of rows and some hundreds of keys: the rows are grouped through a
 * hash table of the keys (one pass to number them, one to gather each group's durations in file
 * order) and only the distinct keys are sorted (a sort of every row was a tenth of a command). */
static PyObject *group_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4) { PyErr_SetString(PyExc_TypeError, "group_rows(group, name, step, dur)"); return NULL; }
    Py_buffer v[4];
    static const Py_ssize_t size[4] = {1, 4, 4, 8};
    static const char *const what[4] = {"group", "name", "step", "dur"};
    Py_ssize_t n = four_columns(args, v, size, what, "group_rows");
    if (n < 0) return NULL;
    PyObject *out = NULL;
    Group *groups = NULL;
    int32_t *slots = NULL, *which = NULL;
    Py_ssize_t *next = NULL;
    double *run = NULL;
    Py_ssize_t cap = 0, used = 0, room = 0;
    const signed char *g = v[0].buf;
    const int32_t *nm = v[1].buf, *si = v[2].buf;
    const double *dur = v[3].buf;
    which = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    run = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(double));
    if (which == NULL || run == NULL) { PyErr_NoMemory(); goto done; }
    if (group_table_grow(&slots, &cap, groups, used) < 0) goto done;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t j = group_hash(g[k], nm[k], si[k], cap);
        int32_t u;
        while ((u = slots[j]) >= 0 && !(groups[u].g == g[k] && groups[u].n == nm[k] && groups[u].si == si[k]))
            j = (j + 1) & (cap - 1);
        if (u < 0) {
            if (used == INT32_MAX) { PyErr_SetString(PyExc_OverflowError, "group_rows: more than 2**31 keys"); goto done; }
            if (used == room) {
                Py_ssize_t nroom = room ? room * 2 : 64;
                Group *ng = PyMem_Realloc(groups, (size_t)nroom * sizeof(Group));
                if (ng == NULL) { PyErr_NoMemory(); goto done; }
                groups = ng;
                room = nroom;
            }
            u = (int32_t)used++;
            groups[u] = (Group){g[k], nm[k], si[k], 0, 0};
            slots[j] = u;
            if (used * 2 > cap && group_table_grow(&slots, &cap, groups, used) < 0) goto done;
        }
        which[k] = u;
        groups[u].count++;
    }
    next = PyMem_Malloc((size_t)(used ? used : 1) * sizeof(Py_ssize_t));
    if (next == NULL) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t u = 0, at = 0; u < used; u++) { groups[u].first = next[u] = at; at += groups[u].count; }
    for (Py_ssize_t k = 0; k < n; k++) run[next[which[k]]++] = dur[k];
    if (used > 1) qsort(groups, (size_t)used, sizeof(Group), group_cmp);  /* groups is NULL when there are none */
    out = PyList_New(used);
    if (out == NULL) goto done;
    for (Py_ssize_t u = 0; u < used; u++) {
        const double *d = run + groups[u].first;
        Py_ssize_t cnt = groups[u].count;
        double mx = d[0], mn = d[0];
        for (Py_ssize_t i = 1; i < cnt; i++) {
            if (d[i] > mx) mx = d[i];
            if (d[i] < mn) mn = d[i];
        }
        double total = cnt < 2 ? d[0] : d[0] + pairwise(d + 1, cnt - 1);
        PyObject *row = Py_BuildValue("(iiidndd)", (int)groups[u].g, (int)groups[u].n, (int)groups[u].si,
                                      total, cnt, mx, mn);
        if (row == NULL) { Py_CLEAR(out); goto done; }
        PyList_SET_ITEM(out, u, row);
    }
done:
    for (int i = 0; i < 4; i++) PyBuffer_Release(&v[i]);
    PyMem_Free(groups); PyMem_Free(slots); PyMem_Free(which); PyMem_Free(next); PyMem_Free(run);
    return out;
}

/* peak_rows(step, device, allocated, reserved) -> [(step, device, allocated, reserved)] sorted by
 * (step, device): per key, the largest allocated and reserved values, each the first value in file
 * order that no later one exceeds (a later value replaces it only when greater, as the Python loop
 * in trace_aggregate.finish does). Columns: int32, int8, double, double. The keys are group_rows'
 * (step in g, device in n), so they sort the same way. */
static PyObject *peak_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4) { PyErr_SetString(PyExc_TypeError, "peak_rows(step, device, allocated, reserved)"); return NULL; }
    Py_buffer v[4];
    static const Py_ssize_t size[4] = {4, 1, 8, 8};
    static const char *const what[4] = {"step", "device", "allocated", "reserved"};
    Py_ssize_t n = four_columns(args, v, size, what, "peak_rows");
    if (n < 0) return NULL;
    PyObject *out = NULL;
    const int32_t *si = v[0].buf;
    const signed char *dev = v[1].buf;
    const double *alloc = v[2].buf, *res = v[3].buf;
    RowKey *keys = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(RowKey));
    if (keys == NULL) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t k = 0; k < n; k++) { keys[k].g = si[k]; keys[k].n = dev[k]; keys[k].si = 0; keys[k].at = k; }
    if (n > 1) qsort(keys, (size_t)n, sizeof(RowKey), row_cmp);
    out = PyList_New(0);
    if (out == NULL) goto done;
    for (Py_ssize_t lo = 0; lo < n;) {
        double a = alloc[keys[lo].at], r = res[keys[lo].at];
        Py_ssize_t hi = lo + 1;
        while (hi < n && same_key(&keys[hi], &keys[lo])) {
            if (alloc[keys[hi].at] > a) a = alloc[keys[hi].at];
            if (res[keys[hi].at] > r) r = res[keys[hi].at];
            hi++;
        }
        PyObject *row = Py_BuildValue("(iidd)", (int)keys[lo].g, (int)keys[lo].n, a, r);
        if (row == NULL || PyList_Append(out, row) < 0) { Py_XDECREF(row); Py_CLEAR(out); goto done; }
        Py_DECREF(row);
        lo = hi;
    }
done:
    for (int i = 0; i < 4; i++) PyBuffer_Release(&v[i]);
    PyMem_Free(keys);
    return out;
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL,
     "scan(text, start, end, codes, code_of, names, name_list) -> None | tuple: see the module source."},
    {"step_index", (PyCFunction)(void (*)(void))step_index, METH_FASTCALL,
     "step_index(starts, ends, times) -> bytes of int32: see the module source."},
    {"launch_times", (PyCFunction)(void (*)(void))launch_times, METH_FASTCALL,
     "launch_times(corr, ts, rt_corr, rt_ts) -> bytes of doubles: see the module source."},
    {"group_rows", (PyCFunction)(void (*)(void))group_rows, METH_FASTCALL,
     "group_rows(group, name, step, dur) -> list of tuples: see the module source."},
    {"peak_rows", (PyCFunction)(void (*)(void))peak_rows, METH_FASTCALL,
     "peak_rows(step, device, allocated, reserved) -> list of tuples: see the module source."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_kineto_scan",
    "Kineto trace events from JSON text into TraceAggregator's columns (see trace_scan.py).",
    -1, methods, NULL, NULL, NULL, NULL,
};

/* The interface version trace_scan.py expects: a module built from an older source (an editable
 * install not rebuilt after a pull) is then ignored instead of called with other arguments. */
#define SCAN_ABI 3

/* The sha256 of this file as it was compiled (hatch_build.py passes it): the tests compare it with the
 * source beside the module, so that an edit not followed by a reinstall fails instead of testing the
 * old binary. Empty when compiled by hand. */
#ifndef MYUTILS_SCAN_SOURCE_SHA256
#define MYUTILS_SCAN_SOURCE_SHA256 ""
#endif

PyMODINIT_FUNC PyInit__kineto_scan(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (m != NULL && PyModule_AddIntConstant(m, "ABI", SCAN_ABI) < 0) Py_CLEAR(m);
    if (m != NULL && PyModule_AddStringConstant(m, "SOURCE_SHA256", MYUTILS_SCAN_SOURCE_SHA256) < 0) Py_CLEAR(m);
    return m;
}
