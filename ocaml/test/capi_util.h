/* Helpers shared by test_capi.c and bench_capi.c: growable word buffers and
 * encoders for the binary format (docs/internals/format.md). */
#ifndef CAPI_UTIL_H
#define CAPI_UTIL_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pypm_verified.h"

#define MAGIC_GRAPH 0x485052474d505950LL
#define MAGIC_PATTERNS 0x535441504d505950LL

/* symbols used by the tests */
#define SYM_MATMUL 1
#define SYM_TRANS 2
#define SYM_ADD 3
#define SYM_NEG 4
#define SYM_RELU 5
#define SYM_LEAF 10

/* attribute ids */
#define ATTR_OP_CLASS 2

typedef struct {
  int64_t *w;
  size_t n, cap;
} wbuf;

static inline void put(wbuf *b, int64_t v) {
  if (b->n == b->cap) {
    b->cap = b->cap ? 2 * b->cap : 64;
    b->w = realloc(b->w, b->cap * sizeof *b->w);
    if (!b->w) {
      perror("realloc");
      exit(2);
    }
  }
  b->w[b->n++] = v;
}

static inline void put_all(wbuf *b, const int64_t *v, size_t n) {
  for (size_t i = 0; i < n; i++) put(b, v[i]);
}

static inline void wfree(wbuf *b) {
  free(b->w);
  b->w = NULL;
  b->n = b->cap = 0;
}

/* Graph builder (format VERSION 2): header, then per node label,
 * n_children, children, n_attrs, (id, value)*; then graph_end: the symbol
 * attributes. */
static inline void graph_begin(wbuf *b, int64_t n_nodes) {
  put(b, MAGIC_GRAPH);
  put(b, 2);
  put(b, n_nodes);
}

static inline void graph_node(wbuf *b, int64_t label, int nc, const int64_t *kids, int na,
                       const int64_t *attrs /* id, value pairs */) {
  put(b, label);
  put(b, nc);
  put_all(b, kids, (size_t)nc);
  put(b, na);
  put_all(b, attrs, 2 * (size_t)na);
}

static inline void graph_end(wbuf *b, int n_sym, const int64_t *triples /* symbol, id, value */) {
  put(b, n_sym);
  put_all(b, triples, 3 * (size_t)n_sym);
}

/* Pattern set: header, then per definition (patterns_def), then the roots
 * (patterns_end). */
static inline void patterns_begin(wbuf *b, int64_t n_defs) {
  put(b, MAGIC_PATTERNS);
  put(b, 2);
  put(b, n_defs);
}

/* a definition: n term / m operator parameters, the claims pbinds (pb) and
 * pfbinds (pfb), and the body in prefix form */
static inline void patterns_def_words(wbuf *b, int64_t n, int64_t m, int npb, const int64_t *pb,
                                      int npfb, const int64_t *pfb, const int64_t *body,
                                      size_t len) {
  put(b, n);
  put(b, m);
  put(b, npb);
  put_all(b, pb, (size_t)npb);
  put(b, npfb);
  put_all(b, pfb, (size_t)npfb);
  put(b, (int64_t)len);
  put_all(b, body, len);
}

static inline void patterns_def(wbuf *b, int64_t n, int64_t m, int npb, const int64_t *pb,
                                int npfb, const int64_t *pfb, const wbuf *body) {
  patterns_def_words(b, n, m, npb, pb, npfb, pfb, body->w, body->n);
}

static inline void patterns_end(wbuf *b, int n_roots, const int64_t *roots) {
  put(b, n_roots);
  put_all(b, roots, (size_t)n_roots);
}

/* roots 0 .. n-1 */
static inline void patterns_end_all(wbuf *b, int n) {
  put(b, n);
  for (int i = 0; i < n; i++) put(b, i);
}

/* MatMul(x, Trans(y)) with x = 0, y = 1: parameters 0, 1, both bound */
static const int64_t PAT_MMT[] = {2, SYM_MATMUL, 2, 1, 0, 2, SYM_TRANS, 1, 1, 1};
#define PAT_MMT_LEN (sizeof PAT_MMT / sizeof PAT_MMT[0])
static const int64_t PB_01[] = {0, 1};

/* UnaryChain(x; F) = F(UnaryChain(x; F)) || F(x), definition `self`:
 * 3, [8, F0, 1, [9, self, 1, x0, 1, F0]], [8, F0, 1, [1, x0]] */
#define PAT_UNARY_CHAIN(self) {3, 8, 0, 1, 9, (self), 1, 0, 1, 0, 8, 0, 1, 1, 0}
#define PAT_UNARY_CHAIN_LEN 15
static const int64_t PB_0[] = {0};

static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* xorshift64* */
static inline uint64_t rng_next(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 2685821657736338717ULL;
}

static inline uint64_t rng_below(uint64_t *s, uint64_t n) { return n ? rng_next(s) % n : 0; }

/* Synthetic "chains of MatMul/Trans" graph with n_nodes nodes:
 * node 0 is a leaf, then repeatedly a leaf w, Trans(prev) and
 * MatMul(w, Trans(prev)), so about a third of the nodes are MatMul nodes
 * whose second argument is a Trans (a match for PAT_MMT). Every node has
 * rank/dtype/shape attributes. Returns the number of expected matches. */
static inline int64_t build_chain_graph(wbuf *b, int64_t n_nodes) {
  int64_t attrs[] = {0, 2, 1, 1, 100, 64, 101, 64};
  graph_begin(b, n_nodes);
  int64_t prev = 0, matches = 0;
  graph_node(b, SYM_LEAF, 0, NULL, 4, attrs);
  int64_t id = 1;
  while (id < n_nodes) {
    int64_t w = id;
    graph_node(b, SYM_LEAF, 0, NULL, 4, attrs);
    if (++id >= n_nodes) break;
    int64_t t = id;
    graph_node(b, SYM_TRANS, 1, &prev, 4, attrs);
    if (++id >= n_nodes) break;
    int64_t kids[2] = {w, t};
    graph_node(b, SYM_MATMUL, 2, kids, 4, attrs);
    prev = id;
    matches++;
    id++;
  }
  graph_end(b, 0, NULL);
  return matches;
}

#endif
