/* Benchmarks of libpypm_verified.so through the C API:
 *   - pypm_match round trip (tiny pattern MatMul(x, Trans(y)), one root);
 *   - pypm_graph_load and pypm_match_all (+ pypm_result_read) on a synthetic
 *     graph of chains of MatMul/Trans (default 100000 nodes).
 * Usage: bench_capi.exe [n_nodes] [match_calls] */
#include <inttypes.h>

#include "capi_util.h"

#define DIE_IF(rc, what)                                                          \
  do {                                                                            \
    if (rc) {                                                                     \
      fprintf(stderr, "%s: %s: %s\n", what, pypm_error_name(rc), pypm_last_error()); \
      return 1;                                                                   \
    }                                                                             \
  } while (0)

int main(int argc, char **argv) {
  int64_t n_nodes = argc > 1 ? atoll(argv[1]) : 100000;
  long calls = argc > 2 ? atol(argv[2]) : 1000000;
  wbuf g = {0}, ps = {0}, p = {0};
  int64_t want = build_chain_graph(&g, n_nodes);
  patterns_begin(&ps, 1);
  put_all(&p, PAT_MMT, PAT_MMT_LEN);
  patterns_add(&ps, &p);

  int64_t gh = 0, ph = 0, rh = 0;
  size_t rlen = 0, n = 0;
  int64_t out[8];
  double t0 = now_s();
  DIE_IF(pypm_patterns_load(ps.w, ps.n, &ph), "patterns_load"); /* starts the runtime */
  printf("runtime start + first call: %.2f ms\n", 1e3 * (now_s() - t0));

  /* graph load */
  double best = 1e9;
  for (int r = 0; r < 5; r++) {
    int64_t h;
    t0 = now_s();
    DIE_IF(pypm_graph_load(g.w, g.n, &h), "graph_load");
    double dt = now_s() - t0;
    if (dt < best) best = dt;
    if (r < 4) pypm_release(h);
    else gh = h;
  }
  printf("graph: %" PRId64 " nodes, %zu words; pypm_graph_load best of 5: %.2f ms (%.1f Mwords/s)\n",
         n_nodes, g.n, 1e3 * best, g.n / best / 1e6);

  /* match_all */
  best = 1e9;
  double total = 0;
  int reps = 10;
  int64_t *res = NULL;
  for (int r = 0; r < reps; r++) {
    t0 = now_s();
    DIE_IF(pypm_match_all(gh, ph, 0, &rh, &rlen), "match_all");
    res = realloc(res, rlen * sizeof *res);
    DIE_IF(pypm_result_read(rh, res, rlen), "result_read");
    double dt = now_s() - t0;
    pypm_release(rh);
    total += dt;
    if (dt < best) best = dt;
  }
  if (res[0] != want) {
    fprintf(stderr, "match_all: %" PRId64 " matches, expected %" PRId64 "\n", res[0], want);
    return 1;
  }
  printf("pypm_match_all + result_read, MatMul(x, Trans(y)): %" PRId64 " matches in %zu words;"
         " best %.2f ms, mean %.2f ms over %d runs = %.2f M roots/s\n",
         res[0], rlen, 1e3 * best, 1e3 * total / reps, reps, n_nodes / best / 1e6);

  /* round trip of pypm_match: node 3 is the first MatMul(w, Trans(prev)),
   * node 4 a leaf */
  int64_t roots[2] = {3, 4};
  const char *what[2] = {"match (2 bindings)", "no match (leaf)"};
  for (int k = 0; k < 2; k++) {
    DIE_IF(pypm_match(gh, ph, 0, roots[k], 0, out, 8, &n), "match");
    for (long i = 0; i < calls / 10; i++) pypm_match(gh, ph, 0, roots[k], 0, out, 8, &n);
    t0 = now_s();
    for (long i = 0; i < calls; i++) pypm_match(gh, ph, 0, roots[k], 0, out, 8, &n);
    double dt = now_s() - t0;
    printf("pypm_match round trip, %s: %.0f ns/call (%ld calls)\n", what[k], 1e9 * dt / calls,
           calls);
  }
  /* the error path (C-side check only) for comparison */
  t0 = now_s();
  for (long i = 0; i < calls; i++) pypm_match(gh, ph, 0, roots[0], 0, out, 8, NULL);
  printf("pypm_match rejected in C (NULL out_len): %.0f ns/call\n", 1e9 * (now_s() - t0) / calls);
  pypm_release(gh);
  pypm_release(ph);
  free(res);
  wfree(&g);
  wfree(&ps);
  wfree(&p);
  return 0;
}
