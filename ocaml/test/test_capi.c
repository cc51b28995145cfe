/* End-to-end test of libpypm_verified.so through its public C API:
 *   1. load a graph and patterns, match (MatMul(x, Trans(y)) binds x, y),
 *      match_all and result layout, buffer-size protocol;
 *   2. every error code that can be provoked, NULL pointers, bad handles;
 *   3. inputs at the limits (depth 10000, wide nodes, big patterns) that
 *      stress the stack of the extracted, non-tail-recursive matcher;
 *   4. fuzzing with random, mutated and truncated buffers (must only ever
 *      return error codes);
 *   5. 8 threads calling pypm_match (and more) concurrently, checking every
 *      result and the per-thread last-error message, while another thread
 *      forks children that use the library;
 *   6. the host's SIGSEGV handler and signal stack survive runtime start-up.
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
}

static void small_patterns(wbuf *ps) {
  wbuf p = {0};
  patterns_begin(ps, 3);
  /* 0: MatMul(x, Trans(y)) */
  put_all(&p, PAT_MMT, PAT_MMT_LEN);
  patterns_add(ps, &p);
  p.n = 0;
  /* 1: MatMul(x, Trans(y)) ; guard(x.shape[1] = y.shape[0] /\ x.rank = 2) */
  put(&p, 4);
  put_all(&p, PAT_MMT, PAT_MMT_LEN);
  int64_t g[] = {4, 2, 2, 0, 101, 2, 1, 100, 2, 2, 0, 0, 1, 2};
  put_all(&p, g, sizeof g / sizeof g[0]);
  patterns_add(ps, &p);
  p.n = 0;
  /* 2: MatMul(x, Trans(y) | y) */
  int64_t alt[] = {2, SYM_MATMUL, 2, 1, 0, 3, 2, SYM_TRANS, 1, 1, 1, 1, 1};
  put_all(&p, alt, sizeof alt / sizeof alt[0]);
  patterns_add(ps, &p);
  wfree(&p);
}

static void test_basics(void) {
  wbuf g = {0}, ps = {0};
  small_graph(&g);
  small_patterns(&ps);
  int64_t gh = 0, ph = 0, sz = 0;
  CHECK(pypm_format_version() == 1, "format version");
  CHECK_RC(pypm_graph_load(g.w, g.n, &gh), PYPM_OK);
  CHECK_RC(pypm_patterns_load(ps.w, ps.n, &ph), PYPM_OK);
  CHECK(gh > 0 && ph > 0 && gh != ph, "handles %" PRId64 " %" PRId64, gh, ph);
  CHECK_RC(pypm_handle_size(gh, &sz), PYPM_OK);
  CHECK(sz == 5, "graph size %" PRId64, sz);
  CHECK_RC(pypm_handle_size(ph, &sz), PYPM_OK);
  CHECK(sz == 3, "pattern count %" PRId64, sz);

  int64_t out[16];
  size_t n = 0;
  /* MatMul(x, Trans(y)) at node 3: x -> 0, y -> 1 */
  CHECK_RC(pypm_match(gh, ph, 0, 3, 0, out, 16, &n), PYPM_OK);
  CHECK(n == 6 && out[0] == PYPM_STATUS_MATCH && out[1] == 2 && out[2] == 0 && out[3] == 0 &&
            out[4] == 1 && out[5] == 1,
        "MatMul(x, Trans(y)) at 3");
  CHECK_RC(pypm_match(gh, ph, 0, 4, 0, out, 16, &n), PYPM_OK);
  CHECK(n == 2 && out[0] == PYPM_STATUS_NO_MATCH && out[1] == 0, "no match at 4");
  CHECK_RC(pypm_match(gh, ph, 0, 0, 0, out, 16, &n), PYPM_OK);
  CHECK(n == 2 && out[0] == PYPM_STATUS_NO_MATCH, "no match at leaf");
  /* guard x.shape[1] (8) = y.shape[0] (8) and x.rank = 2: holds */
  CHECK_RC(pypm_match(gh, ph, 1, 3, 0, out, 16, &n), PYPM_OK);
  CHECK(n == 6 && out[0] == PYPM_STATUS_MATCH && out[3] == 0 && out[5] == 1, "guarded match");
  /* alternate: matches at 3 and 4 */
  CHECK_RC(pypm_match(gh, ph, 2, 4, 0, out, 16, &n), PYPM_OK);
  CHECK(n == 6 && out[0] == PYPM_STATUS_MATCH && out[3] == 0 && out[5] == 1, "alt at 4");
  /* fuel */
  CHECK_RC(pypm_match(gh, ph, 0, 3, 2, out, 16, &n), PYPM_OK);
  CHECK(n == 2 && out[0] == PYPM_STATUS_OUT_OF_FUEL, "out of fuel");
  CHECK_RC(pypm_match(gh, ph, 0, 3, -5, out, 16, &n), PYPM_OK);
  CHECK(n == 6 && out[0] == PYPM_STATUS_MATCH, "negative fuel = default");
  CHECK_RC(pypm_match(gh, ph, 0, 3, INT64_MAX, out, 16, &n), PYPM_OK);
  CHECK(n == 6 && out[0] == PYPM_STATUS_MATCH, "huge fuel");
  /* buffer-size protocol */
  n = 0;
  CHECK_RC(pypm_match(gh, ph, 0, 3, 0, out, 5, &n), PYPM_E_BUFFER_TOO_SMALL);
  CHECK(n == 6, "out_len on BUFFER_TOO_SMALL: %zu", n);
  CHECK(contains(pypm_last_error(), "needs 6 words"), "message");
  CHECK_RC(pypm_match(gh, ph, 0, 3, 0, NULL, 0, &n), PYPM_E_BUFFER_TOO_SMALL);
  CHECK(n == 6, "size query with NULL out: %zu", n);

  /* match_all */
  int64_t rh = 0;
  size_t rlen = 0;
  CHECK_RC(pypm_match_all(gh, ph, 0, &rh, &rlen), PYPM_OK);
  int64_t want[] = {4, 0, 3, 0, 2, 0, 0, 1, 1, 1, 3, 0, 2, 0, 0, 1, 1,
                    2, 3, 0, 2, 0, 0, 1, 1, 2, 4, 0, 2, 0, 0, 1, 1};
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
  /* fuel 1: guarded pattern 1 is out of fuel everywhere, 0 and 2 at the
   * MatMul nodes 3 and 4 (elsewhere the first step already fails) */
  CHECK(rlen == 1 + 9 * 4 && rbuf[0] == 9, "fuel 1: 9 entries (%zu words)", rlen);
  for (int e = 0; e < 9 && rlen == 37; e++)
    CHECK(rbuf[1 + 4 * e + 2] == PYPM_STATUS_OUT_OF_FUEL && rbuf[1 + 4 * e + 3] == 0,
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
    wbuf b = {0}, p = {0};
    int64_t w[] = {4, 2, SYM_MATMUL, 2, 1, 0, 1, 0, 2, 2, 1, 0, 1, 1};
    put_all(&p, w, sizeof w / sizeof w[0]);
    patterns_begin(&b, 1);
    patterns_add(&b, &p);
    CHECK_RC(pypm_patterns_load(b.w, b.n, &h), PYPM_E_ILL_FORMED);
    CHECK(contains(pypm_last_error(), "reads variable 1"), "ill-formed message");
    wfree(&b);
    wfree(&p);
  }
  /* too deep: 10001 nested alternates */
  {
    wbuf b = {0}, p = {0};
    for (int i = 0; i < 10000; i++) put(&p, 3), put(&p, 1), put(&p, 0);
    put(&p, 1), put(&p, 0);
    patterns_begin(&b, 1);
    patterns_add(&b, &p);
    CHECK_RC(pypm_patterns_load(b.w, b.n, &h), PYPM_E_TOO_DEEP);
    wfree(&b);
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

static int load_one_pattern(const wbuf *p, int64_t *h) {
  wbuf b = {0};
  patterns_begin(&b, 1);
  patterns_add(&b, p);
  int rc = pypm_patterns_load(b.w, b.n, h);
  wfree(&b);
  return rc;
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
  CHECK_RC(pypm_graph_load(g.w, g.n, &gh), PYPM_OK);
  report_stack("wide graph load");

  /* Add(x0 .. x32765) at node 4: 32766 bindings (65535 words) */
  wbuf p = {0};
  put(&p, 2), put(&p, SYM_ADD), put(&p, wide2);
  for (int64_t i = 0; i < wide2; i++) put(&p, 1), put(&p, i);
  CHECK_RC(load_one_pattern(&p, &ph), PYPM_OK);
  size_t cap = 2 + 2 * (size_t)wide2;
  int64_t *big = malloc(cap * sizeof *big);
  CHECK_RC(pypm_match(gh, ph, 0, 4, 0, big, cap, &n), PYPM_OK);
  CHECK(n == cap && big[0] == PYPM_STATUS_MATCH && big[1] == wide2 && big[2 + 2 * 100] == 100 &&
            big[3 + 2 * 100] == 100 % 3,
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
  CHECK_RC(load_one_pattern(&p, &ph), PYPM_OK);
  report_stack("load of a guard with 7000 reads");
  pypm_release(ph);

  /* depth 10000: alternates, guards, expressions */
  p.n = 0;
  for (int i = 0; i < 9999; i++) put(&p, 3), put(&p, 2), put(&p, 99), put(&p, 0);
  put(&p, 1), put(&p, 0);
  CHECK_RC(load_one_pattern(&p, &ph), PYPM_OK);
  CHECK_RC(pypm_match(gh, ph, 0, 0, 0, out, 8, &n), PYPM_OK);
  CHECK(n == 4 && out[0] == PYPM_STATUS_MATCH, "9999 failing alternates then x");
  pypm_release(ph);
  p.n = 0;
  put(&p, 4), put(&p, 1), put(&p, 0);
  for (int i = 0; i < 9997; i++) put(&p, 6);
  put(&p, 2), put(&p, 1), put(&p, 0), put(&p, 1), put(&p, 0); /* 0 = 0 under 9997 nots */
  CHECK_RC(load_one_pattern(&p, &ph), PYPM_OK);
  CHECK_RC(pypm_match(gh, ph, 0, 0, 0, out, 8, &n), PYPM_OK);
  CHECK(n == 2 && out[0] == PYPM_STATUS_NO_MATCH, "odd number of nots: %" PRId64, out[0]);
  pypm_release(ph);
  p.n = 0;
  put(&p, 4), put(&p, 1), put(&p, 0), put(&p, 2);
  for (int i = 0; i < 9996; i++) put(&p, 3), put(&p, 1), put(&p, 1); /* 1 + (1 + ...) */
  put(&p, 1), put(&p, 0), put(&p, 1), put(&p, 9996);
  CHECK_RC(load_one_pattern(&p, &ph), PYPM_OK);
  CHECK_RC(pypm_match(gh, ph, 0, 0, 0, out, 8, &n), PYPM_OK);
  CHECK(n == 4 && out[0] == PYPM_STATUS_MATCH, "deep sum = 9996");
  report_stack("depth-10000 patterns");
  pypm_release(ph);
  /* MatMul(x, Trans(y)) at the 2^20-ary MatMul: length of its children */
  p.n = 0;
  put_all(&p, PAT_MMT, PAT_MMT_LEN);
  CHECK_RC(load_one_pattern(&p, &ph), PYPM_OK);
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

/* a random valid-ish pattern (may be ill-formed), prefix words into p */
static void gen_expr(wbuf *p, uint64_t *s, int d) {
  int t = d > 4 ? 1 + (int)rng_below(s, 2) : 1 + (int)rng_below(s, 5);
  put(p, t);
  if (t == 1) put(p, (int64_t)rng_below(s, 5) - 2);
  else if (t == 2) put(p, (int64_t)rng_below(s, 4)), put(p, (int64_t)rng_below(s, 3));
  else gen_expr(p, s, d + 1), gen_expr(p, s, d + 1);
}
static void gen_guard(wbuf *p, uint64_t *s, int d) {
  int t = d > 4 ? 1 + (int)rng_below(s, 3) : 1 + (int)rng_below(s, 6);
  put(p, t);
  if (t == 2 || t == 3) gen_expr(p, s, d + 1), gen_expr(p, s, d + 1);
  else if (t == 4 || t == 5) gen_guard(p, s, d + 1), gen_guard(p, s, d + 1);
  else if (t == 6) gen_guard(p, s, d + 1);
}
static void gen_pattern(wbuf *p, uint64_t *s, int d) {
  int t = d > 4 ? 1 : 1 + (int)rng_below(s, 4);
  put(p, t);
  if (t == 1) put(p, (int64_t)rng_below(s, 4));
  else if (t == 2) {
    int n = (int)rng_below(s, 3);
    put(p, 1 + (int64_t)rng_below(s, 3)), put(p, n);
    for (int i = 0; i < n; i++) gen_pattern(p, s, d + 1);
  } else if (t == 3) gen_pattern(p, s, d + 1), gen_pattern(p, s, d + 1);
  else gen_pattern(p, s, d + 1), gen_guard(p, s, d + 1);
}

static void gen_graph(wbuf *g, uint64_t *s) {
  int n = 1 + (int)rng_below(s, 12);
  graph_begin(g, n);
  for (int i = 0; i < n; i++) {
    put(g, 1 + (int64_t)rng_below(s, 3));
    int nc = (int)rng_below(s, 3);
    put(g, nc);
    for (int j = 0; j < nc; j++) put(g, (int64_t)rng_below(s, (uint64_t)n));
    int na = (int)rng_below(s, 3);
    put(g, na);
    for (int j = 0; j < na; j++) put(g, j), put(g, (int64_t)rng_below(s, 5) - 2);
  }
}

static void gen_patterns(wbuf *b, uint64_t *s) {
  int n = (int)rng_below(s, 4);
  wbuf p = {0};
  patterns_begin(b, n);
  for (int i = 0; i < n; i++) {
    p.n = 0;
    gen_pattern(&p, s, 0);
    patterns_add(b, &p);
  }
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
      free(r);
      CHECK_RC(pypm_handle_size(rh, &sz), PYPM_OK);
      CHECK_RC(pypm_release(rh), PYPM_OK);
    }
    for (int k = 0; k < 4; k++) {
      int64_t root = (int64_t)rng_below(s, (uint64_t)gsz + 2) - 1;
      int64_t idx = (int64_t)rng_below(s, (uint64_t)psz + 2) - 1;
      int rc2 = pypm_match(gh, ph, idx, root, (int64_t)rng_below(s, 50) - 5, out,
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
      if (rng_below(&s, 2)) put(&g, MAGIC_GRAPH), put(&g, 1);
      for (int i = 0; i < n; i++) put(&g, fuzz_word(&s));
      n = (int)rng_below(&s, 40);
      if (rng_below(&s, 2)) put(&ps, MAGIC_PATTERNS), put(&ps, 1);
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
    /* all prefixes of accepted buffers must be rejected */
    if (rc1 == PYPM_OK && rng_below(&s, 8) == 0) {
      for (size_t k = 0; k < g.n; k++) {
        int64_t h2;
        int rc = pypm_graph_load(g.w, k, &h2);
        CHECK(rc == PYPM_E_MALFORMED, "graph prefix %zu/%zu accepted (rc %d)", k, g.n, rc);
      }
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
}

/* ------------------------------------------------------------ threads */

#define T_NODES 3000
#define T_PATS 3
#define N_THREADS 8

static int64_t t_graph, t_pats;
static int64_t expected[T_PATS][T_NODES][8]; /* status, n, pairs (<= 3 pairs) */
static size_t expected_len[T_PATS][T_NODES];

typedef struct {
  int id;
  int iters;
  long ok;
} targ;

static void *hammer(void *arg) {
  targ *a = arg;
  uint64_t s = 0x1234567ULL * (uint64_t)(a->id + 1);
  int64_t out[8];
  size_t n;
  char want[64];
  for (int i = 0; i < a->iters; i++) {
    int64_t root = (int64_t)rng_below(&s, T_NODES), idx = (int64_t)rng_below(&s, T_PATS);
    int rc = pypm_match(t_graph, t_pats, idx, root, 0, out, 8, &n);
    int good = rc == PYPM_OK && n == expected_len[idx][root] &&
               memcmp(out, expected[idx][root], n * sizeof *out) == 0;
    CHECK(good, "thread %d: match(%" PRId64 ", %" PRId64 ") rc %d", a->id, idx, root, rc);
    a->ok += good;
    if (i % 97 == 0) {
      /* a thread-specific error: the message must be this thread's */
      int64_t bad_root = T_NODES + 1000 * a->id + (i % 1000);
      rc = pypm_match(t_graph, t_pats, 0, bad_root, 0, out, 8, &n);
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
      int64_t out[8];
      size_t n;
      int ok = 1;
      for (int r = 0; r < T_NODES; r += 7) {
        int rc = pypm_match(t_graph, t_pats, 0, r, 0, out, 8, &n);
        ok &= rc == PYPM_OK && n == expected_len[0][r] &&
              memcmp(out, expected[0][r], n * sizeof *out) == 0;
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
  /* random DAG over MatMul/Trans/Add/leaves */
  graph_begin(&g, T_NODES);
  for (int i = 0; i < T_NODES; i++) {
    int64_t attrs[] = {0, (int64_t)rng_below(&s, 3) + 1};
    if (i < 2) {
      graph_node(&g, SYM_LEAF, 0, NULL, 1, attrs);
      continue;
    }
    int k = (int)rng_below(&s, 4);
    int64_t a = (int64_t)rng_below(&s, (uint64_t)i), b = (int64_t)rng_below(&s, (uint64_t)i);
    int64_t kids[2] = {a, b};
    if (k == 0) graph_node(&g, SYM_LEAF, 0, NULL, 1, attrs);
    else if (k == 1) graph_node(&g, SYM_TRANS, 1, kids, 1, attrs);
    else graph_node(&g, k == 2 ? SYM_MATMUL : SYM_ADD, 2, kids, 1, attrs);
  }
  patterns_begin(&ps, T_PATS);
  put_all(&p, PAT_MMT, PAT_MMT_LEN);
  patterns_add(&ps, &p);
  p.n = 0; /* Add(x, x) */
  int64_t addxx[] = {2, SYM_ADD, 2, 1, 0, 1, 0};
  put_all(&p, addxx, 7);
  patterns_add(&ps, &p);
  p.n = 0; /* MatMul(x, y) | Trans(x) ; x.rank < 3 */
  int64_t alt[] = {4, 3, 2, SYM_MATMUL, 2, 1, 0, 1, 1, 2, SYM_TRANS, 1, 1, 0,
                   3, 2, 0, 0, 1, 3};
  put_all(&p, alt, sizeof alt / sizeof alt[0]);
  patterns_add(&ps, &p);
  CHECK_RC(pypm_graph_load(g.w, g.n, &t_graph), PYPM_OK);
  CHECK_RC(pypm_patterns_load(ps.w, ps.n, &t_pats), PYPM_OK);
  long matches = 0;
  for (int i = 0; i < T_PATS; i++)
    for (int r = 0; r < T_NODES; r++) {
      CHECK_RC(pypm_match(t_graph, t_pats, i, r, 0, expected[i][r], 8, &expected_len[i][r]),
               PYPM_OK);
      matches += expected[i][r][0] == PYPM_STATUS_MATCH;
    }
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
  CHECK(pypm_format_version() == 1, "version");
  int64_t h;
  CHECK_RC(pypm_graph_load(NULL, 0, &h), PYPM_E_NULL); /* no runtime start yet */
  int64_t buf[3] = {MAGIC_GRAPH, 1, 0};
  CHECK_RC(pypm_graph_load(buf, 3, &h), PYPM_OK);      /* starts the runtime */
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

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 100000;
  setvbuf(stdout, NULL, _IOLBF, 0);
  printf("test_capi\n");
  test_signals_preserved();
  test_basics();
  test_errors();
  test_limits();
  test_fuzz(rounds);
  test_threads(20000);
  printf("test_capi: %d checks, %d failures\n", checks, fails);
  return fails ? 1 : 0;
}
