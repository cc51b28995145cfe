/* End-to-end test of libpypm_verified.so through its public C API
 * (format VERSION 2):
 *   1. load a graph and patterns, match (MatMul(x, Trans(y)) binds x, y),
 *      match_all and result layout, buffer-size protocol;
 *   1b. the full calculus: a recursive definition (UnaryChain) over chains
 *      of unary nodes, operator variables and their bindings, symbol
 *      attributes in guards, existentials, match constraints, and
 *      non-terminating definitions: P(x) = P(x), whose root-operator index
 *      is empty (NO_MATCH, proved), and Q(x) = Q(x) || x (OUT_OF_FUEL);
 *   2. every error code that can be provoked, NULL pointers, bad handles;
 *   3. inputs at the limits (depth 10000, wide nodes, big patterns) that
 *      stress the stack of the extracted, non-tail-recursive matcher;
 *   4. fuzzing with random, mutated and truncated buffers (must only ever
 *      return error codes);
 *   5. 8 threads calling pypm_match (and more) concurrently, checking every
 *      result and the per-thread last-error message, while another thread
 *      forks children that use the library;
 *   6. the host's SIGSEGV handler and signal stack survive runtime start-up;
 *   7. fork() while another thread makes the first call (the runtime's
 *      start): the child finds a usable library.
 * Exit status 0 iff every check passed. */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capi_util.h"

static int checks, fails;
static pthread_mutex_t check_lock = PTHREAD_MUTEX_INITIALIZER;

#define CHECK(cond, ...)                                                        \
  do {                                                                          \
    int ok_ = (cond);                                                           \
    pthread_mutex_lock(&check_lock);                                            \
    checks++;                                                                   \
    if (!ok_) {                                                                 \
      fails++;                                                                  \
      if (fails < 50) {                                                         \
        printf("FAIL %s:%d: ", __FILE__, __LINE__);                             \
        printf(__VA_ARGS__);                                                    \
        printf("  [last error: %s]\n", pypm_last_error());                      \
      }                                                                         \
    }                                                                           \
    pthread_mutex_unlock(&check_lock);                                          \
  } while (0)

#define CHECK_RC(expr, want)                                                    \
  do {                                                                          \
    int rc_ = (expr);                                                           \
    CHECK(rc_ == (want), "%s returned %d (%s), expected %d (%s)", #expr, rc_,   \
          pypm_error_name(rc_), (want), pypm_error_name(want));                 \
  } while (0)

static int contains(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

/* ------------------------------------------------------------- basics */

/* x(0), y(1), Trans(y)(2), MatMul(x, Trans y)(3), MatMul(x, y)(4) */
static void small_graph(wbuf *g) {
  int64_t ax[] = {0, 2, 1, 1, 100, 4, 101, 8};
  int64_t ay[] = {0, 2, 1, 1, 100, 8, 101, 4};
  int64_t k2[] = {1}, k3[] = {0, 2}, k4[] = {0, 1};
  graph_begin(g, 5);
  graph_node(g, SYM_LEAF, 0, NULL, 4, ax);
  graph_node(g, SYM_LEAF, 0, NULL, 4, ay);
  graph_node(g, SYM_TRANS, 1, k2, 0, NULL);
  graph_node(g, SYM_MATMUL, 2, k3, 0, NULL);
  graph_node(g, SYM_MATMUL, 2, k4, 0, NULL);
  int64_t sym[] = {SYM_TRANS, ATTR_OP_CLASS, 9};
  graph_end(g, 1, sym);
}

/* three definitions with parameters x = 0, y = 1 (both claimed), roots
 * 0, 1, 2 */
static void small_patterns(wbuf *ps) {
  wbuf p = {0};
  patterns_begin(ps, 3);
  /* 0: MatMul(x, Trans(y)) */
  put_all(&p, PAT_MMT, PAT_MMT_LEN);
  patterns_def(ps, 2, 0, 2, PB_01, 0, NULL, &p);
  p.n = 0;
  /* 1: MatMul(x, Trans(y)) ; guard(x.shape[1] = y.shape[0] /\ x.rank = 2) */
  put(&p, 4);
  put_all(&p, PAT_MMT, PAT_MMT_LEN);
  int64_t g[] = {4, 2, 2, 0, 101, 2, 1, 100, 2, 2, 0, 0, 1, 2};
  put_all(&p, g, sizeof g / sizeof g[0]);
  patterns_def(ps, 2, 0, 2, PB_01, 0, NULL, &p);
  p.n = 0;
  /* 2: MatMul(x, Trans(y) | y) */
  int64_t alt[] = {2, SYM_MATMUL, 2, 1, 0, 3, 2, SYM_TRANS, 1, 1, 1, 1, 1};
  put_all(&p, alt, sizeof alt / sizeof alt[0]);
  patterns_def(ps, 2, 0, 2, PB_01, 0, NULL, &p);
  patterns_end_all(ps, 3);
  wfree(&p);
}

static void test_basics(void) {
  wbuf g = {0}, ps = {0};
  small_graph(&g);
  small_patterns(&ps);
  int64_t gh = 0, ph = 0, sz = 0;
  CHECK(pypm_format_version() == 2, "format version");
  CHECK_RC(pypm_graph_load(g.w, g.n, &gh), PYPM_OK);
  CHECK_RC(pypm_patterns_load(ps.w, ps.n, &ph), PYPM_OK);
  CHECK(gh > 0 && ph > 0 && gh != ph, "handles %" PRId64 " %" PRId64, gh, ph);
  CHECK_RC(pypm_handle_size(gh, &sz), PYPM_OK);
  CHECK(sz == 5, "graph size %" PRId64, sz);
  CHECK_RC(pypm_handle_size(ph, &sz), PYPM_OK);
  CHECK(sz == 3, "root count %" PRId64, sz);

  int64_t out[16];
  size_t n = 0;
  /* MatMul(x, Trans(y)) at node 3: x -> 0, y -> 1 */
  CHECK_RC(pypm_match(gh, ph, 0, 3, 0, out, 16, &n), PYPM_OK);
  CHECK(n == 7 && out[0] == PYPM_STATUS_MATCH && out[1] == 2 && out[2] == 0 && out[3] == 0 &&
            out[4] == 1 && out[5] == 1 && out[6] == 0,
        "MatMul(x, Trans(y)) at 3");
  CHECK_RC(pypm_match(gh, ph, 0, 4, 0, out, 16, &n), PYPM_OK);
  CHECK(n == 3 && out[0] == PYPM_STATUS_NO_MATCH && out[1] == 0 && out[2] == 0, "no match at 4");
  CHECK_RC(pypm_match(gh, ph, 0, 0, 0, out, 16, &n), PYPM_OK);
  CHECK(n == 3 && out[0] == PYPM_STATUS_NO_MATCH, "no match at leaf");
  /* guard x.shape[1] (8) = y.shape[0] (8) and x.rank = 2: holds */
  CHECK_RC(pypm_match(gh, ph, 1, 3, 0, out, 16, &n), PYPM_OK);
  CHECK(n == 7 && out[0] == PYPM_STATUS_MATCH && out[3] == 0 && out[5] == 1, "guarded match");
  /* alternate: matches at 3 and 4 */
  CHECK_RC(pypm_match(gh, ph, 2, 4, 0, out, 16, &n), PYPM_OK);
  CHECK(n == 7 && out[0] == PYPM_STATUS_MATCH && out[3] == 0 && out[5] == 1, "alt at 4");
  /* fuel */
  CHECK_RC(pypm_match(gh, ph, 0, 3, 2, out, 16, &n), PYPM_OK);
  CHECK(n == 3 && out[0] == PYPM_STATUS_OUT_OF_FUEL && out[1] == 0 && out[2] == 0, "out of fuel");
  CHECK_RC(pypm_match(gh, ph, 0, 3, -5, out, 16, &n), PYPM_OK);
  CHECK(n == 7 && out[0] == PYPM_STATUS_MATCH, "negative fuel = default");
  CHECK_RC(pypm_match(gh, ph, 0, 3, INT64_MAX, out, 16, &n), PYPM_OK);
  CHECK(n == 7 && out[0] == PYPM_STATUS_MATCH, "huge fuel");
  /* buffer-size protocol */
  n = 0;
  CHECK_RC(pypm_match(gh, ph, 0, 3, 0, out, 6, &n), PYPM_E_BUFFER_TOO_SMALL);
  CHECK(n == 7, "out_len on BUFFER_TOO_SMALL: %zu", n);
  CHECK(contains(pypm_last_error(), "needs 7 words"), "message");
  CHECK_RC(pypm_match(gh, ph, 0, 3, 0, NULL, 0, &n), PYPM_E_BUFFER_TOO_SMALL);
  CHECK(n == 7, "size query with NULL out: %zu", n);

  /* match_all */
  int64_t rh = 0;
  size_t rlen = 0;
  CHECK_RC(pypm_match_all(gh, ph, 0, &rh, &rlen), PYPM_OK);
  int64_t want[] = {4, 0, 3, 0, 2, 0, 0, 1, 1, 0, 1, 3, 0, 2, 0, 0, 1, 1, 0,
                    2, 3, 0, 2, 0, 0, 1, 1, 0, 2, 4, 0, 2, 0, 0, 1, 1, 0};
  size_t wn = sizeof want / sizeof want[0];
  CHECK(rlen == wn, "result length %zu, expected %zu", rlen, wn);
  CHECK_RC(pypm_handle_size(rh, &sz), PYPM_OK);
  CHECK(sz == (int64_t)wn, "result handle size");
  int64_t rbuf[64];
  CHECK_RC(pypm_result_read(rh, rbuf, wn - 1), PYPM_E_BUFFER_TOO_SMALL);
  CHECK_RC(pypm_result_read(rh, NULL, 0), PYPM_E_BUFFER_TOO_SMALL);
  CHECK_RC(pypm_result_read(rh, rbuf, 64), PYPM_OK);
  CHECK(rlen == wn && memcmp(rbuf, want, wn * 8) == 0, "match_all words");
  /* out of fuel entries are listed */
  CHECK_RC(pypm_match_all(gh, ph, 1, &rh, &rlen), PYPM_OK);
  CHECK_RC(pypm_result_read(rh, rbuf, 64), PYPM_OK);
  /* fuel 1: every pattern's root is a MatMul (the root-operator index), so
   * all three are out of fuel at the MatMul nodes 3 and 4 and answer no
   * match elsewhere without running */
  CHECK(rlen == 1 + 6 * 5 && rbuf[0] == 6, "fuel 1: 6 entries (%zu words)", rlen);
  for (int e = 0; e < 6 && rlen == 31; e++)
    CHECK(rbuf[1 + 5 * e + 2] == PYPM_STATUS_OUT_OF_FUEL && rbuf[1 + 5 * e + 3] == 0 &&
              rbuf[1 + 5 * e + 4] == 0,
          "fuel 1: entry %d out of fuel", e);

  /* release */
  CHECK_RC(pypm_release(rh), PYPM_OK);
  CHECK_RC(pypm_result_read(rh, rbuf, 64), PYPM_E_BAD_HANDLE);
  CHECK_RC(pypm_release(rh), PYPM_E_BAD_HANDLE);
  CHECK_RC(pypm_release(gh), PYPM_OK);
  CHECK_RC(pypm_release(ph), PYPM_OK);
  CHECK_RC(pypm_match(gh, ph, 0, 3, 0, out, 16, &n), PYPM_E_BAD_HANDLE);
  wfree(&g);
  wfree(&ps);
}

/* A one-definition, one-root set: n term / m operator parameters, claims
 * pb / pfb, the body's words. */
static int load_set1(const int64_t *body, size_t len, int64_t n, int64_t m, int npb,
                     const int64_t *pb, int npfb, const int64_t *pfb, int64_t *h) {
  wbuf b = {0};
  patterns_begin(&b, 1);
  patterns_def_words(&b, n, m, npb, pb, npfb, pfb, body, len);
  patterns_end_all(&b, 1);
  int rc = pypm_patterns_load(b.w, b.n, h);
  wfree(&b);
  return rc;
}

/* the same, without claims */
static int load_one_pattern(const wbuf *p, int64_t n, int64_t *h) {
  return load_set1(p->w, p->n, n, 0, 0, NULL, 0, NULL, h);
}

/* ------------------------------------------------------------- errors */

static void test_errors(void) {
  wbuf g = {0}, ps = {0};
  small_graph(&g);
  small_patterns(&ps);
  int64_t gh, ph, h, sz, out[16];
  size_t n;
  CHECK_RC(pypm_graph_load(g.w, g.n, &gh), PYPM_OK);
  CHECK_RC(pypm_patterns_load(ps.w, ps.n, &ph), PYPM_OK);

  /* NULL pointers */
  CHECK_RC(pypm_graph_load(NULL, 3, &h), PYPM_E_NULL);
  CHECK(contains(pypm_last_error(), "buf is NULL"), "NULL message");
  CHECK_RC(pypm_graph_load(g.w, g.n, NULL), PYPM_E_NULL);
  CHECK_RC(pypm_patterns_load(NULL, 0, &h), PYPM_E_NULL);
  CHECK_RC(pypm_patterns_load(ps.w, ps.n, NULL), PYPM_E_NULL);
  CHECK_RC(pypm_handle_size(gh, NULL), PYPM_E_NULL);
  CHECK_RC(pypm_match(gh, ph, 0, 3, 0, out, 16, NULL), PYPM_E_NULL);
  CHECK_RC(pypm_match(gh, ph, 0, 3, 0, NULL, 16, &n), PYPM_E_NULL);
  CHECK_RC(pypm_match_all(gh, ph, 0, NULL, &n), PYPM_E_NULL);
  CHECK_RC(pypm_match_all(gh, ph, 0, &h, NULL), PYPM_E_NULL);
  CHECK_RC(pypm_result_read(1, NULL, 10), PYPM_E_NULL);
  {
    /* pypm_validate_rewrite: one node x, identity pass; NULLs; malformed */
    int64_t rw[] = {1, 0, 0, 1, 0, 1, 0, 0, 1, 0, 0, 0};
    int64_t verdict = 7, where = 7;
    CHECK_RC(pypm_validate_rewrite(rw, 12, &verdict, &where), PYPM_OK);
    CHECK(verdict == 0 && where == -1, "validate_rewrite: identity pass accepted");
    CHECK_RC(pypm_validate_rewrite(NULL, 12, &verdict, &where), PYPM_E_NULL);
    CHECK_RC(pypm_validate_rewrite(rw, 12, NULL, &where), PYPM_E_NULL);
    CHECK_RC(pypm_validate_rewrite(rw, 12, &verdict, NULL), PYPM_E_NULL);
    CHECK_RC(pypm_validate_rewrite(rw, 11, &verdict, &where), PYPM_E_MALFORMED);
    CHECK(verdict == -1, "validate_rewrite: no verdict on a malformed buffer");
    CHECK(contains(pypm_last_error(), "rewrite-validation buffer"), "validate_rewrite message");
    rw[11] = 1; /* the after node mapped to a before node that does not exist */
    CHECK_RC(pypm_validate_rewrite(rw, 12, &verdict, &where), PYPM_OK);
    CHECK(verdict == PYPM_REJECT_MAP && where == 0, "validate_rewrite: map out of range");
  }

  /* bad handles */
  int64_t bad[] = {0, -1, 123456789, INT64_MIN, INT64_MIN + gh, INT64_MAX, ((int64_t)1 << 62) + gh};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK_RC(pypm_handle_size(bad[i], &sz), PYPM_E_BAD_HANDLE);
    CHECK_RC(pypm_release(bad[i]), PYPM_E_BAD_HANDLE);
    CHECK_RC(pypm_match(bad[i], ph, 0, 0, 0, out, 16, &n), PYPM_E_BAD_HANDLE);
    CHECK_RC(pypm_match(gh, bad[i], 0, 0, 0, out, 16, &n), PYPM_E_BAD_HANDLE);
  }
  /* wrong kinds */
  CHECK_RC(pypm_match(ph, ph, 0, 0, 0, out, 16, &n), PYPM_E_BAD_HANDLE);
  CHECK(contains(pypm_last_error(), "is a pattern set, expected a graph"), "kind message");
  CHECK_RC(pypm_match(gh, gh, 0, 0, 0, out, 16, &n), PYPM_E_BAD_HANDLE);
  CHECK_RC(pypm_result_read(gh, out, 16), PYPM_E_BAD_HANDLE);
  CHECK_RC(pypm_match_all(ph, gh, 0, &h, &n), PYPM_E_BAD_HANDLE);

  /* out of range */
  int64_t roots[] = {-1, 5, INT64_MAX, INT64_MIN, (int64_t)1 << 62};
  for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
    CHECK_RC(pypm_match(gh, ph, 0, roots[i], 0, out, 16, &n), PYPM_E_OUT_OF_RANGE);
    CHECK_RC(pypm_match(gh, ph, roots[i] == 5 ? 3 : roots[i], 0, 0, out, 16, &n),
             PYPM_E_OUT_OF_RANGE);
  }
  CHECK_RC(pypm_match(gh, ph, 0, 5, 0, out, 16, &n), PYPM_E_OUT_OF_RANGE);
  CHECK(contains(pypm_last_error(), "root node 5 out of range [0, 5)"), "root message");

  /* malformed */
  CHECK_RC(pypm_graph_load(g.w, 0, &h), PYPM_E_MALFORMED);
  CHECK(h == 0, "handle zeroed on failure");
  CHECK_RC(pypm_graph_load(g.w, g.n - 1, &h), PYPM_E_MALFORMED);
  CHECK_RC(pypm_graph_load(ps.w, ps.n, &h), PYPM_E_MALFORMED);
  CHECK(contains(pypm_last_error(), "graph: bad magic"), "magic message");
  CHECK_RC(pypm_patterns_load(g.w, g.n, &h), PYPM_E_MALFORMED);
  CHECK_RC(pypm_graph_load(g.w, ((size_t)1 << 32) + 1, &h), PYPM_E_MALFORMED);
  CHECK(contains(pypm_last_error(), "exceeds the limit"), "length cap message");
  {
    wbuf b = {0};
    int64_t kids[] = {0, 99};
    graph_begin(&b, 2);
    graph_node(&b, SYM_LEAF, 0, NULL, 0, NULL);
    graph_node(&b, SYM_ADD, 2, kids, 0, NULL);
    CHECK_RC(pypm_graph_load(b.w, b.n, &h), PYPM_E_MALFORMED);
    CHECK(strcmp(pypm_last_error(), "graph: node 1: child 99 out of range [0, 2)") == 0,
          "child message: %s", pypm_last_error());
    wfree(&b);
  }
  /* ill-formed: guard reads y, which MatMul(x, x) does not bind */
  {
    int64_t w[] = {4, 2, SYM_MATMUL, 2, 1, 0, 1, 0, 2, 2, 1, 0, 1, 1};
    CHECK_RC(load_set1(w, sizeof w / sizeof w[0], 2, 0, 0, NULL, 0, NULL, &h), PYPM_E_ILL_FORMED);
    CHECK(contains(pypm_last_error(), "definition 0: a guard reads variable 1"),
          "ill-formed message");
    CHECK(h == 0, "handle zeroed on ILL_FORMED");
  }
  /* ill-formed: a wrong pbinds claim (x || MatMul(x, y) does not always bind y) */
  {
    int64_t w[] = {3, 1, 0, 2, SYM_MATMUL, 2, 1, 0, 1, 1};
    CHECK_RC(load_set1(w, 10, 2, 0, 1, PB_0, 0, NULL, &h), PYPM_OK);
    pypm_release(h);
    CHECK_RC(load_set1(w, 10, 2, 0, 2, PB_01, 0, NULL, &h), PYPM_E_ILL_FORMED);
    CHECK(contains(pypm_last_error(), "definition 0: pbinds claims parameter 1"),
          "pbinds message");
    /* pfbinds: F is not bound by x */
    int64_t v[] = {1, 0};
    CHECK_RC(load_set1(v, 2, 1, 1, 1, PB_0, 1, PB_0, &h), PYPM_E_ILL_FORMED);
    CHECK(contains(pypm_last_error(), "pfbinds claims operator parameter 0"), "pfbinds message");
    /* ∃F whose body does not bind F; guard on F.class with F unbound */
    int64_t e[] = {6, 3, 1, 0};
    CHECK_RC(load_set1(e, 4, 1, 0, 0, NULL, 0, NULL, &h), PYPM_E_ILL_FORMED);
    CHECK(contains(pypm_last_error(), "exists operator 3"), "existsF message");
    int64_t gf[] = {4, 1, 0, 2, 6, 0, ATTR_OP_CLASS, 1, 7};
    CHECK_RC(load_set1(gf, 9, 1, 1, 0, NULL, 0, NULL, &h), PYPM_E_ILL_FORMED);
    CHECK(contains(pypm_last_error(), "reads operator variable 0"), "F.a message");
  }
  /* malformed: call target out of range, pbinds entry not a parameter,
   * root out of range, version 1 */
  {
    int64_t call[] = {9, 1, 1, 0, 0};
    CHECK_RC(load_set1(call, 5, 1, 0, 0, NULL, 0, NULL, &h), PYPM_E_MALFORMED);
    CHECK(contains(pypm_last_error(), "call target 1 out of range [0, 1)"), "call message: %s",
          pypm_last_error());
    int64_t self[] = {9, 0, 1, 0, 0};
    CHECK_RC(load_set1(self, 5, 1, 0, 0, NULL, 0, NULL, &h), PYPM_OK);
    pypm_release(h);
    int64_t v[] = {1, 0}, pb2[] = {2};
    CHECK_RC(load_set1(v, 2, 2, 0, 1, pb2, 0, NULL, &h), PYPM_E_MALFORMED);
    CHECK(contains(pypm_last_error(), "pbinds entry 2 is not a parameter"), "pbinds range");
    wbuf b = {0};
    patterns_begin(&b, 1);
    patterns_def_words(&b, 1, 0, 1, PB_0, 0, NULL, v, 2);
    int64_t roots[] = {0, 1};
    patterns_end(&b, 2, roots);
    CHECK_RC(pypm_patterns_load(b.w, b.n, &h), PYPM_E_MALFORMED);
    CHECK(contains(pypm_last_error(), "root 1"), "root message");
    b.w[b.n - 1] = 0;
    CHECK_RC(pypm_patterns_load(b.w, b.n, &h), PYPM_OK);
    CHECK_RC(pypm_handle_size(h, &sz), PYPM_OK);
    CHECK(sz == 2, "handle size = number of roots (%" PRId64 ")", sz);
    CHECK_RC(pypm_match(gh, h, 2, 0, 0, out, 16, &n), PYPM_E_OUT_OF_RANGE);
    CHECK(contains(pypm_last_error(), "pattern index 2 out of range [0, 2)"), "index message");
    pypm_release(h);
    b.w[1] = 1;
    CHECK_RC(pypm_patterns_load(b.w, b.n, &h), PYPM_E_MALFORMED);
    CHECK(contains(pypm_last_error(), "unsupported format version 1"), "version message");
    wfree(&b);
    int64_t g1[] = {MAGIC_GRAPH, 1, 0};
    CHECK_RC(pypm_graph_load(g1, 3, &h), PYPM_E_MALFORMED);
    int64_t g2[] = {MAGIC_GRAPH, 2, 0, 2, 5, 2, 1, 5, 2, 3};
    CHECK_RC(pypm_graph_load(g2, 10, &h), PYPM_E_MALFORMED);
    CHECK(contains(pypm_last_error(), "duplicate symbol attribute (symbol 5, attribute id 2)"),
          "sym attr message: %s", pypm_last_error());
    g2[3] = 1;
    CHECK_RC(pypm_graph_load(g2, 7, &h), PYPM_OK);
    pypm_release(h);
  }
  /* too deep: 10001 nested alternates */
  {
    wbuf p = {0};
    for (int i = 0; i < 10000; i++) put(&p, 3), put(&p, 1), put(&p, 0);
    put(&p, 1), put(&p, 0);
    CHECK_RC(load_set1(p.w, p.n, 1, 0, 0, NULL, 0, NULL, &h), PYPM_E_TOO_DEEP);
    /* 10001 nested ∃ */
    p.n = 0;
    for (int i = 0; i < 10001; i++) put(&p, 5), put(&p, 0);
    put(&p, 1), put(&p, 0);
    CHECK_RC(load_set1(p.w, p.n, 1, 0, 0, NULL, 0, NULL, &h), PYPM_E_TOO_DEEP);
    /* too costly to check: 2000 nested match constraints */
    p.n = 0;
    for (int i = 0; i < 2000; i++) put(&p, 7);
    put(&p, 1), put(&p, 0);
    for (int i = 0; i < 2000; i++) put(&p, 1), put(&p, 1), put(&p, 0);
    CHECK_RC(load_set1(p.w, p.n, 2, 0, 0, NULL, 0, NULL, &h), PYPM_E_MALFORMED);
    CHECK(contains(pypm_last_error(), "checking well-formedness would take"), "cost message");
    wfree(&p);
  }
  /* error names */
  CHECK(strcmp(pypm_error_name(PYPM_E_TOO_DEEP), "PYPM_E_TOO_DEEP") == 0, "name");
  CHECK(strcmp(pypm_error_name(-3), "PYPM_E_UNKNOWN") == 0, "unknown name");
  CHECK(strcmp(pypm_error_name(PYPM_OK), "PYPM_OK") == 0, "ok name");
  CHECK_RC(pypm_release(gh), PYPM_OK);
  CHECK_RC(pypm_release(ph), PYPM_OK);
  wfree(&g);
  wfree(&ps);
}

/* ------------------------------------------------------- full calculus */

/* 0 leaf, 1 .. L: Neg(i-1), L+1 ReLU(L), L+2 ReLU(L+1), L+3 Add(L+2, 1),
 * L+4 Trans(0); Neg and ReLU have operator class 7, Trans 9, Neg also
 * attribute 0 = -1. */
static void unary_graph(wbuf *g, int64_t L) {
  int64_t rank[] = {0, 1};
  graph_begin(g, L + 5);
  graph_node(g, SYM_LEAF, 0, NULL, 1, rank);
  for (int64_t i = 1; i <= L; i++) {
    int64_t k = i - 1;
    graph_node(g, SYM_NEG, 1, &k, 1, rank);
  }
  int64_t k1 = L, k2 = L + 1, kadd[] = {L + 2, 1}, k0 = 0;
  graph_node(g, SYM_RELU, 1, &k1, 1, rank);
  graph_node(g, SYM_RELU, 1, &k2, 1, rank);
  graph_node(g, SYM_ADD, 2, kadd, 0, NULL);
  graph_node(g, SYM_TRANS, 1, &k0, 1, rank);
  int64_t sym[] = {SYM_RELU, ATTR_OP_CLASS, 7, SYM_TRANS, ATTR_OP_CLASS, 9,
                   SYM_NEG,  ATTR_OP_CLASS, 7, SYM_NEG,   0,             -1};
  graph_end(g, 4, sym);
}

/* roots 0 .. 5 = definitions 0 .. 5:
 *   0 UnaryChain(x; F) = F(UnaryChain(x; F)) || F(x)
 *   1 UnaryOp(x) = ∃F. F(x) ; guard(F.op_class = 7)
 *   2 P(x) = P(x)                       (never terminates)
 *   3 Q(x) = Q(x) || x                  (left recursion, never terminates)
 *   4 Add(a, b) ; (UnaryChain(c; F) ≈ b)
 *   5 Neg(∃y. y)                        (a local, not reported) */
static void full_patterns(wbuf *ps) {
  int64_t uc[] = PAT_UNARY_CHAIN(0);
  int64_t uop[] = {6, 0, 4, 8, 0, 1, 1, 0, 2, 6, 0, ATTR_OP_CLASS, 1, 7};
  int64_t loop[] = {9, 2, 1, 0, 0};
  int64_t left[] = {3, 9, 3, 1, 0, 0, 1, 0};
  int64_t constr[] = {7, 2, SYM_ADD, 2, 1, 0, 1, 1, 9, 0, 1, 2, 1, 0, 1};
  int64_t local[] = {5, 0, 2, SYM_NEG, 1, 1, 0};
  int64_t pb012[] = {0, 1, 2};
  patterns_begin(ps, 6);
  patterns_def_words(ps, 1, 1, 1, PB_0, 1, PB_0, uc, PAT_UNARY_CHAIN_LEN);
  patterns_def_words(ps, 1, 0, 1, PB_0, 0, NULL, uop, sizeof uop / sizeof uop[0]);
  patterns_def_words(ps, 1, 0, 0, NULL, 0, NULL, loop, sizeof loop / sizeof loop[0]);
  patterns_def_words(ps, 1, 0, 1, PB_0, 0, NULL, left, sizeof left / sizeof left[0]);
  patterns_def_words(ps, 3, 1, 3, pb012, 1, PB_0, constr, sizeof constr / sizeof constr[0]);
  patterns_def_words(ps, 0, 0, 0, NULL, 0, NULL, local, sizeof local / sizeof local[0]);
  patterns_end_all(ps, 6);
}

static int same(const int64_t *out, size_t n, const int64_t *want, size_t wn) {
  return n == wn && memcmp(out, want, n * sizeof *out) == 0;
}
#define SAME(out, n, ...)                                                      \
  same(out, n, (const int64_t[]){__VA_ARGS__},                                 \
       sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

static void *chain_from_small_stack(void *arg) {
  int64_t *a = arg; /* graph, patterns, root -> rc, status, x */
  int64_t out[16];
  size_t n = 0;
  int rc = pypm_match(a[0], a[1], 0, a[2], 0, out, 16, &n);
  a[3] = rc;
  a[4] = n >= 3 ? out[0] : -1;
  a[5] = n >= 4 ? out[3] : -1;
  return NULL;
}

static void test_full(void) {
  const int64_t L = 100000;
  wbuf g = {0}, ps = {0};
  unary_graph(&g, L);
  full_patterns(&ps);
  int64_t gh, ph, sz, out[16];
  size_t n;
  double t0 = now_s();
  CHECK_RC(pypm_graph_load(g.w, g.n, &gh), PYPM_OK);
  CHECK_RC(pypm_patterns_load(ps.w, ps.n, &ph), PYPM_OK);
  CHECK_RC(pypm_handle_size(ph, &sz), PYPM_OK);
  CHECK(sz == 6, "6 roots");

  /* UnaryChain over the 100000 Negs: x = the leaf, F = Neg */
  CHECK_RC(pypm_match(gh, ph, 0, L, 0, out, 16, &n), PYPM_OK);
  CHECK(SAME(out, n, PYPM_STATUS_MATCH, 1, 0, 0, 1, 0, SYM_NEG), "UnaryChain at the top");
  CHECK_RC(pypm_match(gh, ph, 0, 1, 0, out, 16, &n), PYPM_OK);
  CHECK(SAME(out, n, PYPM_STATUS_MATCH, 1, 0, 0, 1, 0, SYM_NEG), "UnaryChain at 1");
  /* ReLU(ReLU(Neg ..)): the ReLU chain ends at node L */
  CHECK_RC(pypm_match(gh, ph, 0, L + 2, 0, out, 16, &n), PYPM_OK);
  CHECK(SAME(out, n, PYPM_STATUS_MATCH, 1, 0, L, 1, 0, SYM_RELU), "UnaryChain of ReLUs");
  CHECK_RC(pypm_match(gh, ph, 0, L + 4, 0, out, 16, &n), PYPM_OK);
  CHECK(SAME(out, n, PYPM_STATUS_MATCH, 1, 0, 0, 1, 0, SYM_TRANS), "UnaryChain at Trans");
  CHECK_RC(pypm_match(gh, ph, 0, 0, 0, out, 16, &n), PYPM_OK);
  CHECK(SAME(out, n, PYPM_STATUS_NO_MATCH, 0, 0), "UnaryChain at the leaf");
  CHECK_RC(pypm_match(gh, ph, 0, L + 3, 0, out, 16, &n), PYPM_OK);
  CHECK(SAME(out, n, PYPM_STATUS_NO_MATCH, 0, 0), "UnaryChain at Add");
  /* not enough fuel for 100000 unfoldings */
  CHECK_RC(pypm_match(gh, ph, 0, L, 1000, out, 16, &n), PYPM_OK);
  CHECK(SAME(out, n, PYPM_STATUS_OUT_OF_FUEL, 0, 0), "UnaryChain, fuel 1000");
  /* the machine keeps its stack on the heap: fine from a 64 KiB thread */
  {
    int64_t a[6] = {gh, ph, L, -1, -1, -1};
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    CHECK(pthread_create(&t, &attr, chain_from_small_stack, a) == 0, "pthread_create");
    pthread_join(t, NULL);
    pthread_attr_destroy(&attr);
    CHECK(a[3] == PYPM_OK && a[4] == PYPM_STATUS_MATCH && a[5] == 0,
          "UnaryChain from a 64 KiB thread (rc %" PRId64 ")", a[3]);
  }
  /* UnaryOp: ∃F local, guard on the operator class (a symbol attribute) */
  CHECK_RC(pypm_match(gh, ph, 1, L + 1, 0, out, 16, &n), PYPM_OK);
  CHECK(SAME(out, n, PYPM_STATUS_MATCH, 1, 0, L, 0), "UnaryOp at ReLU");
  CHECK_RC(pypm_match(gh, ph, 1, 5, 0, out, 16, &n), PYPM_OK);
  CHECK(SAME(out, n, PYPM_STATUS_MATCH, 1, 0, 4, 0), "UnaryOp at Neg");
  CHECK_RC(pypm_match(gh, ph, 1, L + 4, 0, out, 16, &n), PYPM_OK);
  CHECK(SAME(out, n, PYPM_STATUS_NO_MATCH, 0, 0), "UnaryOp at Trans (class 9)");
  /* P(x) = P(x): its root-operator index is empty (a derivation is finite),
   * so no match with any fuel (Entry.match_root_index_no) */
  long long fuels[] = {1, 2, 1000, 100000, 0};
  for (int i = 0; i < 5; i++) {
    CHECK_RC(pypm_match(gh, ph, 2, 0, fuels[i], out, 16, &n), PYPM_OK);
    CHECK(SAME(out, n, PYPM_STATUS_NO_MATCH, 0, 0), "P = P(x), fuel %lld: status %" PRId64,
          fuels[i], out[0]);
  }
  CHECK_RC(pypm_match(gh, ph, 3, 7, 100000, out, 16, &n), PYPM_OK);
  CHECK(SAME(out, n, PYPM_STATUS_OUT_OF_FUEL, 0, 0), "Q = Q(x) || x: out of fuel");
  /* pypm_candidates: the roots whose index admits an operator with its
   * attributes; 0 and 3 may be anything (an operator variable or a variable
   * at the root), 1 an operator of class 7 (its guard), 2 nothing, 4 only
   * Add and 5 only Neg */
  int64_t neg_attrs[] = {ATTR_OP_CLASS, 7, 0, -1}; /* Neg's, as the graph gives them */
  CHECK_RC(pypm_candidates(ph, SYM_NEG, neg_attrs, 2, out, 16, &n), PYPM_OK);
  CHECK(SAME(out, n, 4, 0, 1, 3, 5), "candidates of Neg");
  CHECK_RC(pypm_candidates(ph, SYM_NEG, NULL, 0, out, 16, &n), PYPM_OK);
  CHECK(SAME(out, n, 3, 0, 3, 5), "candidates of Neg without its class");
  int64_t class5[] = {ATTR_OP_CLASS, 5};
  CHECK_RC(pypm_candidates(ph, SYM_NEG, class5, 1, out, 16, &n), PYPM_OK);
  CHECK(SAME(out, n, 3, 0, 3, 5), "candidates of Neg given class 5");
  CHECK_RC(pypm_candidates(ph, SYM_ADD, NULL, 0, out, 16, &n), PYPM_OK);
  CHECK(SAME(out, n, 3, 0, 3, 4), "candidates of Add");
  CHECK_RC(pypm_candidates(ph, 123456789, NULL, 0, out, 16, &n), PYPM_OK);
  CHECK(SAME(out, n, 2, 0, 3), "candidates of an unknown operator");
  CHECK_RC(pypm_candidates(ph, SYM_NEG, neg_attrs, 2, out, 4, &n), PYPM_E_BUFFER_TOO_SMALL);
  CHECK(n == 5, "candidates: needs 5 words (%zu)", n);
  CHECK_RC(pypm_candidates(ph, SYM_NEG, neg_attrs, 2, NULL, 0, &n), PYPM_E_BUFFER_TOO_SMALL);
  CHECK(n == 5, "candidates: size query (%zu)", n);
  CHECK_RC(pypm_candidates(ph, SYM_NEG, NULL, 0, NULL, 4, &n), PYPM_E_NULL);
  CHECK_RC(pypm_candidates(ph, SYM_NEG, NULL, 0, out, 16, NULL), PYPM_E_NULL);
  CHECK_RC(pypm_candidates(ph, -1, NULL, 0, out, 16, &n), PYPM_E_OUT_OF_RANGE);
  CHECK_RC(pypm_candidates(ph, INT64_MAX, NULL, 0, out, 16, &n), PYPM_E_OUT_OF_RANGE);
  CHECK_RC(pypm_candidates(gh, SYM_NEG, NULL, 0, out, 16, &n), PYPM_E_BAD_HANDLE);
  CHECK_RC(pypm_candidates(0, SYM_NEG, NULL, 0, out, 16, &n), PYPM_E_BAD_HANDLE);
  /* the attributes are checked */
  {
    CHECK_RC(pypm_candidates(ph, SYM_NEG, NULL, 1, out, 16, &n), PYPM_E_NULL);
    int64_t bad_id[] = {-1, 5};
    CHECK_RC(pypm_candidates(ph, SYM_NEG, bad_id, 1, out, 16, &n), PYPM_E_OUT_OF_RANGE);
    int64_t bad_value[] = {ATTR_OP_CLASS, INT64_MIN};
    CHECK_RC(pypm_candidates(ph, SYM_NEG, bad_value, 1, out, 16, &n), PYPM_E_OUT_OF_RANGE);
    int64_t twice[] = {ATTR_OP_CLASS, 5, ATTR_OP_CLASS, 7};
    CHECK_RC(pypm_candidates(ph, SYM_NEG, twice, 2, out, 16, &n), PYPM_E_MALFORMED);
    CHECK_RC(pypm_candidates(ph, SYM_NEG, class5, (size_t)1 << 62, out, 16, &n),
             PYPM_E_MALFORMED);
  }
  /* pypm_candidates_at: the candidates refined by the arguments' operators
   * (KidIndex.v); without arguments, pypm_candidates'; never more; a child
   * list in the wrong form is refused */
  {
    CHECK_RC(pypm_candidates_at(ph, SYM_NEG, neg_attrs, 2, NULL, 0, out, 16, &n), PYPM_OK);
    CHECK(SAME(out, n, 4, 0, 1, 3, 5), "candidates_at of Neg, no arguments given");
    int64_t kid_neg[] = {SYM_NEG, 1, ATTR_OP_CLASS, 7};
    CHECK_RC(pypm_candidates_at(ph, SYM_NEG, neg_attrs, 2, kid_neg, 4, out, 16, &n), PYPM_OK);
    CHECK(n >= 1 && (size_t)out[0] == n - 1, "candidates_at of Neg(Neg): %zu words", n);
    for (size_t k = 1; k < n; k++)
      CHECK(out[k] == 0 || out[k] == 1 || out[k] == 3 || out[k] == 5,
            "candidates_at of Neg(Neg): %" PRId64 " is no candidate of Neg", out[k]);
    int64_t kid_add[] = {SYM_ADD, 0, SYM_ADD, 0};
    CHECK_RC(pypm_candidates_at(ph, SYM_ADD, NULL, 0, kid_add, 4, out, 16, &n), PYPM_OK);
    for (size_t k = 1; k < n; k++)
      CHECK(out[k] == 0 || out[k] == 3 || out[k] == 4,
            "candidates_at of Add(Add, Add): %" PRId64 " is no candidate of Add", out[k]);
    int64_t trunc[] = {SYM_NEG};
    CHECK_RC(pypm_candidates_at(ph, SYM_NEG, NULL, 0, trunc, 1, out, 16, &n),
             PYPM_E_MALFORMED);
    int64_t too_many[] = {SYM_NEG, 5, ATTR_OP_CLASS, 7};
    CHECK_RC(pypm_candidates_at(ph, SYM_NEG, NULL, 0, too_many, 4, out, 16, &n),
             PYPM_E_MALFORMED);
    int64_t negative[] = {SYM_NEG, -1};
    CHECK_RC(pypm_candidates_at(ph, SYM_NEG, NULL, 0, negative, 2, out, 16, &n),
             PYPM_E_MALFORMED);
    int64_t bad_sym[] = {-1, 0};
    CHECK_RC(pypm_candidates_at(ph, SYM_NEG, NULL, 0, bad_sym, 2, out, 16, &n),
             PYPM_E_OUT_OF_RANGE);
    int64_t bad_attr[] = {SYM_NEG, 1, ATTR_OP_CLASS, INT64_MIN};
    CHECK_RC(pypm_candidates_at(ph, SYM_NEG, NULL, 0, bad_attr, 4, out, 16, &n),
             PYPM_E_OUT_OF_RANGE);
    CHECK_RC(pypm_candidates_at(ph, SYM_NEG, NULL, 0, NULL, 2, out, 16, &n), PYPM_E_NULL);
    CHECK_RC(pypm_candidates_at(ph, SYM_NEG, NULL, 0, NULL, (size_t)1 << 62, out, 16, &n),
             PYPM_E_NULL);
    CHECK_RC(pypm_candidates_at(ph, SYM_NEG, NULL, 0, kid_neg, (size_t)1 << 62, out, 16, &n),
             PYPM_E_MALFORMED);
    CHECK_RC(pypm_candidates_at(ph, SYM_NEG, NULL, 0, NULL, 0, out, 0, &n),
             PYPM_E_BUFFER_TOO_SMALL);
    CHECK_RC(pypm_candidates_at(gh, SYM_NEG, NULL, 0, NULL, 0, out, 16, &n), PYPM_E_BAD_HANDLE);
    CHECK_RC(pypm_candidates_at(ph, -1, NULL, 0, NULL, 0, out, 16, &n), PYPM_E_OUT_OF_RANGE);
  }
  /* a non-candidate answers no match at every node with that operator */
  for (int64_t root = 0; root < 8; root++) {
    CHECK_RC(pypm_match(gh, ph, 4, root, 1, out, 16, &n), PYPM_OK);
    if (root != L + 3)
      CHECK(SAME(out, n, PYPM_STATUS_NO_MATCH, 0, 0), "non-candidate at %" PRId64, root);
  }
  /* Add(L+2, 1) ; (UnaryChain(c; F) ≈ 1): 1 = Neg(0) */
  CHECK_RC(pypm_match(gh, ph, 4, L + 3, 0, out, 16, &n), PYPM_OK);
  CHECK(SAME(out, n, PYPM_STATUS_MATCH, 3, 0, L + 2, 1, 1, 2, 0, 1, 0, SYM_NEG),
        "match constraint");
  CHECK_RC(pypm_match(gh, ph, 4, L, 0, out, 16, &n), PYPM_OK);
  CHECK(SAME(out, n, PYPM_STATUS_NO_MATCH, 0, 0), "match constraint at Neg");
  /* local variables are not reported */
  CHECK_RC(pypm_match(gh, ph, 5, 1, 0, out, 16, &n), PYPM_OK);
  CHECK(SAME(out, n, PYPM_STATUS_MATCH, 0, 0), "local not reported");
  /* size protocol with operator bindings */
  CHECK_RC(pypm_match(gh, ph, 4, L + 3, 0, out, 10, &n), PYPM_E_BUFFER_TOO_SMALL);
  CHECK(n == 11, "needs 11 words: %zu", n);
  CHECK_RC(pypm_match(gh, ph, 6, 0, 0, out, 16, &n), PYPM_E_OUT_OF_RANGE);
  pypm_release(gh);

  /* match_all on a short chain (L = 3): every entry agrees with pypm_match,
   * Q = Q(x) || x is out of fuel everywhere, P = P(x) never listed */
  g.n = 0;
  unary_graph(&g, 3);
  CHECK_RC(pypm_graph_load(g.w, g.n, &gh), PYPM_OK);
  int64_t rh;
  size_t rlen;
  CHECK_RC(pypm_match_all(gh, ph, 5000, &rh, &rlen), PYPM_OK);
  int64_t *r = malloc(rlen * sizeof *r);
  CHECK_RC(pypm_result_read(rh, r, rlen), PYPM_OK);
  size_t pos = 1;
  int64_t entries = 0, fuel_out = 0, prev = -1;
  int chain_seen = 0;
  for (int64_t e = 0; e < r[0] && pos + 5 <= rlen; e++) {
    int64_t pi = r[pos], root = r[pos + 1], st = r[pos + 2];
    size_t start = pos;
    pos += 3;
    int64_t nb = r[pos];
    pos += 1 + 2 * (size_t)nb;
    int64_t nf = r[pos];
    pos += 1 + 2 * (size_t)nf;
    CHECK(root * 8 + pi > prev, "match_all order");
    prev = root * 8 + pi;
    entries++;
    fuel_out += st == PYPM_STATUS_OUT_OF_FUEL;
    CHECK_RC(pypm_match(gh, ph, pi, root, 5000, out, 16, &n), PYPM_OK);
    CHECK(n == pos - start - 2 && memcmp(out, r + start + 2, n * sizeof *out) == 0,
          "match_all entry (%" PRId64 ", %" PRId64 ") = pypm_match", pi, root);
    if (pi == 0 && root == 3)
      chain_seen = SAME(r + start, pos - start, 0, 3, 0, 1, 0, 0, 1, 0, SYM_NEG);
  }
  CHECK(pos == rlen && entries == r[0], "match_all: %" PRId64 " entries, %zu of %zu words",
        entries, pos, rlen);
  CHECK(fuel_out == 8, "Q = Q(x) || x out of fuel at all 8 nodes: %" PRId64, fuel_out);
  CHECK(chain_seen, "match_all: UnaryChain entry at node 3");
  long listed = 0;
  for (int pi = 0; pi < 6; pi++)
    for (int root = 0; root < 8; root++) {
      CHECK_RC(pypm_match(gh, ph, pi, root, 5000, out, 16, &n), PYPM_OK);
      listed += out[0] != PYPM_STATUS_NO_MATCH;
    }
  CHECK(listed == entries, "every match / out of fuel listed (%ld vs %" PRId64 ")", listed,
        entries);
  free(r);
  pypm_release(rh);
  pypm_release(gh);
  pypm_release(ph);
  wfree(&g);
  wfree(&ps);
  printf("  full calculus: %.2f s\n", now_s() - t0);
}

/* ------------------------------------------------ limits / stack depth */

static long stack_rss_kb(void) {
  /* Rss of the 1 GiB (or 256 MiB) private OCaml stack mapping (without its
   * 1 MiB PROT_NONE guard, a separate VMA) */
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[512];
  long size = 0, rss = -1, found = -1;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "Size: %ld kB", &size) == 1) continue;
    if (sscanf(line, "Rss: %ld kB", &rss) == 1) {
      if (size == 1048576 - 1024 || size == 262144 - 1024) found = rss; /* minus the guard */
    }
  }
  fclose(f);
  return found;
}

static void report_stack(const char *what) {
  if (getenv("PYPM_NO_STACK_TRIM")) printf("  stack high water after %-40s %ld kB\n", what, stack_rss_kb());
}

/* pypm_match from a thread with a 64 KiB stack: the OCaml code must not
 * run on it (the 2^20-ary node needs ~16 MiB of OCaml stack) */
typedef struct {
  int64_t g, p, root;
  int rc;
  int64_t status;
} small_stack_arg;

static void *small_stack_match(void *arg) {
  small_stack_arg *a = arg;
  int64_t out[8];
  size_t n;
  a->rc = pypm_match(a->g, a->p, 0, a->root, 0, out, 8, &n);
  a->status = out[0];
  return NULL;
}

static int run_on_small_stack(small_stack_arg *a) {
  pthread_attr_t attr;
  pthread_t t;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  int e = pthread_create(&t, &attr, small_stack_match, a);
  pthread_attr_destroy(&attr);
  if (e == 0) pthread_join(t, NULL);
  return e;
}


static void test_limits(void) {
  int64_t gh, ph, out[8];
  size_t n;
  double t0 = now_s();
  /* graph: 0 leaf, 1 Trans(0), 2 MatMul(0, 1), 3 MatMul with 2^20 children,
   * 4 node with 32766 children */
  const int64_t wide = (int64_t)1 << 20, wide2 = 32766;
  wbuf g = {0};
  graph_begin(&g, 5);
  int64_t zero = 0, k2[] = {0, 1};
  graph_node(&g, SYM_LEAF, 0, NULL, 0, NULL);
  graph_node(&g, SYM_TRANS, 1, &zero, 0, NULL);
  graph_node(&g, SYM_MATMUL, 2, k2, 0, NULL);
  put(&g, SYM_MATMUL), put(&g, wide);
  for (int64_t i = 0; i < wide; i++) put(&g, i % 3);
  put(&g, 0);
  put(&g, SYM_ADD), put(&g, wide2);
  for (int64_t i = 0; i < wide2; i++) put(&g, i % 3);
  put(&g, 0);
  graph_end(&g, 0, NULL);
  CHECK_RC(pypm_graph_load(g.w, g.n, &gh), PYPM_OK);
  report_stack("wide graph load");

  /* Add(x0 .. x32765) at node 4: 32766 parameters, 32766 bindings (65535
   * words). (No pbinds claim: checking a claim of all 32766 parameters is
   * quadratic, over Wf_cost.limit.) */
  wbuf p = {0};
  put(&p, 2), put(&p, SYM_ADD), put(&p, wide2);
  for (int64_t i = 0; i < wide2; i++) put(&p, 1), put(&p, i);
  CHECK_RC(load_one_pattern(&p, wide2, &ph), PYPM_OK);
  size_t cap = 3 + 2 * (size_t)wide2;
  int64_t *big = malloc(cap * sizeof *big);
  CHECK_RC(pypm_match(gh, ph, 0, 4, 0, big, cap, &n), PYPM_OK);
  CHECK(n == cap && big[0] == PYPM_STATUS_MATCH && big[1] == wide2 && big[2 + 2 * 100] == 100 &&
            big[3 + 2 * 100] == 100 % 3 && big[cap - 1] == 0,
        "32766 bindings");
  report_stack("32766-ary pattern match");
  pypm_release(ph);
  free(big);

  /* guard with 7000 attribute reads: Add(x0..x3999) ; (x0.0 = 0 /\ ...) */
  p.n = 0;
  const int nv = 4000, nr = 7000;
  put(&p, 4);
  put(&p, 2), put(&p, SYM_ADD), put(&p, nv);
  for (int i = 0; i < nv; i++) put(&p, 1), put(&p, i);
  /* 6999 conjunctions in prefix form, then 7000 conjuncts x_i.0 = 0 */
  for (int i = 0; i < nr - 1; i++) put(&p, 4);
  for (int i = 0; i < nr; i++)
    put(&p, 2), put(&p, 2), put(&p, i % nv), put(&p, 0), put(&p, 1), put(&p, 0);
  /* the conjunctions nest 6999 deep on the left: fine (< 10000) */
  CHECK_RC(load_one_pattern(&p, nv, &ph), PYPM_OK);
  report_stack("load of a guard with 7000 reads");
  pypm_release(ph);

  /* depth 10000: alternates, guards, expressions */
  p.n = 0;
  for (int i = 0; i < 9999; i++) put(&p, 3), put(&p, 2), put(&p, 99), put(&p, 0);
  put(&p, 1), put(&p, 0);
  CHECK_RC(load_one_pattern(&p, 1, &ph), PYPM_OK);
  CHECK_RC(pypm_match(gh, ph, 0, 0, 0, out, 8, &n), PYPM_OK);
  CHECK(n == 5 && out[0] == PYPM_STATUS_MATCH, "9999 failing alternates then x");
  pypm_release(ph);
  p.n = 0;
  put(&p, 4), put(&p, 1), put(&p, 0);
  for (int i = 0; i < 9997; i++) put(&p, 6);
  put(&p, 2), put(&p, 1), put(&p, 0), put(&p, 1), put(&p, 0); /* 0 = 0 under 9997 nots */
  CHECK_RC(load_one_pattern(&p, 1, &ph), PYPM_OK);
  CHECK_RC(pypm_match(gh, ph, 0, 0, 0, out, 8, &n), PYPM_OK);
  CHECK(n == 3 && out[0] == PYPM_STATUS_NO_MATCH, "odd number of nots: %" PRId64, out[0]);
  pypm_release(ph);
  p.n = 0;
  put(&p, 4), put(&p, 1), put(&p, 0), put(&p, 2);
  for (int i = 0; i < 9996; i++) put(&p, 3), put(&p, 1), put(&p, 1); /* 1 + (1 + ...) */
  put(&p, 1), put(&p, 0), put(&p, 1), put(&p, 9996);
  CHECK_RC(load_one_pattern(&p, 1, &ph), PYPM_OK);
  CHECK_RC(pypm_match(gh, ph, 0, 0, 0, out, 8, &n), PYPM_OK);
  CHECK(n == 5 && out[0] == PYPM_STATUS_MATCH, "deep sum = 9996");
  report_stack("depth-10000 patterns");
  pypm_release(ph);
  /* MatMul(x, Trans(y)) at the 2^20-ary MatMul: length of its children */
  p.n = 0;
  put_all(&p, PAT_MMT, PAT_MMT_LEN);
  CHECK_RC(load_one_pattern(&p, 2, &ph), PYPM_OK);
  CHECK_RC(pypm_match(gh, ph, 0, 3, 0, out, 8, &n), PYPM_OK);
  CHECK(out[0] == PYPM_STATUS_NO_MATCH, "wide node: no match");
  CHECK_RC(pypm_match(gh, ph, 0, 2, 0, out, 8, &n), PYPM_OK);
  CHECK(out[0] == PYPM_STATUS_MATCH, "match at 2");
  report_stack("match at a 2^20-ary node");
  {
    small_stack_arg a = {.g = gh, .p = ph, .root = 3};
    CHECK(run_on_small_stack(&a) == 0, "pthread_create");
    CHECK(a.rc == PYPM_OK && a.status == PYPM_STATUS_NO_MATCH, "2^20-ary node from a 64 KiB thread");
  }
  pypm_release(ph);

  /* 2^16 term and operator parameters (the matcher builds an identity map
   * of each, recursively), and a call with 30000 arguments */
  {
    wbuf b = {0};
    int64_t x0[] = {1, 0};
    patterns_begin(&b, 3);
    patterns_def_words(&b, (int64_t)1 << 16, (int64_t)1 << 16, 1, PB_0, 0, NULL, x0, 2);
    patterns_def_words(&b, 30000, 0, 1, PB_0, 0, NULL, x0, 2);
    p.n = 0;
    put(&p, 9), put(&p, 1), put(&p, 30000);
    for (int i = 0; i < 30000; i++) put(&p, 0);
    put(&p, 0);
    patterns_def(&b, 1, 0, 1, PB_0, 0, NULL, &p);
    int64_t roots[] = {0, 2};
    patterns_end(&b, 2, roots);
    CHECK_RC(pypm_patterns_load(b.w, b.n, &ph), PYPM_OK);
    CHECK_RC(pypm_match(gh, ph, 0, 2, 0, out, 8, &n), PYPM_OK);
    CHECK(n == 5 && out[0] == PYPM_STATUS_MATCH && out[3] == 2, "2^16 parameters");
    CHECK_RC(pypm_match(gh, ph, 1, 1, 0, out, 8, &n), PYPM_OK);
    CHECK(n == 5 && out[0] == PYPM_STATUS_MATCH && out[3] == 1, "call with 30000 arguments");
    report_stack("2^16 parameters, call with 30000 args");
    pypm_release(ph);
    /* 2^16 + 1 parameters: over the limit */
    b.n = 0;
    patterns_begin(&b, 1);
    patterns_def_words(&b, ((int64_t)1 << 16) + 1, 0, 0, NULL, 0, NULL, x0, 2);
    patterns_end_all(&b, 1);
    CHECK_RC(pypm_patterns_load(b.w, b.n, &ph), PYPM_E_MALFORMED);
    CHECK(contains(pypm_last_error(), "exceeds the limit of 65536"), "params limit message");
    wfree(&b);
  }

  pypm_release(gh);
  wfree(&p);
  wfree(&g);
  printf("  limits: %.2f s\n", now_s() - t0);
}

/* --------------------------------------------------------------- fuzz */

static int64_t fuzz_word(uint64_t *s) {
  switch (rng_below(s, 10)) {
    case 0: return (int64_t)rng_next(s);
    case 1: return -(int64_t)rng_below(s, 4);
    case 2: return (int64_t)1 << 62;
    case 3: return MAGIC_GRAPH;
    case 4: return MAGIC_PATTERNS;
    default: return (int64_t)rng_below(s, 12);
  }
}

/* a random valid-ish pattern (may be ill-formed, may call a definition
 * that does not exist), prefix words into p */
static void gen_expr(wbuf *p, uint64_t *s, int d) {
  int t = d > 4 ? 1 + (int)rng_below(s, 2) : 1 + (int)rng_below(s, 6);
  put(p, t);
  if (t == 1) put(p, (int64_t)rng_below(s, 5) - 2);
  else if (t == 2 || t == 6) put(p, (int64_t)rng_below(s, 4)), put(p, (int64_t)rng_below(s, 3));
  else gen_expr(p, s, d + 1), gen_expr(p, s, d + 1);
}
static void gen_guard(wbuf *p, uint64_t *s, int d) {
  int t = d > 4 ? 1 + (int)rng_below(s, 3) : 1 + (int)rng_below(s, 6);
  put(p, t);
  if (t == 2 || t == 3) gen_expr(p, s, d + 1), gen_expr(p, s, d + 1);
  else if (t == 4 || t == 5) gen_guard(p, s, d + 1), gen_guard(p, s, d + 1);
  else if (t == 6) gen_guard(p, s, d + 1);
}
static void gen_pattern(wbuf *p, uint64_t *s, int d, int n_defs) {
  int t = d > 4 ? (rng_below(s, 4) ? 1 : 9) : 1 + (int)rng_below(s, 9);
  put(p, t);
  switch (t) {
    case 1: put(p, (int64_t)rng_below(s, 4)); break;
    case 2:
    case 8: {
      int n = (int)rng_below(s, 3);
      put(p, t == 2 ? 1 + (int64_t)rng_below(s, 5) : (int64_t)rng_below(s, 3)), put(p, n);
      for (int i = 0; i < n; i++) gen_pattern(p, s, d + 1, n_defs);
      break;
    }
    case 3: gen_pattern(p, s, d + 1, n_defs), gen_pattern(p, s, d + 1, n_defs); break;
    case 4: gen_pattern(p, s, d + 1, n_defs), gen_guard(p, s, d + 1); break;
    case 5:
    case 6:
      put(p, (int64_t)rng_below(s, t == 5 ? 4 : 3));
      gen_pattern(p, s, d + 1, n_defs);
      break;
    case 7:
      gen_pattern(p, s, d + 1, n_defs), gen_pattern(p, s, d + 1, n_defs);
      put(p, (int64_t)rng_below(s, 4));
      break;
    default: { /* call: the target is out of range one time in 8 */
      int nx = (int)rng_below(s, 3), nf = (int)rng_below(s, 2);
      put(p, rng_below(s, 8) ? (int64_t)rng_below(s, (uint64_t)(n_defs ? n_defs : 1))
                             : (int64_t)n_defs);
      put(p, nx);
      for (int i = 0; i < nx; i++) put(p, (int64_t)rng_below(s, 4));
      put(p, nf);
      for (int i = 0; i < nf; i++) put(p, (int64_t)rng_below(s, 3));
    }
  }
}

static void gen_graph(wbuf *g, uint64_t *s) {
  int n = 1 + (int)rng_below(s, 12);
  graph_begin(g, n);
  for (int i = 0; i < n; i++) {
    put(g, 1 + (int64_t)rng_below(s, 5));
    int nc = (int)rng_below(s, 3);
    put(g, nc);
    for (int j = 0; j < nc; j++) put(g, (int64_t)rng_below(s, (uint64_t)n));
    int na = (int)rng_below(s, 3);
    put(g, na);
    for (int j = 0; j < na; j++) put(g, j), put(g, (int64_t)rng_below(s, 5) - 2);
  }
  int ns = (int)rng_below(s, 4);
  put(g, ns);
  for (int j = 0; j < ns; j++)
    put(g, 1 + j), put(g, (int64_t)rng_below(s, 3)), put(g, (int64_t)rng_below(s, 5) - 2);
}

/* 0-3 definitions (parameters; random claims one time in 4: often wrong,
 * then the set is ill-formed), 0-3 roots (out of range one time in 16) */
static void gen_patterns(wbuf *b, uint64_t *s) {
  int nd = (int)rng_below(s, 4);
  wbuf p = {0};
  patterns_begin(b, nd);
  for (int i = 0; i < nd; i++) {
    p.n = 0;
    gen_pattern(&p, s, 0, nd);
    int64_t n = (int64_t)rng_below(s, 4), m = (int64_t)rng_below(s, 3), pb[4], pfb[3];
    int npb = 0, npfb = 0, claim = rng_below(s, 4) == 0; /* else no claims */
    for (int64_t x = 0; x < n; x++)
      if (claim && rng_below(s, 3) == 0) pb[npb++] = x;
    for (int64_t f = 0; f < m; f++)
      if (claim && rng_below(s, 3) == 0) pfb[npfb++] = f;
    patterns_def(b, n, m, npb, pb, npfb, pfb, &p);
  }
  int nr = (int)rng_below(s, 4);
  put(b, nr);
  for (int i = 0; i < nr; i++)
    put(b, rng_below(s, 16) ? (int64_t)rng_below(s, (uint64_t)(nd ? nd : 1)) : (int64_t)nd);
  wfree(&p);
}

static void mutate(wbuf *b, uint64_t *s) {
  switch (rng_below(s, 5)) {
    case 0: /* truncate */
      b->n = (size_t)rng_below(s, b->n + 1);
      break;
    case 1: /* extend */
      for (int k = 1 + (int)rng_below(s, 3); k > 0; k--) put(b, fuzz_word(s));
      break;
    default: /* overwrite 1..3 words (keep the header most of the time) */
      for (int k = 1 + (int)rng_below(s, 3); k > 0; k--) {
        if (b->n == 0) break;
        size_t i = (size_t)rng_below(s, b->n);
        if (i < 2 && rng_below(s, 4)) continue;
        b->w[i] = fuzz_word(s);
      }
  }
}

static long codes[16];
static long statuses[3], sets_accepted, sets_with_roots;

static int valid_code(int rc) { return rc >= 0 && rc <= 9; }

static void exercise(int64_t gh, int64_t ph, uint64_t *s) {
  int64_t sz = 0, gsz = 0, psz = 0, out[64], rh;
  size_t n, rlen;
  if (gh) CHECK_RC(pypm_handle_size(gh, &gsz), PYPM_OK);
  if (ph) CHECK_RC(pypm_handle_size(ph, &psz), PYPM_OK);
  if (gh && ph) {
    int rc = pypm_match_all(gh, ph, 1 + (int64_t)rng_below(s, 200), &rh, &rlen);
    CHECK(rc == PYPM_OK, "match_all on valid handles: %d", rc);
    if (rc == PYPM_OK) {
      int64_t *r = malloc((rlen + 1) * sizeof *r);
      CHECK_RC(pypm_result_read(rh, r, rlen), PYPM_OK);
      CHECK(r[0] <= gsz * psz, "entry count");
      /* walk the entries: layout, statuses */
      size_t pos = 1;
      for (int64_t e = 0; e < r[0] && pos + 5 <= rlen; e++) {
        int64_t st = r[pos + 2];
        CHECK(r[pos] >= 0 && r[pos] < psz && r[pos + 1] >= 0 && r[pos + 1] < gsz &&
                  (st == PYPM_STATUS_MATCH || st == PYPM_STATUS_OUT_OF_FUEL),
              "entry %" PRId64, e);
        if (st >= 0 && st <= 2) statuses[st]++;
        pos += 3;
        pos += 1 + 2 * (size_t)r[pos];
        if (pos < rlen) pos += 1 + 2 * (size_t)r[pos];
      }
      CHECK(pos == rlen, "match_all layout: %zu of %zu words", pos, rlen);
      free(r);
      CHECK_RC(pypm_handle_size(rh, &sz), PYPM_OK);
      CHECK_RC(pypm_release(rh), PYPM_OK);
    }
    for (int k = 0; k < 4; k++) {
      int64_t root = (int64_t)rng_below(s, (uint64_t)gsz + 2) - 1;
      int64_t idx = (int64_t)rng_below(s, (uint64_t)psz + 2) - 1;
      /* always a positive fuel: with recursive definitions the default
       * (2^26 steps) would dominate the run */
      int rc2 = pypm_match(gh, ph, idx, root, 1 + (int64_t)rng_below(s, 500), out,
                           (size_t)rng_below(s, 65), &n);
      int in_range = root >= 0 && root < gsz && idx >= 0 && idx < psz;
      CHECK(in_range ? (rc2 == PYPM_OK || rc2 == PYPM_E_BUFFER_TOO_SMALL)
                     : rc2 == PYPM_E_OUT_OF_RANGE,
            "match rc %d", rc2);
    }
    /* handles of the wrong kind */
    CHECK_RC(pypm_match(ph, gh, 0, 0, 0, out, 64, &n), PYPM_E_BAD_HANDLE);
  }
}

static void test_fuzz(int rounds) {
  uint64_t s = 0x9E3779B97F4A7C15ULL;
  double t0 = now_s();
  long loads = 0, accepted = 0;
  wbuf g = {0}, ps = {0};
  for (int r = 0; r < rounds; r++) {
    int64_t gh = 0, ph = 0;
    g.n = ps.n = 0;
    int kind = (int)rng_below(&s, 4);
    if (kind == 0) { /* pure random words */
      int n = (int)rng_below(&s, 40);
      if (rng_below(&s, 2)) put(&g, MAGIC_GRAPH), put(&g, 2);
      for (int i = 0; i < n; i++) put(&g, fuzz_word(&s));
      n = (int)rng_below(&s, 40);
      if (rng_below(&s, 2)) put(&ps, MAGIC_PATTERNS), put(&ps, 2);
      for (int i = 0; i < n; i++) put(&ps, fuzz_word(&s));
    } else { /* generated, then maybe mutated */
      gen_graph(&g, &s);
      gen_patterns(&ps, &s);
      if (kind >= 2) mutate(&g, &s), mutate(&ps, &s);
    }
    int64_t dummy = 0;
    const int64_t *gp = g.n ? g.w : &dummy, *pp = ps.n ? ps.w : &dummy;
    int rc1 = pypm_graph_load(gp, g.n, &gh);
    int rc2 = pypm_patterns_load(pp, ps.n, &ph);
    loads += 2;
    codes[rc1 & 15]++;
    codes[rc2 & 15]++;
    CHECK(rc1 == PYPM_OK || rc1 == PYPM_E_MALFORMED, "graph load rc %d", rc1);
    CHECK(rc2 == PYPM_OK || rc2 == PYPM_E_MALFORMED || rc2 == PYPM_E_ILL_FORMED ||
              rc2 == PYPM_E_TOO_DEEP,
          "patterns load rc %d", rc2);
    CHECK(valid_code(rc1) && valid_code(rc2), "codes");
    CHECK((rc1 == PYPM_OK) == (gh > 0) && (rc2 == PYPM_OK) == (ph > 0), "handle iff OK");
    if (rc1 != PYPM_OK) CHECK(pypm_last_error()[0] != 0, "message on failure");
    accepted += (rc1 == PYPM_OK) + (rc2 == PYPM_OK);
    if (rc2 == PYPM_OK) {
      int64_t nr = 0;
      pypm_handle_size(ph, &nr);
      sets_accepted++;
      sets_with_roots += nr > 0;
    }
    if (rc2 == PYPM_OK && rng_below(&s, 8) == 0) {
      for (size_t k = 0; k < ps.n; k++) {
        int64_t h2;
        int rc = pypm_patterns_load(ps.w, k, &h2);
        CHECK(rc == PYPM_E_MALFORMED, "patterns prefix %zu/%zu accepted (rc %d)", k, ps.n, rc);
      }
    }
    /* all prefixes of accepted buffers must be rejected */
    if (rc1 == PYPM_OK && rng_below(&s, 8) == 0) {
      for (size_t k = 0; k < g.n; k++) {
        int64_t h2;
        int rc = pypm_graph_load(g.w, k, &h2);
        CHECK(rc == PYPM_E_MALFORMED, "graph prefix %zu/%zu accepted (rc %d)", k, g.n, rc);
      }
    }
    /* the graph again as an extension of itself (a stale or wrong base
     * sometimes, mutated sometimes): accepted iff well-formed, and then the
     * graph grows by its node count; else it is unchanged */
    if (rc1 == PYPM_OK && rng_below(&s, 2) == 0) {
      wbuf x = {0};
      int64_t before = 0, after = 0;
      pypm_handle_size(gh, &before);
      put(&x, 0x545845474d505950LL); /* "PYPMGEXT" */
      put(&x, 2);
      put(&x, rng_below(&s, 4) ? before : before + (int64_t)rng_below(&s, 3) - 1);
      for (size_t k = 2; k < g.n; k++) put(&x, g.w[k]);
      if (rng_below(&s, 2)) mutate(&x, &s);
      int rc = pypm_graph_extend(gh, x.w, x.n);
      codes[rc & 15]++;
      CHECK(rc == PYPM_OK || rc == PYPM_E_MALFORMED || rc == PYPM_E_OUT_OF_RANGE,
            "graph extend rc %d", rc);
      pypm_handle_size(gh, &after);
      CHECK(rc == PYPM_OK ? x.n > 3 && after == before + x.w[3] : after == before,
            "graph extend size %" PRId64 " -> %" PRId64 " (rc %d)", before, after, rc);
      wfree(&x);
    }
    exercise(gh, ph, &s);
    if (gh) CHECK_RC(pypm_release(gh), PYPM_OK);
    if (ph) CHECK_RC(pypm_release(ph), PYPM_OK);
  }
  wfree(&g);
  wfree(&ps);
  printf("  fuzz: %d rounds, %ld loads (%ld accepted), codes:", rounds, loads, accepted);
  for (int i = 0; i < 10; i++)
    if (codes[i]) printf(" %s=%ld", pypm_error_name(i), codes[i]);
  printf(", %.2f s\n", now_s() - t0);
  printf("  fuzz: %ld pattern sets accepted (%ld with roots); match_all entries: %ld match, "
         "%ld out of fuel\n",
         sets_accepted, sets_with_roots, statuses[PYPM_STATUS_MATCH],
         statuses[PYPM_STATUS_OUT_OF_FUEL]);
  CHECK(statuses[PYPM_STATUS_MATCH] > 0 && statuses[PYPM_STATUS_OUT_OF_FUEL] > 0,
        "fuzz reaches matches and out-of-fuel");
}

/* ------------------------------------------------------------ threads */

#define T_NODES 3000
#define T_PATS 4
#define T_OUT 16
#define N_THREADS 8

static int64_t t_graph, t_pats;
/* status, n, pairs (<= 2), m, pairs (<= 1) */
static int64_t expected[T_PATS][T_NODES][T_OUT];
static size_t expected_len[T_PATS][T_NODES];

typedef struct {
  int id;
  int iters;
  long ok;
} targ;

static void *hammer(void *arg) {
  targ *a = arg;
  uint64_t s = 0x1234567ULL * (uint64_t)(a->id + 1);
  int64_t out[T_OUT];
  size_t n;
  char want[64];
  for (int i = 0; i < a->iters; i++) {
    int64_t root = (int64_t)rng_below(&s, T_NODES), idx = (int64_t)rng_below(&s, T_PATS);
    int rc = pypm_match(t_graph, t_pats, idx, root, 0, out, T_OUT, &n);
    int good = rc == PYPM_OK && n == expected_len[idx][root] &&
               memcmp(out, expected[idx][root], n * sizeof *out) == 0;
    CHECK(good, "thread %d: match(%" PRId64 ", %" PRId64 ") rc %d", a->id, idx, root, rc);
    a->ok += good;
    if (i % 97 == 0) {
      /* a thread-specific error: the message must be this thread's */
      int64_t bad_root = T_NODES + 1000 * a->id + (i % 1000);
      rc = pypm_match(t_graph, t_pats, 0, bad_root, 0, out, T_OUT, &n);
      snprintf(want, sizeof want, "root node %" PRId64 " out of range", bad_root);
      CHECK(rc == PYPM_E_OUT_OF_RANGE && contains(pypm_last_error(), want),
            "thread %d: own last error (%s)", a->id, want);
    }
    if (i % 501 == 0) {
      /* churn the handle table concurrently */
      wbuf g = {0};
      small_graph(&g);
      int64_t h, sz;
      CHECK_RC(pypm_graph_load(g.w, g.n, &h), PYPM_OK);
      CHECK_RC(pypm_handle_size(h, &sz), PYPM_OK);
      CHECK_RC(pypm_release(h), PYPM_OK);
      wfree(&g);
      int64_t rh;
      size_t rlen;
      if (i % 2004 == 0) {
        CHECK_RC(pypm_match_all(t_graph, t_pats, 0, &rh, &rlen), PYPM_OK);
        CHECK_RC(pypm_release(rh), PYPM_OK);
      }
    }
  }
  return NULL;
}

/* fork() while the other threads are calling: the child must find a
 * usable library (pthread_atfork in pypm_capi.c) */
static void *forker(void *arg) {
  int *bad = arg;
  for (int k = 0; k < 20; k++) {
    pid_t pid = fork();
    if (pid == 0) {
      int64_t out[T_OUT];
      size_t n;
      int ok = 1;
      for (int r = 0; r < T_NODES; r += 7) {
        int k = r % T_PATS;
        int rc = pypm_match(t_graph, t_pats, k, r, 0, out, T_OUT, &n);
        ok &= rc == PYPM_OK && n == expected_len[k][r] &&
              memcmp(out, expected[k][r], n * sizeof *out) == 0;
      }
      _exit(ok ? 0 : 1);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
      (*bad)++;
  }
  return NULL;
}

static void test_threads(int iters) {
  wbuf g = {0}, ps = {0}, p = {0};
  uint64_t s = 42;
  /* random DAG over MatMul/Trans/Add/Neg/ReLU/leaves */
  graph_begin(&g, T_NODES);
  for (int i = 0; i < T_NODES; i++) {
    int64_t attrs[] = {0, (int64_t)rng_below(&s, 3) + 1};
    if (i < 2) {
      graph_node(&g, SYM_LEAF, 0, NULL, 1, attrs);
      continue;
    }
    int k = (int)rng_below(&s, 6);
    /* unary nodes mostly over the previous node: long chains */
    int64_t a = k >= 4 && rng_below(&s, 4) ? i - 1 : (int64_t)rng_below(&s, (uint64_t)i);
    int64_t b = (int64_t)rng_below(&s, (uint64_t)i);
    int64_t kids[2] = {a, b};
    if (k == 0) graph_node(&g, SYM_LEAF, 0, NULL, 1, attrs);
    else if (k == 1) graph_node(&g, SYM_TRANS, 1, kids, 1, attrs);
    else if (k >= 4) graph_node(&g, k == 4 ? SYM_NEG : SYM_RELU, 1, kids, 1, attrs);
    else graph_node(&g, k == 2 ? SYM_MATMUL : SYM_ADD, 2, kids, 1, attrs);
  }
  int64_t sym[] = {SYM_NEG, ATTR_OP_CLASS, 7, SYM_RELU, ATTR_OP_CLASS, 7};
  graph_end(&g, 2, sym);
  patterns_begin(&ps, T_PATS);
  put_all(&p, PAT_MMT, PAT_MMT_LEN);
  patterns_def(&ps, 2, 0, 2, PB_01, 0, NULL, &p);
  p.n = 0; /* Add(x, x) */
  int64_t addxx[] = {2, SYM_ADD, 2, 1, 0, 1, 0};
  put_all(&p, addxx, 7);
  patterns_def(&ps, 1, 0, 1, PB_0, 0, NULL, &p);
  p.n = 0; /* MatMul(x, y) | Trans(x) ; x.rank < 3 */
  int64_t alt[] = {4, 3, 2, SYM_MATMUL, 2, 1, 0, 1, 1, 2, SYM_TRANS, 1, 1, 0,
                   3, 2, 0, 0, 1, 3};
  put_all(&p, alt, sizeof alt / sizeof alt[0]);
  patterns_def(&ps, 2, 0, 1, PB_0, 0, NULL, &p);
  p.n = 0; /* UnaryChain(x; F), recursive (definition 3) */
  int64_t uc[] = PAT_UNARY_CHAIN(3);
  put_all(&p, uc, PAT_UNARY_CHAIN_LEN);
  patterns_def(&ps, 1, 1, 1, PB_0, 1, PB_0, &p);
  patterns_end_all(&ps, T_PATS);
  CHECK_RC(pypm_graph_load(g.w, g.n, &t_graph), PYPM_OK);
  CHECK_RC(pypm_patterns_load(ps.w, ps.n, &t_pats), PYPM_OK);
  long matches = 0, chains = 0;
  for (int i = 0; i < T_PATS; i++)
    for (int r = 0; r < T_NODES; r++) {
      CHECK_RC(pypm_match(t_graph, t_pats, i, r, 0, expected[i][r], T_OUT, &expected_len[i][r]),
               PYPM_OK);
      matches += expected[i][r][0] == PYPM_STATUS_MATCH;
      chains += i == 3 && expected[i][r][0] == PYPM_STATUS_MATCH;
    }
  CHECK(chains > T_NODES / 10, "UnaryChain matches at %ld nodes", chains);
  double t0 = now_s();
  pthread_t th[N_THREADS];
  targ args[N_THREADS];
  for (int i = 0; i < N_THREADS; i++) {
    args[i] = (targ){.id = i, .iters = iters, .ok = 0};
    pthread_create(&th[i], NULL, hammer, &args[i]);
  }
  pthread_t fork_thread;
  int fork_bad = 0;
  pthread_create(&fork_thread, NULL, forker, &fork_bad);
  long ok = 0;
  for (int i = 0; i < N_THREADS; i++) {
    pthread_join(th[i], NULL);
    ok += args[i].ok;
  }
  pthread_join(fork_thread, NULL);
  CHECK(fork_bad == 0, "%d of 20 forked children failed", fork_bad);
  double dt = now_s() - t0;
  printf("  threads: %d threads x %d matches (%ld matching pairs of %d), %ld correct, %.2f s\n",
         N_THREADS, iters, matches, T_PATS * T_NODES, ok, dt);
  CHECK(ok == (long)N_THREADS * iters, "all thread results correct");
  pypm_release(t_graph);
  pypm_release(t_pats);
  wfree(&g);
  wfree(&ps);
  wfree(&p);
}

/* The host's SIGSEGV handler and alternate signal stack survive the start
 * of the OCaml runtime (which installs its own). */
static void host_segv(int sig) { (void)sig; }

static void test_signals_preserved(void) {
  struct sigaction sa, now;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = host_segv;
  sigaction(SIGSEGV, &sa, NULL);
  stack_t mine, before, after;
  static char altstack[1 << 16];
  memset(&mine, 0, sizeof mine);
  mine.ss_sp = altstack;
  mine.ss_size = sizeof altstack;
  sigaltstack(&mine, NULL);
  sigaltstack(NULL, &before);
  CHECK(pypm_format_version() == 2, "version");
  int64_t h;
  CHECK_RC(pypm_graph_load(NULL, 0, &h), PYPM_E_NULL); /* no runtime start yet */
  int64_t buf[4] = {MAGIC_GRAPH, 2, 0, 0};
  CHECK_RC(pypm_graph_load(buf, 4, &h), PYPM_OK);      /* starts the runtime */
  CHECK_RC(pypm_release(h), PYPM_OK);
  sigaction(SIGSEGV, NULL, &now);
  CHECK(now.sa_handler == host_segv, "host SIGSEGV handler restored");
  sigaltstack(NULL, &after);
  CHECK((before.ss_flags & SS_DISABLE) == (after.ss_flags & SS_DISABLE) &&
            ((before.ss_flags & SS_DISABLE) || before.ss_sp == after.ss_sp),
        "alternate signal stack restored");
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_DFL;
  sigaction(SIGSEGV, &sa, NULL);
  memset(&mine, 0, sizeof mine);
  mine.ss_flags = SS_DISABLE;
  sigaltstack(&mine, NULL);
}

/* pypm_graph_extend: a graph grown in place matches like one loaded whole;
 * errors leave it unchanged. */
static void test_extend(void) {
  wbuf g = {0}, ps = {0}, x = {0};
  small_graph(&g);
  small_patterns(&ps);
  int64_t gh = 0, ph = 0, sz = 0;
  CHECK_RC(pypm_graph_load(g.w, g.n, &gh), PYPM_OK);
  CHECK_RC(pypm_patterns_load(ps.w, ps.n, &ph), PYPM_OK);
  /* node 5 = Trans(0), node 6 = MatMul(1, 5): MatMul(x, Trans(y)) with x = 1, y = 0 */
  int64_t k5[] = {0}, k6[] = {1, 5};
  put(&x, 0x545845474d505950LL); /* "PYPMGEXT" */
  put(&x, 2);
  put(&x, 5);
  put(&x, 2);
  graph_node(&x, SYM_TRANS, 1, k5, 0, NULL);
  graph_node(&x, SYM_MATMUL, 2, k6, 0, NULL);
  int64_t sym[] = {SYM_TRANS, ATTR_OP_CLASS, 9};
  graph_end(&x, 1, sym);
  CHECK_RC(pypm_graph_extend(gh, NULL, x.n), PYPM_E_NULL);
  CHECK_RC(pypm_graph_extend(ph, x.w, x.n), PYPM_E_BAD_HANDLE);
  CHECK_RC(pypm_graph_extend(987654321, x.w, x.n), PYPM_E_BAD_HANDLE);
  CHECK_RC(pypm_graph_extend(gh, x.w, x.n - 1), PYPM_E_MALFORMED);
  CHECK_RC(pypm_graph_extend(gh, g.w, g.n), PYPM_E_MALFORMED); /* a graph, not an extension */
  CHECK_RC(pypm_graph_extend(gh, x.w, ((size_t)1 << 32) + 1), PYPM_E_MALFORMED);
  CHECK_RC(pypm_handle_size(gh, &sz), PYPM_OK);
  CHECK(sz == 5, "size after failed extensions %" PRId64, sz);
  int64_t out[16];
  size_t n = 0;
  CHECK_RC(pypm_match(gh, ph, 0, 6, 0, out, 16, &n), PYPM_E_OUT_OF_RANGE);
  CHECK_RC(pypm_graph_extend(gh, x.w, x.n), PYPM_OK);
  CHECK_RC(pypm_handle_size(gh, &sz), PYPM_OK);
  CHECK(sz == 7, "size after the extension %" PRId64, sz);
  CHECK_RC(pypm_match(gh, ph, 0, 6, 0, out, 16, &n), PYPM_OK);
  CHECK(n == 7 && out[0] == PYPM_STATUS_MATCH && out[2] == 0 && out[3] == 1 && out[4] == 1 &&
            out[5] == 0,
        "match at the new node");
  /* the same extension again: its base (5) is stale now */
  CHECK_RC(pypm_graph_extend(gh, x.w, x.n), PYPM_E_OUT_OF_RANGE);
  CHECK(strstr(pypm_last_error(), "starts at node 5") != NULL, "message: %s", pypm_last_error());
  CHECK_RC(pypm_release(gh), PYPM_OK);
  CHECK_RC(pypm_release(ph), PYPM_OK);
  wfree(&g);
  wfree(&ps);
  wfree(&x);
}

/* ----------------------------------------------------------- dominates */

/* pypm_dominates over small_graph with parent Trans(y) (root 0), path "any
 * node" (root 1) and child MatMul(x, Trans y) (root 2). */
static void test_dominates(void) {
  wbuf g = {0}, ps = {0}, p = {0};
  small_graph(&g);
  patterns_begin(&ps, 3);
  int64_t trans[] = {2, SYM_TRANS, 1, 1, 1}, any[] = {1, 0}, pb1[] = {1}, pb0[] = {0};
  put_all(&p, trans, 5);
  patterns_def(&ps, 2, 0, 1, pb1, 0, NULL, &p);
  p.n = 0;
  put_all(&p, any, 2);
  patterns_def(&ps, 1, 0, 1, pb0, 0, NULL, &p);
  p.n = 0;
  put_all(&p, PAT_MMT, PAT_MMT_LEN);
  patterns_def(&ps, 2, 0, 2, PB_01, 0, NULL, &p);
  patterns_end_all(&ps, 3);
  int64_t gh = 0, ph = 0, rh = 0, rbuf[64];
  size_t rlen = 0;
  CHECK_RC(pypm_graph_load(g.w, g.n, &gh), PYPM_OK);
  CHECK_RC(pypm_patterns_load(ps.w, ps.n, &ph), PYPM_OK);
  /* x constant (skipped), 3 and 4 outputs, all live */
  int64_t spec[] = {0, 1, 2, 5, 1 | 4, 4, 4, 2 | 4, 2 | 4};
  CHECK_RC(pypm_dominates(gh, ph, spec, 9, 3, 0, &rh, &rlen), PYPM_OK);
  CHECK_RC(pypm_result_read(rh, rbuf, 64), PYPM_OK);
  int64_t want[] = {1, 3, PYPM_STATUS_MATCH, 2, 2, 2, 3};
  CHECK(rlen == 7 && memcmp(rbuf, want, sizeof want) == 0, "dominates at 3");
  CHECK_RC(pypm_release(rh), PYPM_OK);
  CHECK_RC(pypm_dominates(gh, ph, spec, 9, -1, 0, &rh, &rlen), PYPM_OK);
  CHECK_RC(pypm_result_read(rh, rbuf, 64), PYPM_OK);
  CHECK(rlen == 7 && memcmp(rbuf, want, sizeof want) == 0, "dominates at every node");
  CHECK_RC(pypm_release(rh), PYPM_OK);
  int64_t no[] = {1, 3, PYPM_STATUS_NO_MATCH, -1, 0};
  /* x not constant: a path node with no inputs, a dead end */
  spec[4] = 4;
  CHECK_RC(pypm_dominates(gh, ph, spec, 9, 3, 0, &rh, &rlen), PYPM_OK);
  CHECK_RC(pypm_result_read(rh, rbuf, 64), PYPM_OK);
  CHECK(rlen == 5 && memcmp(rbuf, no, sizeof no) == 0, "dead end");
  CHECK_RC(pypm_release(rh), PYPM_OK);
  /* the parent is an output: not dominated */
  spec[4] = 5;
  spec[6] = 6;
  CHECK_RC(pypm_dominates(gh, ph, spec, 9, 3, 0, &rh, &rlen), PYPM_OK);
  CHECK_RC(pypm_result_read(rh, rbuf, 64), PYPM_OK);
  CHECK(rlen == 5 && memcmp(rbuf, no, sizeof no) == 0, "parent is an output");
  CHECK_RC(pypm_release(rh), PYPM_OK);
  /* the root is not live: the parent has no user that counts (an exit) */
  spec[6] = 4;
  spec[7] = 2;
  CHECK_RC(pypm_dominates(gh, ph, spec, 9, 3, 0, &rh, &rlen), PYPM_OK);
  CHECK_RC(pypm_result_read(rh, rbuf, 64), PYPM_OK);
  CHECK(rlen == 5 && memcmp(rbuf, no, sizeof no) == 0, "dead root");
  CHECK_RC(pypm_release(rh), PYPM_OK);
  spec[7] = 6;
  /* out of fuel: the child needs more than one step */
  CHECK_RC(pypm_dominates(gh, ph, spec, 9, 3, 1, &rh, &rlen), PYPM_OK);
  CHECK_RC(pypm_result_read(rh, rbuf, 64), PYPM_OK);
  CHECK(rlen == 5 && rbuf[2] == PYPM_STATUS_OUT_OF_FUEL, "out of fuel");
  CHECK_RC(pypm_release(rh), PYPM_OK);
  /* validation */
  CHECK_RC(pypm_dominates(gh, ph, NULL, 9, 3, 0, &rh, &rlen), PYPM_E_NULL);
  CHECK_RC(pypm_dominates(gh, ph, spec, 9, 3, 0, NULL, &rlen), PYPM_E_NULL);
  CHECK_RC(pypm_dominates(gh, ph, spec, 9, 3, 0, &rh, NULL), PYPM_E_NULL);
  CHECK_RC(pypm_dominates(gh, ph, spec, 3, 3, 0, &rh, &rlen), PYPM_E_MALFORMED);
  CHECK_RC(pypm_dominates(gh, ph, spec, 8, 3, 0, &rh, &rlen), PYPM_E_MALFORMED);
  CHECK(contains(pypm_last_error(), "node flags"), "message: %s", pypm_last_error());
  CHECK_RC(pypm_dominates(gh, ph, spec, 9, 5, 0, &rh, &rlen), PYPM_E_OUT_OF_RANGE);
  CHECK_RC(pypm_dominates(ph, gh, spec, 9, 3, 0, &rh, &rlen), PYPM_E_BAD_HANDLE);
  spec[2] = 3;
  CHECK_RC(pypm_dominates(gh, ph, spec, 9, 3, 0, &rh, &rlen), PYPM_E_OUT_OF_RANGE);
  CHECK(contains(pypm_last_error(), "child pattern index 3"), "message: %s", pypm_last_error());
  spec[2] = 2;
  spec[3] = 6;
  CHECK_RC(pypm_dominates(gh, ph, spec, 9, 3, 0, &rh, &rlen), PYPM_E_MALFORMED);
  CHECK(contains(pypm_last_error(), "the graph has 5 nodes"), "message: %s", pypm_last_error());
  spec[3] = 5;
  spec[5] = 8;
  CHECK_RC(pypm_dominates(gh, ph, spec, 9, 3, 0, &rh, &rlen), PYPM_E_MALFORMED);
  CHECK(contains(pypm_last_error(), "flags of node 1"), "message: %s", pypm_last_error());
  spec[5] = -1;
  CHECK_RC(pypm_dominates(gh, ph, spec, 9, 3, 0, &rh, &rlen), PYPM_E_MALFORMED);
  pypm_release(gh);
  pypm_release(ph);
  wfree(&g);
  wfree(&ps);
  wfree(&p);
}

/* fork() while another thread starts the runtime (the process's first
 * call): the child must not inherit a half-started runtime or a held lock
 * (pthread_atfork registered at load time; do_init under big_lock). Each
 * trial runs in a fresh process whose runtime has not started. */
static void *first_call(void *arg) {
  *(int *)arg = pypm_release(0);
  return NULL;
}

static void test_fork_during_start(int trials) {
  int bad = 0;
  for (int t = 0; t < trials; t++) {
    pid_t child = fork();
    if (child == 0) {
      alarm(30);
      int rc_thread = -1;
      pthread_t th;
      pthread_create(&th, NULL, first_call, &rc_thread);
      usleep((useconds_t)(t % 10) * 150);  /* into the start, at varied points */
      pid_t grand = fork();
      if (grand == 0) {
        alarm(10);
        int a = pypm_release(0), b = pypm_release(0);
        _exit(a == b ? 0 : 1);
      }
      int status = 0;
      int ok = grand > 0 && waitpid(grand, &status, 0) == grand && WIFEXITED(status) &&
               WEXITSTATUS(status) == 0;
      pthread_join(th, NULL);
      _exit(ok && rc_thread == pypm_release(0) ? 0 : 1);
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
      bad++;
  }
  CHECK(bad == 0, "%d of %d children forked during the runtime's start failed or hung",
        bad, trials);
}

/* ------------------------------------------------- firing certificates */

/* Term-graph labels of the certificate tests (the driver's, not the
 * matcher's symbols): leaves x and y, Trans, MatMul, and the replacements
 * MMT (the rule's), OTHER (another rule's) and NEG (an unmatched node). */
enum { L_X = 20, L_Y, L_TRANS, L_MATMUL, L_MMT, L_OTHER, L_NEG, N_LABELS };

typedef struct {
  int64_t label;
  int k;
  int64_t a[2];
} tnode_t;

static void put_tgraph(wbuf *b, int n, const tnode_t *ns, int nout, const int64_t *outs) {
  put(b, n);
  for (int i = 0; i < n; i++) {
    put(b, ns[i].label);
    put(b, ns[i].k);
    put_all(b, ns[i].a, (size_t)ns[i].k);
  }
  put(b, nout);
  put_all(b, outs, (size_t)nout);
}

/* before: the matcher's small_graph, node for node: x(0), y(1), Trans(y)(2),
 * MatMul(x, Trans y)(3), MatMul(x, y)(4); outputs 3, 4 */
static const tnode_t FC_BEFORE[] = {{L_X, 0, {0}},           {L_Y, 0, {0}},
                                    {L_TRANS, 1, {1}},       {L_MATMUL, 2, {0, 2}},
                                    {L_MATMUL, 2, {0, 1}}};
static const int64_t FC_BEFORE_OUTS[] = {3, 4};

/* one pass: before, the after graph, one firing (root, replacement), the map */
static void fc_pass(wbuf *b, int na, const tnode_t *after, const int64_t *outs, int64_t root,
                    int64_t rep, const int64_t *map) {
  put_tgraph(b, 5, FC_BEFORE, 2, FC_BEFORE_OUTS);
  put_tgraph(b, na, after, 2, outs);
  put(b, 1);
  put(b, root);
  put(b, rep);
  put_all(b, map, (size_t)na);
}

/* the labels' operators and the before nodes' images (the identity) */
static void fc_tables(wbuf *b, int gm3) {
  put(b, N_LABELS);
  for (int l = 0; l < N_LABELS; l++)
    put(b, l == L_X || l == L_Y ? SYM_LEAF
           : l == L_TRANS       ? SYM_TRANS
           : l == L_MATMUL      ? SYM_MATMUL
                                : -1);
  for (int i = 0; i < 5; i++) put(b, i == 3 ? gm3 : i);
}

/* a rule certificate: pattern 0 (MatMul(x, Trans(y))), x -> sx, y -> sy, the
 * template label(x, y) */
static void fc_rule_cert(wbuf *b, int64_t sx, int64_t sy, int64_t label) {
  int64_t w[] = {0, 0, 2, 0, sx, 1, sy, 1, label, 2, 0, 0, 0, 1, 1, 0};
  put_all(b, w, sizeof w / sizeof w[0]);
}

/* pypm_validate_firings on the pass built by `mk`; also checks that
 * pypm_validate_rewrite (which never sees the rules) accepts the pass alone */
static void fc_check(int64_t gh, int64_t ph, const wbuf *b, size_t pass_len, int64_t want,
                     int64_t want_where, const char *what) {
  int64_t verdict = -2, where = -2;
  CHECK_RC(pypm_validate_rewrite(b->w, pass_len, &verdict, &where), PYPM_OK);
  CHECK(verdict == 0, "%s: pypm_validate_rewrite alone accepts the pass (verdict %" PRId64 ")",
        what, verdict);
  CHECK_RC(pypm_validate_firings(gh, ph, 0, b->w, b->n, &verdict, &where), PYPM_OK);
  CHECK(verdict == want && where == want_where,
        "%s: verdict %" PRId64 " where %" PRId64 ", expected %" PRId64 " where %" PRId64, what,
        verdict, where, want, want_where);
}

static void test_certificates(void) {
  wbuf g = {0}, ps = {0}, b = {0};
  int64_t gh = 0, ph = 0, verdict = 0, where = 0;
  small_graph(&g);
  small_patterns(&ps);
  CHECK_RC(pypm_graph_load(g.w, g.n, &gh), PYPM_OK);
  CHECK_RC(pypm_patterns_load(ps.w, ps.n, &ph), PYPM_OK);
  size_t pass_len;

  /* the rule MatMul(x, Trans(y)) -> MMT(x, y) fired at 3: after = x, y,
   * MMT(x, y) (new), MatMul(x, y) (node 4); outputs 2, 3 */
  const tnode_t good[] = {{L_X, 0, {0}}, {L_Y, 0, {0}}, {L_MMT, 2, {0, 1}}, {L_MATMUL, 2, {0, 1}}};
  const int64_t good_outs[] = {2, 3}, good_map[] = {0, 1, -1, 4};
  fc_pass(&b, 4, good, good_outs, 3, 2, good_map);
  pass_len = b.n;
  fc_tables(&b, 3);
  fc_rule_cert(&b, 0, 1, L_MMT);
  fc_check(gh, ph, &b, pass_len, 0, -1, "the rule's firing");

  /* fault: the substitution's bindings swapped (the matcher binds x = 0) */
  b.n = pass_len;
  fc_tables(&b, 3);
  fc_rule_cert(&b, 1, 0, L_MMT);
  fc_check(gh, ph, &b, pass_len, PYPM_REJECT_SUBST, 0, "swapped substitution");

  /* fault: two bindings swapped in the replacement, MMT(y, x) */
  b.n = 0;
  const tnode_t swapped[] = {{L_X, 0, {0}}, {L_Y, 0, {0}}, {L_MMT, 2, {1, 0}}, {L_MATMUL, 2, {0, 1}}};
  fc_pass(&b, 4, swapped, good_outs, 3, 2, good_map);
  pass_len = b.n;
  fc_tables(&b, 3);
  fc_rule_cert(&b, 0, 1, L_MMT);
  fc_check(gh, ph, &b, pass_len, PYPM_REJECT_TEMPLATE, 0, "bindings swapped in the replacement");

  /* fault: another rule's template built, OTHER(x, y) */
  b.n = 0;
  const tnode_t other[] = {{L_X, 0, {0}}, {L_Y, 0, {0}}, {L_OTHER, 2, {0, 1}}, {L_MATMUL, 2, {0, 1}}};
  fc_pass(&b, 4, other, good_outs, 3, 2, good_map);
  pass_len = b.n;
  fc_tables(&b, 3);
  fc_rule_cert(&b, 0, 1, L_MMT);
  fc_check(gh, ph, &b, pass_len, PYPM_REJECT_TEMPLATE, 0, "another rule's template");

  /* fault: an unmatched node added, MMT(x, NEG(y)) */
  b.n = 0;
  const tnode_t added[] = {{L_X, 0, {0}},         {L_Y, 0, {0}}, {L_NEG, 1, {1}},
                           {L_MMT, 2, {0, 2}},    {L_MATMUL, 2, {0, 1}}};
  const int64_t added_outs[] = {3, 4}, added_map[] = {0, 1, -1, -1, 4};
  fc_pass(&b, 5, added, added_outs, 3, 3, added_map);
  pass_len = b.n;
  fc_tables(&b, 3);
  fc_rule_cert(&b, 0, 1, L_MMT);
  fc_check(gh, ph, &b, pass_len, PYPM_REJECT_TEMPLATE, 0, "an unmatched added node");

  /* fault: the firing at 4, MatMul(x, y), which the pattern does not match */
  b.n = 0;
  const tnode_t at4[] = {{L_X, 0, {0}},         {L_Y, 0, {0}}, {L_TRANS, 1, {1}},
                         {L_MATMUL, 2, {0, 2}}, {L_MMT, 2, {0, 1}}};
  const int64_t at4_outs[] = {3, 4}, at4_map[] = {0, 1, 2, 3, -1};
  fc_pass(&b, 5, at4, at4_outs, 4, 4, at4_map);
  pass_len = b.n;
  fc_tables(&b, 3);
  fc_rule_cert(&b, 0, 1, L_MMT);
  fc_check(gh, ph, &b, pass_len, PYPM_REJECT_MATCH, 0, "a firing where the pattern does not match");

  /* fault: the before graph does not agree with the matcher's: node 3's
   * image is 4, MatMul(x, y), whose children are not node 3's arguments' */
  b.n = 0;
  fc_pass(&b, 4, good, good_outs, 3, 2, good_map);
  pass_len = b.n;
  fc_tables(&b, 4);
  fc_rule_cert(&b, 0, 1, L_MMT);
  fc_check(gh, ph, &b, pass_len, PYPM_REJECT_AGREE, 3, "images that disagree");

  /* a merge of equal nodes: 3' = MatMul(x, y) is merged into 4 */
  b.n = 0;
  {
    const tnode_t before2[] = {{L_X, 0, {0}}, {L_Y, 0, {0}}, {L_MATMUL, 2, {0, 1}},
                               {L_MATMUL, 2, {0, 1}}};
    const int64_t outs2[] = {2, 3};
    const tnode_t after2[] = {{L_X, 0, {0}}, {L_Y, 0, {0}}, {L_MATMUL, 2, {0, 1}}};
    const int64_t aouts2[] = {2, 2}, map2[] = {0, 1, 3};
    put_tgraph(&b, 4, before2, 2, outs2);
    put_tgraph(&b, 3, after2, 2, aouts2);
    put(&b, 1);
    put(&b, 2);
    put(&b, 2);
    put_all(&b, map2, 3);
    pass_len = b.n;
    put(&b, 0); /* no label has an operator */
    for (int i = 0; i < 4; i++) put(&b, -1);
    put(&b, 1); /* CMerge */
    fc_check(gh, ph, &b, pass_len, 0, -1, "a merge");
    /* a merge is no rule: replacing with a node of another label is refused */
    b.n = 0;
    const tnode_t after3[] = {{L_X, 0, {0}}, {L_Y, 0, {0}}, {L_MMT, 2, {0, 1}}, {L_MATMUL, 2, {0, 1}}};
    const int64_t aouts3[] = {2, 3}, map3[] = {0, 1, -1, 3};
    put_tgraph(&b, 4, before2, 2, outs2);
    put_tgraph(&b, 4, after3, 2, aouts3);
    put(&b, 1);
    put(&b, 2);
    put(&b, 2);
    put_all(&b, map3, 4);
    pass_len = b.n;
    put(&b, 0);
    for (int i = 0; i < 4; i++) put(&b, -1);
    put(&b, 1);
    fc_check(gh, ph, &b, pass_len, PYPM_REJECT_TEMPLATE, 0, "a merge into an unequal node");
  }

  /* decoding: a bad certificate kind, a template node naming a later one,
   * truncation at every length, trailing words; NULLs; bad handles */
  b.n = 0;
  fc_pass(&b, 4, good, good_outs, 3, 2, good_map);
  pass_len = b.n;
  fc_tables(&b, 3);
  size_t cert_at = b.n;
  fc_rule_cert(&b, 0, 1, L_MMT);
  size_t full = b.n;
  b.w[cert_at] = 7;
  CHECK_RC(pypm_validate_firings(gh, ph, 0, b.w, b.n, &verdict, &where), PYPM_E_MALFORMED);
  CHECK(contains(pypm_last_error(), "certificate kind"), "message names the certificate kind");
  b.w[cert_at] = 0;
  b.w[full - 1] = 5; /* the root argument: node 5 of a 1-node template */
  CHECK_RC(pypm_validate_firings(gh, ph, 0, b.w, b.n, &verdict, &where), PYPM_E_MALFORMED);
  CHECK(contains(pypm_last_error(), "not an earlier one"), "message names the template node");
  b.w[full - 1] = 0;
  for (size_t n = 0; n < full; n++)
    CHECK_RC(pypm_validate_firings(gh, ph, 0, b.w, n, &verdict, &where), PYPM_E_MALFORMED);
  put(&b, 0);
  CHECK_RC(pypm_validate_firings(gh, ph, 0, b.w, b.n, &verdict, &where), PYPM_E_MALFORMED);
  CHECK(contains(pypm_last_error(), "trailing"), "message names the trailing words");
  b.n = full;
  CHECK_RC(pypm_validate_firings(gh, ph, 0, b.w, b.n, &verdict, &where), PYPM_OK);
  CHECK(verdict == 0, "the buffer restored is accepted");
  /* a template whose shared nodes unfold to 2^40 nodes: refused up front */
  b.n = cert_at;
  {
    int64_t head[] = {0, 0, 2, 0, 0, 1, 1, 40};
    put_all(&b, head, sizeof head / sizeof head[0]);
    for (int j = 0; j < 40; j++) {
      put(&b, L_MMT);
      put(&b, 2);
      if (j == 0) {
        int64_t a[] = {0, 0, 0, 1};
        put_all(&b, a, 4);
      } else {
        int64_t a[] = {1, j - 1, 1, j - 1};
        put_all(&b, a, 4);
      }
    }
    put(&b, 1);
    put(&b, 39);
    CHECK_RC(pypm_validate_firings(gh, ph, 0, b.w, b.n, &verdict, &where), PYPM_E_MALFORMED);
    CHECK(contains(pypm_last_error(), "unfolds to"), "message names the template's size");
  }
  b.n = cert_at;
  fc_rule_cert(&b, 0, 1, L_MMT);
  CHECK_RC(pypm_validate_firings(gh, ph, 0, NULL, b.n, &verdict, &where), PYPM_E_NULL);
  CHECK_RC(pypm_validate_firings(gh, ph, 0, b.w, b.n, NULL, &where), PYPM_E_NULL);
  CHECK_RC(pypm_validate_firings(gh, ph, 0, b.w, b.n, &verdict, NULL), PYPM_E_NULL);
  CHECK_RC(pypm_validate_firings(ph, gh, 0, b.w, b.n, &verdict, &where), PYPM_E_BAD_HANDLE);
  /* random corruption of single words: an error code or a verdict, never a crash */
  uint64_t seed = 0x9e3779b97f4a7c15ULL;
  for (int round = 0; round < 2000; round++) {
    size_t i = (size_t)rng_below(&seed, full);
    int64_t old = b.w[i];
    b.w[i] = (int64_t)rng_below(&seed, 40) - 2;
    int rc = pypm_validate_firings(gh, ph, 0, b.w, b.n, &verdict, &where);
    CHECK(rc == PYPM_OK || rc == PYPM_E_MALFORMED, "corrupted word %zu: rc %d", i, rc);
    b.w[i] = old;
  }
  CHECK_RC(pypm_release(gh), PYPM_OK);
  CHECK_RC(pypm_release(ph), PYPM_OK);
  wfree(&g);
  wfree(&ps);
  wfree(&b);
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 100000;
  setvbuf(stdout, NULL, _IOLBF, 0);
  printf("test_capi\n");
  test_fork_during_start(20);
  test_signals_preserved();
  test_basics();
  test_extend();
  test_dominates();
  test_certificates();
  test_full();
  test_errors();
  test_limits();
  test_fuzz(rounds);
  test_threads(20000);
  printf("test_capi: %d checks, %d failures\n", checks, fails);
  return fails ? 1 : 0;
}
