/* pypm_verified: C API of the verified matcher (format: docs/internals/format.md,
 * VERSION 2: the full calculus, pattern sets as definition tables + roots).
 *
 * Every function returns an error code and never aborts the host process.
 * Calls are serialized by an internal mutex, so any thread may call any
 * function. Handles are positive int64 values; 0 is never a valid handle. */
#ifndef PYPM_VERIFIED_H
#define PYPM_VERIFIED_H
#include <stddef.h>
#include <stdint.h>

/* Error codes. PYPM_E_MALFORMED covers every structural check of
 * docs/internals/format.md (magic, version, counts against the words left, ids and
 * values in range, call targets and roots naming definitions, pbinds
 * entries naming parameters, the size limits). PYPM_E_ILL_FORMED: the set
 * is not well-formed (a guard reads a variable its pattern may not bind, an
 * exists or match constraint on a variable its pattern does not bind, or a
 * wrong pbinds/pfbinds claim). */
#define PYPM_OK                 0
#define PYPM_E_MALFORMED        1  /* buffer failed validation (length, magic, ids, limits) */
#define PYPM_E_BAD_HANDLE       2  /* unknown or released handle, or wrong kind */
#define PYPM_E_OUT_OF_RANGE     3  /* root node or pattern (root) index out of range */
#define PYPM_E_BUFFER_TOO_SMALL 4  /* *out_len is set to the number of words needed */
#define PYPM_E_ILL_FORMED       5  /* not well-formed (Syntax.wf_defs, see docs/internals/format.md) */
#define PYPM_E_TOO_DEEP         6  /* nesting deeper than MAX_DEPTH */
#define PYPM_E_NULL             7  /* a required pointer argument is NULL */
#define PYPM_E_INTERNAL         8  /* an OCaml exception escaped (bug) */
#define PYPM_E_INIT             9  /* the OCaml runtime could not start */
#define PYPM_E_MEMORY          10 /* a search exceeded the memory budget (PYPM_MEMORY_MB) */

#define PYPM_STATUS_MATCH       0
#define PYPM_STATUS_NO_MATCH    1
#define PYPM_STATUS_OUT_OF_FUEL 2

/* Version of the binary format this library reads (docs/internals/format.md). */
int64_t pypm_format_version(void);
/* Build id of this library: 64 hex digits, the SHA-256 of the sources it was
 * compiled from (the extracted matcher and the OCaml/C glue; see
 * capi/build_id.sh). A static string; needs no runtime start. */
const char *pypm_build_id(void);
/* Version of Coq (coqc --version) when the library was built, the one the
 * proofs were checked with ("unknown" if coqc was not found). */
const char *pypm_coq_version(void);

/* Decode and validate a graph / pattern-set buffer; store a handle. */
int pypm_graph_load(const int64_t *buf, size_t len, int64_t *handle);
int pypm_patterns_load(const int64_t *buf, size_t len, int64_t *handle);
/* Append nodes to a loaded graph in place (docs/internals/format.md, "Graph
 * extension"): the buffer's base must equal the graph's node count; new
 * nodes may refer to any node of the grown graph.  Nodes are only added, so
 * earlier results stay valid.  On error the graph is unchanged. */
int pypm_graph_extend(int64_t graph, const int64_t *buf, size_t len);
/* Number of nodes of a graph handle, of roots of a pattern-set handle (the
 * valid pattern indices), or of words of a result handle. */
int pypm_handle_size(int64_t handle, int64_t *size);
/* Release a graph, pattern-set or result handle. */
int pypm_release(int64_t handle);

/* Match root `pattern_index` of `patterns` (the definition it names) at node
 * `root` of `graph`, with at most `fuel` machine steps (fuel <= 0: the
 * default, 1<<26): Entry.set_match (docs/guarantees/correspondence.md). First the
 * root-operator index: a root that cannot have the node's operator gives
 * PYPM_STATUS_NO_MATCH without running (a proved no, so P(x) = P(x) and
 * P(x) = P(x) || Relu(x) at a MatMul answer NO_MATCH). Otherwise fuel bounds
 * time and memory: a search that never ends (P(x) = P(x) || x) gives
 * PYPM_STATUS_OUT_OF_FUEL, never NO_MATCH.
 * Writes status, n, (var, node)*n, m, (fvar, symbol)*m into
 * out[0 .. *out_len): the bindings of the definition's term and operator
 * parameters, sorted by variable (locals are not reported; no bindings
 * unless the status is MATCH). */
int pypm_match(int64_t graph, int64_t patterns, int64_t pattern_index,
               int64_t root, int64_t fuel,
               int64_t *out, size_t out_cap, size_t *out_len);

/* Try every root at every node (Entry.set_match_all); store the entries
 * (docs/internals/format.md) as a result handle whose length in words is written to
 * *result_len. */
int pypm_match_all(int64_t graph, int64_t patterns, int64_t fuel,
                   int64_t *result, size_t *result_len);
/* Multi-root patterns (Multi.v, docs/internals/format.md "Multi-root patterns"):
 * `spec` names k roots of `patterns` (sharing the term variables
 * 0..n_params-1 and operator variables 0..n_fparams-1) and a cross-root
 * guard. root >= 0: the first root at node `root`, the others at distinct
 * nodes of the graph (Multi.match_multi): one entry. root < 0: every node
 * in increasing order, each set of nodes once (Multi.match_all_multi):
 * the entries with status MATCH or OUT_OF_FUEL. Stores a result handle
 * (words: n_entries, then per entry: root, status, k, node*k, n,
 * (var, node)*n, m, (fvar, symbol)*m) and its length in words. An
 * ill-formed spec (a root not well formed, a guard reading a variable no
 * root binds) gives PYPM_E_ILL_FORMED. */
int pypm_match_multi(int64_t graph, int64_t patterns, const int64_t *spec, size_t spec_len,
                     int64_t root, int64_t fuel, int64_t *result, size_t *result_len);
/* Relay's dominates(parent, path, child) (Dominates.dom_result, docs/internals/format.md
 * "Dominator patterns"). spec: parent, path and child pattern indices of
 * `patterns`, the graph's node count n, then n flag words (bit 0: constant
 * leaf, skipped by the walk; bit 1: output; bit 2: live, its uses count).
 * root >= 0: one entry for that node; root < 0: every node in increasing
 * order, the entries with status MATCH or OUT_OF_FUEL. Stores a result
 * handle (words: n_entries, then per entry: root, status, parent node or -1,
 * k, region node*k increasing: the root, the path nodes and the parent) and
 * its length in words. A pattern out of fuel at a node the check needs gives
 * PYPM_STATUS_OUT_OF_FUEL. */
int pypm_dominates(int64_t graph, int64_t patterns, const int64_t *spec, size_t spec_len,
                   int64_t root, int64_t fuel, int64_t *result, size_t *result_len);
/* Copy a result handle's words into out (out_cap >= its length). */
int pypm_result_read(int64_t result, int64_t *out, size_t out_cap);

/* The roots of `patterns` (pattern indices, increasing) whose root-operator
 * index admits operator `symbol` (Entry.set_candidates) with the attributes
 * `attrs` of it: n_attrs pairs (attribute id, value), 2 * n_attrs words,
 * the symbol attributes of a graph where it occurs (its class: a root
 * `F(..) ; guard(F.op_class = c)` admits the operators of class c). Every
 * other root gives PYPM_STATUS_NO_MATCH at every node labelled `symbol` in
 * a graph giving it those attributes, whatever the fuel. Writes n,
 * index*n into out[0 .. *out_len); size protocol as pypm_match (needs
 * 1 + n words). symbol or an attribute id outside [0, 2^62), a value
 * outside [-(2^62 - 1), 2^62 - 1]: PYPM_E_OUT_OF_RANGE; an attribute given
 * twice: PYPM_E_MALFORMED. */
int pypm_candidates(int64_t patterns, int64_t symbol, const int64_t *attrs, size_t n_attrs,
                    int64_t *out, size_t out_cap, size_t *out_len);

/* pypm_candidates refined by the operators of a node's arguments
 * (Entry.set_candidates_at, KidIndex.kid_index): the roots whose root index
 * admits `symbol` with `attrs` and whose children's index admits the
 * arguments `kids`: kids_len words, per argument (in order) its symbol,
 * its number of attributes n and n (attribute id, value) pairs. Every
 * other root has no match at a node labelled `symbol` whose arguments have
 * those operators, in a graph giving them those attributes
 * (candidates_at_sound). Result, size protocol and errors as
 * pypm_candidates; kids that end inside a child: PYPM_E_MALFORMED. */
int pypm_candidates_at(int64_t patterns, int64_t symbol, const int64_t *attrs, size_t n_attrs,
                       const int64_t *kids, size_t kids_len, int64_t *out, size_t out_cap,
                       size_t *out_len);

/* Rewrite validation (Rewrite.validate, docs/internals/format.md "Rewrite
 * validation"): buf holds a driver pass as int64 words: the before graph,
 * the after graph (each: n, n nodes as label, arity k, k argument indices;
 * n_out, output indices), n_firings (root, replacement) pairs and the map
 * (n_after words: the before node each after node corresponds to, -1 for a
 * new node). Returns PYPM_OK when it decided: *verdict = 0 when the after
 * graph is the before graph with every firing applied (uses of each root
 * redirected to its replacement, dead nodes removed, up to the map), else
 * a PYPM_REJECT_* reason and *where the index it concerns (-1: none, or the
 * output counts differ). PYPM_E_MALFORMED when the buffer does not parse
 * (a count above the words left, a negative count or arity, a word out of
 * [0, 2^62) other than the map's -1, trailing words); PYPM_E_NULL for a
 * NULL pointer. */
#define PYPM_REJECT_BEFORE_ILL_FORMED 1 /* where: before node, or n_before + output position */
#define PYPM_REJECT_AFTER_ILL_FORMED  2 /* where: after node, or n_after + output position */
#define PYPM_REJECT_FIRING            3 /* where: firing index */
#define PYPM_REJECT_MAP               4 /* where: after node */
#define PYPM_REJECT_NODE              5 /* where: after node (label or arity differs) */
#define PYPM_REJECT_ARG               6 /* where: after node (an argument is not the image) */
#define PYPM_REJECT_OUTPUT            7 /* where: output position, or -1 (counts differ) */
#define PYPM_REJECT_DEAD              8 /* where: after node no output reaches */
int pypm_validate_rewrite(const int64_t *buf, size_t len, int64_t *verdict, int64_t *where);

/* Firing certificates (Certify.validate_firings, docs/internals/format.md
 * "Firing certificates"): buf holds a rewrite-validation buffer (above)
 * followed by n_labels and, per label, the operator of `graph` it stands
 * for (-1: none); per before node, its image in `graph` (-1: none); per
 * firing, a certificate: 1 (a merge of equal nodes), or 0, the pattern
 * index (a root of `patterns`), n_subst (variable, before node) pairs and
 * the replacement template (n_tnodes; per node: label, arity k, k arguments;
 * then the root argument; an argument is (0, variable) or (1, an earlier
 * template node)). The verdicts of pypm_validate_rewrite, then: the before
 * graph does not agree with `graph` on the nodes with an image (AGREE), the
 * matcher does not match the pattern at the root's image (MATCH), its
 * bindings are not the images of the substitution (SUBST), the replacement
 * is not the template instantiated (TEMPLATE). fuel as pypm_match. */
#define PYPM_REJECT_AGREE             9  /* where: before node, or -1 (image count) */
#define PYPM_REJECT_CERTS             10 /* where: -1 (not one certificate per firing) */
#define PYPM_REJECT_MATCH             11 /* where: firing index */
#define PYPM_REJECT_SUBST             12 /* where: firing index */
#define PYPM_REJECT_TEMPLATE          13 /* where: firing index */
int pypm_validate_firings(int64_t graph, int64_t patterns, int64_t fuel, const int64_t *buf,
                          size_t len, int64_t *verdict, int64_t *where);

/* Static description of an error code. */
const char *pypm_error_name(int code);
/* Message about the calling thread's last failed call ("" if none). */
const char *pypm_last_error(void);

#endif
