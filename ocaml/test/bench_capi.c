/* Benchmarks of libpypm_verified.so through the C API (format VERSION 2):
 *   - pypm_match round trip (tiny pattern MatMul(x, Trans(y)), one root);
 *   - pypm_graph_load and pypm_match_all (+ pypm_result_read) on a synthetic
 *     graph of chains of MatMul/Trans (default 100000 nodes);
 *   - the recursive UnaryChain(x; F) = F(UnaryChain(x; F)) || F(x): one
 *     match down a chain of n_nodes unary nodes, pypm_match_all over a graph
 *     of short chains, and the round trip at a 3-node chain.
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
  patterns_def(&ps, 2, 0, 2, PB_01, 0, NULL, &p);
  patterns_end_all(&ps, 1);

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

  /* recursion: UnaryChain(x; F) */
  int64_t uc[] = PAT_UNARY_CHAIN(0);
  ps.n = 0;
  patterns_begin(&ps, 1);
  patterns_def_words(&ps, 1, 1, 1, PB_0, 1, PB_0, uc, PAT_UNARY_CHAIN_LEN);
  patterns_end_all(&ps, 1);
  DIE_IF(pypm_patterns_load(ps.w, ps.n, &ph), "patterns_load");
  /* (a) one chain of n_nodes: leaf, then Neg(previous) */
  g.n = 0;
  graph_begin(&g, n_nodes);
  graph_node(&g, SYM_LEAF, 0, NULL, 0, NULL);
  for (int64_t i = 1; i < n_nodes; i++) {
    int64_t k = i - 1;
    graph_node(&g, SYM_NEG, 1, &k, 0, NULL);
  }
  graph_end(&g, 0, NULL);
  DIE_IF(pypm_graph_load(g.w, g.n, &gh), "graph_load");
  best = 1e9;
  for (int r = 0; r < 5; r++) {
    t0 = now_s();
    DIE_IF(pypm_match(gh, ph, 0, n_nodes - 1, 0, out, 8, &n), "match");
    double dt = now_s() - t0;
    if (dt < best) best = dt;
  }
  if (out[0] != PYPM_STATUS_MATCH || out[3] != 0 || out[6] != SYM_NEG) {
    fprintf(stderr, "UnaryChain: unexpected result\n");
    return 1;
  }
  printf("pypm_match UnaryChain down a chain of %" PRId64 " Negs: best %.2f ms (%.0f ns/level)\n",
         n_nodes, 1e3 * best, 1e9 * best / (double)n_nodes);
  /* round trip at node 3 (3 unfoldings) */
  for (long i = 0; i < calls / 10; i++) pypm_match(gh, ph, 0, 3, 0, out, 8, &n);
  t0 = now_s();
  for (long i = 0; i < calls; i++) pypm_match(gh, ph, 0, 3, 0, out, 8, &n);
  printf("pypm_match round trip, UnaryChain over 3 Negs: %.0f ns/call\n",
         1e9 * (now_s() - t0) / calls);
  pypm_release(gh);
  /* (b) match_all over n_nodes nodes in chains of 1..4 unary nodes
   * (Neg/ReLU alternating per chain) above a leaf */
  g.n = 0;
  graph_begin(&g, n_nodes);
  int64_t chain_len = 0, chain_start = 0;
  for (int64_t i = 0; i < n_nodes; i++) {
    if (chain_len == 0) {
      graph_node(&g, SYM_LEAF, 0, NULL, 0, NULL);
      chain_start = i;
      chain_len = 1 + i % 4;
    } else {
      int64_t k = i - 1;
      graph_node(&g, (chain_start / 5) % 2 ? SYM_NEG : SYM_RELU, 1, &k, 0, NULL);
      chain_len--;
    }
  }
  graph_end(&g, 0, NULL);
  DIE_IF(pypm_graph_load(g.w, g.n, &gh), "graph_load");
  best = 1e9;
  total = 0;
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
  printf("pypm_match_all + result_read, UnaryChain over short chains: %" PRId64
         " matches in %zu words; best %.2f ms, mean %.2f ms over %d runs = %.2f M roots/s\n",
         res[0], rlen, 1e3 * best, 1e3 * total / reps, reps, n_nodes / best / 1e6);
  pypm_release(gh);
  pypm_release(ph);
  free(res);
  wfree(&g);
  wfree(&ps);
  wfree(&p);
  return 0;
}
