/* _fxreader: a native reader of torch FX graphs for pypm_verified.
 *
 * build(tg, nodes, ctx) walks an FX graph's node list once and appends every
 * node to the term graph of ``tg`` (a pypm_verified.torch.importer.TermGraph)
 * the way TermGraph.import_node does, reading the same tables (per overload,
 * per static tensor type, per constant, per call shape of a schema) and
 * writing the same columns (nodes, labels, child ids, attributes, the
 * hash-consing index) and the same maps (term, fx_of, recipes, calls).
 * Whatever is not the common case -- a table miss, a call that does not fit
 * its schema, an opaque call, the output node -- is handed to the Python
 * method (import_node, call_args, _type, arg, input_typed), which also fills
 * the tables on first sight; so the result is the Python path's, state for
 * state (tests/test_fxreader.py compares them).  Returns the FX nodes merged
 * into an earlier equal one (the caller erases them, as TermGraph.build).
 *
 * encode_columns(header, labels, children, attrs, tail) writes the engine's
 * int64 graph encoding (docs/internals/format.md) of the columns: the header
 * words, then per node label, child count, child ids, attribute count and
 * (attribute, value) pairs, then the tail words; returns the bytes
 * (native byte order).  Values outside int64 raise OverflowError, anything
 * but an int raises TypeError, as array("q", ...) does.
 *
 * encode_fx(...) is the rewrite validator's walk of an FX graph
 * (FxChecker.encode in pypm_verified/torch/validate_fx.py): the columns of
 * its encoding, with the common case of FxChecker._node read natively.
 *
 * import_again(state, node) is TermGraph.import_node's re-import of a call
 * from its recipe (TermGraph.reimport, after a rewrite changed an argument).
 *
 * walk(state, nodes, i, ...) is the rewrite driver's walk of a pass
 * (Driver._walk) up to the next node it tries, stale nodes re-imported on
 * the way as import_again does.
 *
 * engine_graph(...) writes the engine's graph encoding of an FX graph's term
 * graph directly, hash-consing in C (no Python term graph): pm.match_fx.
 *
 * first_match(...) calls the engine library's pypm_match through its address
 * for a node and a run of pattern indices until one answers (the rewrite
 * driver's matching at a node: binding.SetMatcher.first).
 *
 * Every object is checked before it is read: a malformed argument raises an
 * exception (TypeError, ValueError), never crashes the interpreter.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

/* interned attribute names and constant strings */
static PyObject *s_op, *s_target, *s_meta, *s_args, *s_kwargs, *s_name, *s_val, *s_id,
    *s_arity, *s_shape, *s_dtype, *s_call_function, *s_placeholder, *s_get_attr,
    *s_distinct, *s_kind_op, *s_input, *s_import_node, *s_call_args, *s_type, *s_arg,
    *s_replace_all_uses_with, *s_input_typed, *s_graph, *s_nodes, *s_labels, *s_children,
    *s_attrs, *s_index, *s_inputs, *s_term, *s_fx_of, *s_recipe, *s_calls, *s_targets,
    *s_types, *s_consts, *s_target_m, *s_c, *s_neg_zero, *s_users, *s_label, *empty_tuple;

/* importer._scalar_key: (type, value), the value of -0.0 written "-0.0"
 * (it equals 0.0 and hashes alike, but is another constant); new reference */
static PyObject *scalar_key(PyObject *tp, PyObject *a) {
    if (tp == (PyObject *)&PyFloat_Type) {
        double v = PyFloat_AS_DOUBLE(a);
        if (v == 0.0 && signbit(v)) return PyTuple_Pack(2, tp, s_neg_zero);
    }
    return PyTuple_Pack(2, tp, a);
}

typedef struct {
    PyObject *fake_tensor_type; /* torch._subclasses.fake_tensor.FakeTensor */
    PyObject *fx_node_type;     /* torch.fx.Node */
    PyObject *scalar_types;     /* frozenset of the constant scalar types */
    PyObject *getitem;          /* operator.getitem */
    PyObject *node_cls;         /* pypm_verified.core.graph.Node */
    PyObject *sym_ids;          /* symbols._ids: key -> symbol id */
    PyObject *schema_specs;     /* importer._schema_specs */
} Ctx;

typedef struct {
    PyObject *tg, *g;
    PyObject *term, *fx_of, *recipe, *calls, *targets, *types, *consts; /* dicts */
    PyObject *nodes, *labels, *children, *attrs;                         /* lists */
    PyObject *index, *inputs;                                            /* dicts */
} St;

static void st_clear(St *st) {
    Py_CLEAR(st->g);
    Py_CLEAR(st->term); Py_CLEAR(st->fx_of); Py_CLEAR(st->recipe); Py_CLEAR(st->calls);
    Py_CLEAR(st->targets); Py_CLEAR(st->types); Py_CLEAR(st->consts);
    Py_CLEAR(st->nodes); Py_CLEAR(st->labels); Py_CLEAR(st->children); Py_CLEAR(st->attrs);
    Py_CLEAR(st->index); Py_CLEAR(st->inputs);
}

static PyObject *get_exact(PyObject *obj, PyObject *name, PyTypeObject *tp) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) return NULL;
    if (!PyObject_TypeCheck(v, tp)) {
        PyErr_Format(PyExc_TypeError, "_fxreader: attribute %R is a %s, not a %s", name,
                     Py_TYPE(v)->tp_name, tp->tp_name);
        Py_DECREF(v);
        return NULL;
    }
    return v;
}

static int st_load(St *st, PyObject *tg) {
    memset(st, 0, sizeof(*st));
    st->tg = tg;
#define D(field, name) if (!(st->field = get_exact(tg, name, &PyDict_Type))) goto fail
#define GD(field, name) if (!(st->field = get_exact(st->g, name, &PyDict_Type))) goto fail
#define GL(field, name) if (!(st->field = get_exact(st->g, name, &PyList_Type))) goto fail
    D(term, s_term); D(fx_of, s_fx_of); D(recipe, s_recipe); D(calls, s_calls);
    D(targets, s_targets); D(types, s_types); D(consts, s_consts);
    if (!(st->g = PyObject_GetAttr(tg, s_graph))) goto fail;
    GL(nodes, s_nodes); GL(labels, s_labels); GL(children, s_children); GL(attrs, s_attrs);
    GD(index, s_index); GD(inputs, s_inputs);
#undef D
#undef GD
#undef GL
    return 0;
fail:
    st_clear(st);
    return -1;
}

static int ctx_load(Ctx *c, PyObject *ctx) {
    if (!PyTuple_Check(ctx) || PyTuple_GET_SIZE(ctx) != 7) {
        PyErr_SetString(PyExc_TypeError, "_fxreader: ctx must be a tuple of 7 objects");
        return -1;
    }
    c->fake_tensor_type = PyTuple_GET_ITEM(ctx, 0);
    c->fx_node_type = PyTuple_GET_ITEM(ctx, 1);
    c->scalar_types = PyTuple_GET_ITEM(ctx, 2);
    c->getitem = PyTuple_GET_ITEM(ctx, 3);
    c->node_cls = PyTuple_GET_ITEM(ctx, 4);
    c->sym_ids = PyTuple_GET_ITEM(ctx, 5);
    c->schema_specs = PyTuple_GET_ITEM(ctx, 6);
    if (!PyType_Check(c->fake_tensor_type) || !PyType_Check(c->fx_node_type)
        || !PyAnySet_Check(c->scalar_types) || !PyType_Check(c->node_cls)
        || !PyDict_Check(c->sym_ids) || !PyDict_Check(c->schema_specs)) {
        PyErr_SetString(PyExc_TypeError, "_fxreader: malformed ctx");
        return -1;
    }
    return 0;
}

/* FX node attributes (op, target, meta, _args, _kwargs, name) are members of
 * torch's C base class (_NodeBase): read at their offsets, as the member
 * descriptors read them, for an exact torch.fx.Node whose type resolves the
 * names to those descriptors; anything else (or an unset slot) through
 * PyObject_GetAttr. */
enum { FX_OP, FX_TARGET, FX_META, FX_ARGS, FX_KWARGS, FX_NAME, FX_N };
static PyObject **FX_NAMES[FX_N] = {&s_op, &s_target, &s_meta, &s_args, &s_kwargs, &s_name};
static PyObject *fx_type_seen = NULL; /* strong */
static Py_ssize_t fx_off[FX_N];
static int fx_direct = 0;

static void fx_layout(PyObject *tp_obj) {
    if (tp_obj == fx_type_seen) return;
    Py_XSETREF(fx_type_seen, Py_NewRef(tp_obj));
    fx_direct = 0;
    PyTypeObject *tp = (PyTypeObject *)tp_obj;
    for (int i = 0; i < FX_N; i++) {
        PyObject *d = _PyType_Lookup(tp, *FX_NAMES[i]); /* borrowed, no error set */
        if (d == NULL || Py_TYPE(d) != &PyMemberDescr_Type) return;
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if ((m->type != T_OBJECT && m->type != T_OBJECT_EX) || m->offset <= 0
            || (size_t)m->offset + sizeof(PyObject *) > (size_t)tp->tp_basicsize)
            return;
        fx_off[i] = m->offset;
    }
    fx_direct = 1;
}

static PyObject *fx_attr(PyObject *node, int i) {
    if (fx_direct && (PyObject *)Py_TYPE(node) == fx_type_seen) {
        PyObject *v = *(PyObject **)((char *)node + fx_off[i]);
        if (v != NULL) return Py_NewRef(v);
    }
    return PyObject_GetAttr(node, *FX_NAMES[i]);
}

static int str_eq(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    if (!PyUnicode_CheckExact(a)) return 0;
    return PyUnicode_Compare(a, b) == 0; /* both str: no error */
}

/* fx_of.setdefault(t.id, node); 0 or -1 */
static int note_term(St *st, PyObject *node, PyObject *t) {
    if (PyDict_SetItem(st->term, node, t) < 0) return -1;
    PyObject *tid = PyObject_GetAttr(t, s_id);
    if (tid == NULL) return -1;
    PyObject *r = PyDict_SetDefault(st->fx_of, tid, node);
    Py_DECREF(tid);
    return r == NULL ? -1 : 0;
}

/* TermGraph._type(val): the table of static tensor types, else the method */
static PyObject *type_of(St *st, Ctx *c, PyObject *val) {
    if ((PyObject *)Py_TYPE(val) == c->fake_tensor_type) {
        PyObject *shape = PyObject_GetAttr(val, s_shape);
        if (shape == NULL) return NULL;
        PyObject *dtype = PyObject_GetAttr(val, s_dtype);
        if (dtype == NULL) { Py_DECREF(shape); return NULL; }
        PyObject *key = PyTuple_Pack(2, shape, dtype);
        Py_DECREF(shape);
        Py_DECREF(dtype);
        if (key == NULL) return NULL;
        PyObject *hit = PyDict_GetItemWithError(st->types, key);
        Py_DECREF(key);
        if (hit != NULL && hit != Py_None) {
            if (PyTuple_Check(hit) && PyTuple_GET_SIZE(hit) == 3)
                return Py_NewRef(hit);
        } else if (hit == NULL && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_TypeError)) return NULL;
            PyErr_Clear(); /* a symbolic size is unhashable: the method decides */
        }
    }
    PyObject *typ = PyObject_CallMethodOneArg(st->tg, s_type, val);
    if (typ != NULL && !(PyTuple_Check(typ) && PyTuple_GET_SIZE(typ) == 3)) {
        PyErr_SetString(PyExc_TypeError, "_fxreader: TermGraph._type gave no triple");
        Py_CLEAR(typ);
    }
    return typ;
}

/* node.meta.get("val") (new reference; None when absent) */
static PyObject *meta_val(PyObject *node) {
    PyObject *meta = fx_attr(node, FX_META);
    if (meta == NULL) return NULL;
    PyObject *val;
    if (PyDict_Check(meta)) {
        val = PyDict_GetItemWithError(meta, s_val);
        if (val == NULL && PyErr_Occurred()) { Py_DECREF(meta); return NULL; }
        val = Py_NewRef(val != NULL ? val : Py_None);
    } else {
        val = PyObject_CallMethod(meta, "get", "O", s_val);
    }
    Py_DECREF(meta);
    return val;
}

/* TermGraph.call_args(node): a new reference (a list, or None); cached in
 * st->calls unless that is NULL */
static PyObject *call_args(St *st, Ctx *c, PyObject *node, PyObject *target,
                           PyObject *tid) {
    PyObject *args = fx_attr(node, FX_ARGS);
    if (args == NULL) return NULL;
    PyObject *kwargs = fx_attr(node, FX_KWARGS);
    if (kwargs == NULL) { Py_DECREF(args); return NULL; }
    PyObject *pos = NULL;
    PyObject *hit = st->calls == NULL ? NULL : PyDict_GetItemWithError(st->calls, node);
    if (hit == NULL && PyErr_Occurred()) goto done;
    if (hit != NULL && PyTuple_Check(hit) && PyTuple_GET_SIZE(hit) == 4
        && PyTuple_GET_ITEM(hit, 0) == args && PyTuple_GET_ITEM(hit, 1) == kwargs
        && PyTuple_GET_ITEM(hit, 2) == target) {
        pos = Py_NewRef(PyTuple_GET_ITEM(hit, 3));
        goto done;
    }
    if (PyTuple_CheckExact(args) && PyDict_Check(kwargs)) {
        Py_ssize_t na = PyTuple_GET_SIZE(args);
        if (target == c->getitem) {
            pos = PySequence_List(args);
            if (pos == NULL) goto done;
        } else {
            Py_ssize_t nkw = PyDict_GET_SIZE(kwargs);
            PyObject *spec = PyDict_GetItemWithError(c->schema_specs, tid);
            if (spec == NULL && PyErr_Occurred()) goto done;
            if (spec != NULL && PyTuple_Check(spec) && PyTuple_GET_SIZE(spec) == 5
                && PyTuple_GET_ITEM(spec, 3) == target
                && PyTuple_Check(PyTuple_GET_ITEM(spec, 1))
                && PyLong_Check(PyTuple_GET_ITEM(spec, 2))
                && PyDict_Check(PyTuple_GET_ITEM(spec, 4))) {
                Py_ssize_t n_pos = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 2));
                if (n_pos == -1 && PyErr_Occurred()) goto done;
                Py_ssize_t n_spec = PyTuple_GET_SIZE(PyTuple_GET_ITEM(spec, 1));
                if (na <= n_pos && nkw > 0) {
                    /* the rest by name, else its default; every kwarg used */
                    PyObject *specargs = PyTuple_GET_ITEM(spec, 1);
                    Py_ssize_t used = 0;
                    int fits = 1;
                    pos = PySequence_List(args);
                    if (pos == NULL) goto done;
                    for (Py_ssize_t i = na; fits && i < n_spec; i++) {
                        PyObject *a = PyTuple_GET_ITEM(specargs, i), *v;
                        if (!PyTuple_Check(a) || PyTuple_GET_SIZE(a) != 4) { fits = 0; break; }
                        v = PyDict_GetItemWithError(kwargs, PyTuple_GET_ITEM(a, 1));
                        if (v != NULL) {
                            used++;
                        } else if (PyErr_Occurred()) {
                            Py_CLEAR(pos);
                            goto done;
                        } else {
                            int has = PyObject_IsTrue(PyTuple_GET_ITEM(a, 2));
                            if (has < 0) { Py_CLEAR(pos); goto done; }
                            if (!has) { fits = 0; break; }
                            v = PyTuple_GET_ITEM(a, 3);
                        }
                        if (PyList_Append(pos, v) < 0) { Py_CLEAR(pos); goto done; }
                    }
                    if (!fits || used != nkw) Py_CLEAR(pos); /* the method says why not */
                } else if (na <= n_pos) {
                    if (na == n_spec) {
                        pos = PySequence_List(args);
                        if (pos == NULL) goto done;
                    } else {
                        PyObject *k = PyLong_FromSsize_t(na);
                        if (k == NULL) goto done;
                        PyObject *tail = PyDict_GetItemWithError(PyTuple_GET_ITEM(spec, 4), k);
                        Py_DECREF(k);
                        if (tail == NULL && PyErr_Occurred()) goto done;
                        if (tail != NULL && PyTuple_Check(tail)) {
                            pos = PySequence_List(args);
                            if (pos == NULL) goto done;
                            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tail); i++) {
                                if (PyList_Append(pos, PyTuple_GET_ITEM(tail, i)) < 0) {
                                    Py_CLEAR(pos);
                                    goto done;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    if (pos != NULL && st->calls == NULL) goto done; /* no cache (engine_graph) */
    if (pos != NULL) { /* computed here: cached as call_args caches it */
        PyObject *entry = PyTuple_Pack(4, args, kwargs, target, pos);
        if (entry == NULL || PyDict_SetItem(st->calls, node, entry) < 0) Py_CLEAR(pos);
        Py_XDECREF(entry);
        goto done;
    }
    pos = PyObject_CallMethodOneArg(st->tg, s_call_args, node);
done:
    Py_DECREF(args);
    Py_DECREF(kwargs);
    return pos;
}

/* the term of one argument (new reference) */
static PyObject *kid_of(St *st, Ctx *c, PyObject *a) {
    PyObject *tp = (PyObject *)Py_TYPE(a);
    if (tp == c->fx_node_type) {
        PyObject *k = PyDict_GetItemWithError(st->term, a);
        if (k != NULL) return Py_NewRef(k);
        if (PyErr_Occurred()) return NULL;
    } else if (PyList_Check(a) || PyTuple_Check(a)) {
        /* a flat list of scalars (sizes, dims): arg()'s key, (list or tuple,
         * ((type, value), ...)), read from the table of constants directly */
        PyObject *seq = PySequence_Fast(a, "not a sequence");
        if (seq == NULL) return NULL;
        Py_ssize_t m = PySequence_Fast_GET_SIZE(seq);
        PyObject *pairs = PyTuple_New(m);
        int flat = pairs != NULL;
        for (Py_ssize_t i = 0; flat && i < m; i++) {
            PyObject *e = PySequence_Fast_GET_ITEM(seq, i);
            PyObject *et = (PyObject *)Py_TYPE(e);
            int sc = PySet_Contains(c->scalar_types, et);
            if (sc <= 0) { flat = sc; break; }
            PyObject *pair = scalar_key(et, e);
            if (pair == NULL) { flat = -1; break; }
            PyTuple_SET_ITEM(pairs, i, pair);
        }
        Py_DECREF(seq);
        if (pairs == NULL || flat < 0) { Py_XDECREF(pairs); return NULL; }
        if (flat) {
            PyObject *kind = PyTuple_Check(a) ? (PyObject *)&PyTuple_Type : (PyObject *)&PyList_Type;
            PyObject *key = PyTuple_Pack(2, kind, pairs);
            Py_DECREF(pairs);
            if (key == NULL) return NULL;
            PyObject *k = PyDict_GetItemWithError(st->consts, key);
            Py_DECREF(key);
            if (k != NULL) return Py_NewRef(k);
            if (PyErr_Occurred()) {
                if (!PyErr_ExceptionMatches(PyExc_TypeError)) return NULL;
                PyErr_Clear();
            }
        } else {
            Py_DECREF(pairs);
        }
    } else {
        int scalar = PySet_Contains(c->scalar_types, tp);
        if (scalar < 0) return NULL;
        if (scalar) {
            PyObject *key = scalar_key(tp, a);
            if (key == NULL) return NULL;
            PyObject *k = PyDict_GetItemWithError(st->consts, key);
            Py_DECREF(key);
            if (k != NULL) return Py_NewRef(k);
            if (PyErr_Occurred()) {
                if (!PyErr_ExceptionMatches(PyExc_TypeError)) return NULL;
                PyErr_Clear(); /* unhashable: the method decides */
            }
        }
    }
    return PyObject_CallMethodOneArg(st->tg, s_arg, a);
}

/* Node objects are made as Node(graph, id, label, kind, op, args, shape,
 * dtype, name, value) makes them -- its __init__ only stores the ten
 * arguments in the ten slots of the same names -- by writing the slots
 * directly, when the class has exactly those slots (and __weakref__);
 * otherwise by calling the class. */
static const char *NODE_SLOTS[10] = {"graph", "id", "label", "kind", "op", "args",
                                     "shape", "dtype", "name", "value"};
static PyObject *node_cls_seen = NULL; /* the class node_off describes (strong) */
static Py_ssize_t node_off[10];
static int node_direct = 0;

static int node_layout(PyObject *cls) {
    if (cls == node_cls_seen) return 0;
    Py_XSETREF(node_cls_seen, Py_NewRef(cls));
    node_direct = 0;
    PyTypeObject *tp = (PyTypeObject *)cls;
    PyObject *slots = PyObject_GetAttrString(cls, "__slots__");
    if (slots == NULL) { PyErr_Clear(); return 0; }
    int ok = PyTuple_Check(slots) && PyTuple_GET_SIZE(slots) == 11
             && tp->tp_alloc == PyType_GenericAlloc && tp->tp_itemsize == 0;
    for (int i = 0; ok && i < 10; i++) {
        PyObject *want = PyUnicode_FromString(NODE_SLOTS[i]);
        if (want == NULL) { Py_DECREF(slots); return -1; }
        int found = PySequence_Contains(slots, want);
        PyObject *descr = found == 1 ? PyDict_GetItemWithError(tp->tp_dict, want) : NULL;
        Py_DECREF(want);
        if (found < 0 || PyErr_Occurred()) { Py_DECREF(slots); return -1; }
        if (descr == NULL || Py_TYPE(descr) != &PyMemberDescr_Type) { ok = 0; break; }
        PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
        if (m->type != T_OBJECT_EX || (m->flags & READONLY) || m->offset <= 0
            || (size_t)m->offset + sizeof(PyObject *) > (size_t)tp->tp_basicsize) {
            ok = 0;
            break;
        }
        node_off[i] = m->offset;
    }
    Py_DECREF(slots);
    node_direct = ok;
    return 0;
}

static PyObject *make_node(PyObject *cls, PyObject *const *argv) {
    if (node_direct && cls == node_cls_seen) {
        PyTypeObject *tp = (PyTypeObject *)cls;
        PyObject *o = tp->tp_alloc(tp, 0);
        if (o == NULL) return NULL;
        for (int i = 0; i < 10; i++) *(PyObject **)((char *)o + node_off[i]) = Py_NewRef(argv[i]);
        return o;
    }
    return PyObject_Vectorcall(cls, argv, 10, NULL);
}

/* Graph._new: append a node that ``key`` does not index yet (new reference) */
static PyObject *new_node(St *st, Ctx *c, PyObject *key, PyObject *label, PyObject *kind,
                          PyObject *op, PyObject *kids, PyObject *shape, PyObject *dtype,
                          PyObject *attrs, PyObject *name, PyObject *ids) {
    PyObject *nid = PyLong_FromSsize_t(PyList_GET_SIZE(st->nodes));
    if (nid == NULL) return NULL;
    PyObject *argv[] = {st->g, nid, label, kind, op, kids, shape, dtype, name, Py_None};
    PyObject *node = make_node(c->node_cls, argv);
    Py_DECREF(nid);
    if (node == NULL) return NULL;
    if (PyList_Append(st->nodes, node) < 0 || PyList_Append(st->labels, label) < 0
        || PyList_Append(st->children, ids) < 0 || PyList_Append(st->attrs, attrs) < 0
        || PyDict_SetItem(st->index, key, node) < 0) {
        Py_DECREF(node);
        return NULL;
    }
    return node;
}

/* Graph.apply_ids: the term of a call of ``op`` (its ``label``, tensor type
 * ``typ``, never shared when ``distinct``) on the positional arguments
 * ``pos``, looked up in the hash-consing index or appended.  1: *out set (a
 * new reference), 0: the arity differs (the Python method raises), -1: error. */
static int call_term(St *st, Ctx *c, PyObject *pos, PyObject *op, PyObject *label,
                     PyObject *typ, int distinct, PyObject **out) {
    int ret = -1;
    PyObject *arity = NULL, *kids = NULL, *ids = NULL, *key = NULL, *t = NULL;
    Py_ssize_t n = PyList_GET_SIZE(pos);
    if (!(arity = PyObject_GetAttr(op, s_arity))) goto done;
    if (!PyLong_Check(arity) || PyLong_AsSsize_t(arity) != n) {
        PyErr_Clear();
        ret = 0;
        goto done;
    }
    if (!(kids = PyTuple_New(n)) || !(ids = PyTuple_New(n))) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i >= PyList_GET_SIZE(pos)) {
            PyErr_SetString(PyExc_RuntimeError, "_fxreader: argument list changed");
            goto done;
        }
        PyObject *a = Py_NewRef(PyList_GET_ITEM(pos, i)); /* held across the methods */
        PyObject *k = kid_of(st, c, a);
        Py_DECREF(a);
        if (k == NULL) goto done;
        PyTuple_SET_ITEM(kids, i, k);
        PyObject *kid = PyObject_GetAttr(k, s_id);
        if (kid == NULL) goto done;
        PyTuple_SET_ITEM(ids, i, kid);
    }
    if (distinct) {
        PyObject *len = PyLong_FromSsize_t(PyList_GET_SIZE(st->nodes));
        if (len == NULL) goto done;
        key = PyTuple_Pack(2, s_distinct, len);
        Py_DECREF(len);
    } else {
        key = PyTuple_Pack(3, label, ids, PyTuple_GET_ITEM(typ, 2));
    }
    if (key == NULL) goto done;
    t = PyDict_GetItemWithError(st->index, key);
    if (t != NULL) {
        Py_INCREF(t);
    } else {
        if (PyErr_Occurred()) goto done;
        t = new_node(st, c, key, label, s_kind_op, op, kids, PyTuple_GET_ITEM(typ, 0),
                     PyTuple_GET_ITEM(typ, 1), PyTuple_GET_ITEM(typ, 2), Py_None, ids);
        if (t == NULL) goto done;
    }
    *out = t;
    t = NULL;
    ret = 1;
done:
    Py_XDECREF(arity); Py_XDECREF(kids); Py_XDECREF(ids); Py_XDECREF(key); Py_XDECREF(t);
    return ret;
}

/* 1: done (*out set), 0: not the common case (nothing changed but caches), -1: error */
static int fast_call(St *st, Ctx *c, PyObject *node, PyObject **out) {
    int ret = -1, r;
    PyObject *target = NULL, *tid = NULL, *hit = NULL, *pos = NULL, *val = NULL, *typ = NULL,
             *t = NULL, *rec = NULL;
    r = PyDict_Contains(st->recipe, node); /* imported before: the method's re-import */
    if (r != 0) { ret = r < 0 ? -1 : 0; goto done; }
    if (!(target = fx_attr(node, FX_TARGET))) goto done;
    if (!(tid = PyLong_FromVoidPtr(target))) goto done;
    hit = PyDict_GetItemWithError(st->targets, tid);
    if (hit == NULL && PyErr_Occurred()) goto done;
    if (hit != NULL && PyTuple_Check(hit) && PyTuple_GET_SIZE(hit) == 4
        && PyTuple_GET_ITEM(hit, 0) == target) {
        Py_INCREF(hit); /* held: the methods called below may change the table */
    } else { /* first sight of the target: the per-overload entry, as import_node makes it */
        if (!(hit = PyObject_CallMethodOneArg(st->tg, s_target_m, node))) goto done;
        if (!PyTuple_Check(hit) || PyTuple_GET_SIZE(hit) != 4 || PyTuple_GET_ITEM(hit, 0) != target) {
            ret = 0;
            goto done;
        }
    }
    if (PyTuple_GET_ITEM(hit, 1) == Py_None) { ret = 0; goto done; } /* not an operator */
    PyObject *op = PyTuple_GET_ITEM(hit, 1), *label = PyTuple_GET_ITEM(hit, 2),
             *pure = PyTuple_GET_ITEM(hit, 3);
    if (!(pos = call_args(st, c, node, target, tid))) goto done;
    if (!PyList_Check(pos)) { ret = 0; goto done; } /* None: fits no schema */
    if (!(val = meta_val(node))) goto done;
    if (!(typ = type_of(st, c, val))) goto done;
    int distinct = PyObject_Not(pure);
    if (distinct < 0) goto done;
    r = call_term(st, c, pos, op, label, typ, distinct, &t);
    if (r <= 0) { ret = r; goto done; } /* 0: the method raises the arity error */
    rec = PyTuple_Pack(6, val, target, op, label, typ, distinct ? Py_True : Py_False);
    if (rec == NULL || PyDict_SetItem(st->recipe, node, rec) < 0) goto done;
    if (note_term(st, node, t) < 0) goto done;
    *out = Py_NewRef(t);
    ret = 1;
done:
    Py_XDECREF(target); Py_XDECREF(tid); Py_XDECREF(hit); Py_XDECREF(pos); Py_XDECREF(val);
    Py_XDECREF(typ); Py_XDECREF(t); Py_XDECREF(rec);
    return ret;
}

/* a placeholder or get_attr node: Graph.input_typed of its name and type */
static int fast_input(St *st, Ctx *c, PyObject *node, PyObject *kind, PyObject **out) {
    int ret = -1;
    PyObject *val = NULL, *typ = NULL, *nm = NULL, *name = NULL, *t = NULL, *key = NULL;
    if (!(val = meta_val(node))) goto done;
    if (!(typ = type_of(st, c, val))) goto done;
    if (!(nm = fx_attr(node, FX_NAME))) goto done;
    if (!PyUnicode_Check(nm)) { ret = 0; goto done; }
    if (!(name = PyUnicode_FromFormat("%U:%U", kind, nm))) goto done;
    PyObject *old = PyDict_GetItemWithError(st->inputs, name);
    if (old == NULL && PyErr_Occurred()) goto done;
    PyObject *label = NULL;
    if (!(key = PyTuple_Pack(2, s_input, name))) goto done;
    if (old == NULL && PyDict_GetItemWithError(st->index, key) == NULL && !PyErr_Occurred())
        label = PyDict_GetItemWithError(c->sym_ids, key); /* symbols.intern, when known */
    if (PyErr_Occurred()) goto done;
    if (label != NULL && PyLong_CheckExact(label)) {
        /* input_typed's common case: a new input of a known symbol */
        if (!(t = new_node(st, c, key, label, s_input, Py_None, empty_tuple,
                           PyTuple_GET_ITEM(typ, 0), PyTuple_GET_ITEM(typ, 1),
                           PyTuple_GET_ITEM(typ, 2), name, empty_tuple))
            || PyDict_SetItem(st->inputs, name, t) < 0)
            goto done;
    } else {
        PyObject *argv[] = {st->g, name, PyTuple_GET_ITEM(typ, 0), PyTuple_GET_ITEM(typ, 1),
                            PyTuple_GET_ITEM(typ, 2)};
        if (!(t = PyObject_VectorcallMethod(s_input_typed, argv,
                                            5 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL)))
            goto done;
    }
    if (note_term(st, node, t) < 0) goto done;
    *out = Py_NewRef(t);
    ret = 1;
done:
    Py_XDECREF(val); Py_XDECREF(typ); Py_XDECREF(nm); Py_XDECREF(name); Py_XDECREF(t);
    Py_XDECREF(key);
    return ret;
}

/* TermGraph.import_node(node), native where it is the common case (new reference) */
static PyObject *import_one(St *st, Ctx *c, PyObject *node) {
    PyObject *kind = fx_attr(node, FX_OP);
    if (kind == NULL) return NULL;
    PyObject *t = NULL;
    int r = 0;
    if (str_eq(kind, s_call_function))
        r = fast_call(st, c, node, &t);
    else if (str_eq(kind, s_placeholder) || str_eq(kind, s_get_attr))
        r = fast_input(st, c, node, kind, &t);
    Py_DECREF(kind);
    if (r < 0) return NULL;
    if (r == 0) return PyObject_CallMethodOneArg(st->tg, s_import_node, node);
    return t;
}

static PyObject *fx_build(PyObject *self, PyObject *args) {
    PyObject *tg, *nodes, *ctx;
    if (!PyArg_ParseTuple(args, "OO!O:build", &tg, &PyList_Type, &nodes, &ctx)) return NULL;
    Ctx c;
    St st;
    if (ctx_load(&c, ctx) < 0 || node_layout(c.node_cls) < 0 || st_load(&st, tg) < 0)
        return NULL;
    fx_layout(c.fx_node_type);
    PyObject *dups = PyList_New(0);
    if (dups == NULL) goto fail;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(nodes); i++) {
        PyObject *node = Py_NewRef(PyList_GET_ITEM(nodes, i));
        PyObject *t = import_one(&st, &c, node);
        if (t == NULL) { Py_DECREF(node); goto fail; }
        PyObject *tid = PyObject_GetAttr(t, s_id);
        PyObject *first = tid ? PyDict_GetItemWithError(st.fx_of, tid) : NULL;
        if (first == NULL && tid != NULL && !PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, tid);
        Py_XDECREF(tid);
        if (first == NULL) { Py_DECREF(t); Py_DECREF(node); goto fail; }
        if (first != node) { /* a duplicate of an earlier pure node: merged into it */
            Py_INCREF(first);
            PyObject *r = PyObject_CallMethodOneArg(node, s_replace_all_uses_with, first);
            Py_DECREF(first);
            if (r == NULL || PyDict_SetItem(st.term, node, t) < 0 || PyList_Append(dups, node) < 0) {
                Py_XDECREF(r); Py_DECREF(t); Py_DECREF(node);
                goto fail;
            }
            Py_DECREF(r);
        }
        Py_DECREF(t);
        Py_DECREF(node);
    }
    st_clear(&st);
    return dups;
fail:
    Py_XDECREF(dups);
    st_clear(&st);
    return NULL;
}

/* The reader's state as a tuple made once per term graph (TermGraph._native_state):
 * (tg, graph, term, fx_of, recipe, calls, targets, types, consts, nodes, labels,
 * children, attrs, index, inputs, ctx); the same objects st_load reads. */
static int st_from_state(St *st, Ctx *c, PyObject *state) {
    memset(st, 0, sizeof(*st));
    if (!PyTuple_Check(state) || PyTuple_GET_SIZE(state) != 16) {
        PyErr_SetString(PyExc_TypeError, "_fxreader: state must be a tuple of 16 objects");
        return -1;
    }
    static const char *what[15] = {"tg", "graph", "term", "fx_of", "recipe", "calls",
                                   "targets", "types", "consts", "nodes", "labels",
                                   "children", "attrs", "index", "inputs"};
    for (int i = 2; i < 15; i++) {
        PyObject *v = PyTuple_GET_ITEM(state, i);
        int list = i >= 9 && i <= 12;
        if (list ? !PyList_Check(v) : !PyDict_Check(v)) {
            PyErr_Format(PyExc_TypeError, "_fxreader: state's %s is a %s, not a %s", what[i],
                         Py_TYPE(v)->tp_name, list ? "list" : "dict");
            return -1;
        }
    }
    if (ctx_load(c, PyTuple_GET_ITEM(state, 15)) < 0) return -1;
    st->tg = PyTuple_GET_ITEM(state, 0);
#define S(field, i) st->field = Py_NewRef(PyTuple_GET_ITEM(state, i))
    S(g, 1); S(term, 2); S(fx_of, 3); S(recipe, 4); S(calls, 5); S(targets, 6); S(types, 7);
    S(consts, 8); S(nodes, 9); S(labels, 10); S(children, 11); S(attrs, 12); S(index, 13);
    S(inputs, 14);
#undef S
    return 0;
}

/* import_again(state, node): TermGraph.import_node's re-import of a call
 * it imported before with the same meta["val"] object and target (its
 * recipe), natively: the arguments read again, the term looked up in the
 * hash-consing index or appended, term and fx_of noted.  None when it is
 * not that case or not the common one (the method decides, and raises
 * what it raises). */
/* import_again's work on an unpacked state: 1 and *out (a new reference)
 * when done natively, 0 when not the native case, -1 on error. */
static int import_again_st(St *st, Ctx *c, PyObject *node, PyObject **out) {
    int res = -1;
    PyObject *rec = NULL, *val = NULL, *target = NULL, *tid = NULL, *pos = NULL, *t = NULL;
    *out = NULL;
    if (node_layout(c->node_cls) < 0) goto done;
    fx_layout(c->fx_node_type);
    if ((PyObject *)Py_TYPE(node) != c->fx_node_type) goto none;
    rec = PyDict_GetItemWithError(st->recipe, node);
    if (rec == NULL) {
        if (PyErr_Occurred()) goto done;
        goto none;
    }
    Py_INCREF(rec); /* held: the methods called below may change the table */
    if (!PyTuple_Check(rec) || PyTuple_GET_SIZE(rec) != 6) goto none;
    if (!(val = meta_val(node)) || !(target = fx_attr(node, FX_TARGET))) goto done;
    if (PyTuple_GET_ITEM(rec, 0) != val || PyTuple_GET_ITEM(rec, 1) != target) goto none;
    PyObject *op = PyTuple_GET_ITEM(rec, 2), *label = PyTuple_GET_ITEM(rec, 3),
             *typ = PyTuple_GET_ITEM(rec, 4);
    if (!PyTuple_Check(typ) || PyTuple_GET_SIZE(typ) != 3) goto none;
    int distinct = PyObject_IsTrue(PyTuple_GET_ITEM(rec, 5));
    if (distinct < 0) goto done;
    if (!(tid = PyLong_FromVoidPtr(target))) goto done;
    if (!(pos = call_args(st, c, node, target, tid))) goto done;
    if (!PyList_Check(pos)) goto none; /* None: fits no schema */
    int r = call_term(st, c, pos, op, label, typ, distinct, &t);
    if (r < 0) goto done;
    if (r == 0) goto none; /* the method raises the arity error */
    if (note_term(st, node, t) < 0) goto done;
    *out = t;
    t = NULL;
    res = 1;
    goto done;
none:
    res = 0;
done:
    Py_XDECREF(rec); Py_XDECREF(val); Py_XDECREF(target); Py_XDECREF(tid); Py_XDECREF(pos);
    Py_XDECREF(t);
    return res;
}

static PyObject *fx_import_again(PyObject *self, PyObject *args) {
    PyObject *state, *node, *t = NULL;
    if (!PyArg_ParseTuple(args, "O!O:import_again", &PyTuple_Type, &state, &node)) return NULL;
    Ctx c;
    St st;
    if (st_from_state(&st, &c, state) < 0) return NULL;
    int r = import_again_st(&st, &c, node, &t);
    st_clear(&st);
    if (r < 0) return NULL;
    return r ? t : Py_NewRef(Py_None);
}

/* walk(state, nodes, i, stale, pending, extra, may_root) -> (i, node, what):
 * the rewrite driver's walk of a pass (Driver._run), natively, from index i
 * of the pass's node list up to the next node the driver acts on in Python:
 * what 1: try ``node`` (pending; may_root, a dict label -> bool, does not
 * say False for its term's label), what 2: re-import ``node`` (stale: not
 * the native case of import_again, or its new term equals an earlier
 * node's, to be merged; nothing of it was changed), what 0: the end (node
 * None). On the way: a node without a term is passed; a stale node is
 * re-imported natively (TermGraph.reimport: unchanged term, nothing more;
 * a new one, noted in fx_of as the node's, its users made stale and the
 * node pending); a node neither pending nor in ``extra`` is passed, else
 * taken out of ``extra``. i is where the walk goes on. */
static PyObject *fx_walk(PyObject *self, PyObject *args) {
    PyObject *state, *nodes, *stale, *pending, *extra, *may_root;
    Py_ssize_t i;
    if (!PyArg_ParseTuple(args, "O!O!nO!O!O!O!:walk", &PyTuple_Type, &state, &PyList_Type, &nodes,
                          &i, &PySet_Type, &stale, &PySet_Type, &pending, &PySet_Type, &extra,
                          &PyDict_Type, &may_root))
        return NULL;
    Ctx c;
    St st;
    if (st_from_state(&st, &c, state) < 0) return NULL;
    PyObject *res = NULL, *node = NULL, *old = NULL, *t = NULL, *users = NULL;
    int what = 0;
    if (i < 0) i = 0;
    for (; i < PyList_GET_SIZE(nodes); i++) {
        Py_XSETREF(node, Py_NewRef(PyList_GET_ITEM(nodes, i)));
        Py_CLEAR(old);
        old = PyDict_GetItemWithError(st.term, node);
        if (old == NULL) {
            if (PyErr_Occurred()) goto done;
            continue; /* erased by an earlier firing */
        }
        Py_INCREF(old);
        int s = PySet_Contains(stale, node);
        if (s < 0) goto done;
        if (s) {
            int r = import_again_st(&st, &c, node, &t);
            if (r < 0) goto done;
            if (r == 0) { what = 2; break; }
            if (t != old) {
                PyObject *tid = PyObject_GetAttr(t, s_id);
                if (tid == NULL) goto done;
                PyObject *first = PyDict_GetItemWithError(st.fx_of, tid); /* borrowed */
                int merge = 0;
                if (first == NULL && PyErr_Occurred()) { Py_DECREF(tid); goto done; }
                if (first != NULL && first != node) {
                    PyObject *ft = PyDict_GetItemWithError(st.term, first);
                    if (ft == NULL && PyErr_Occurred()) { Py_DECREF(tid); goto done; }
                    if (ft == t) {
                        int lt = PyObject_RichCompareBool(first, node, Py_LT);
                        if (lt < 0) { Py_DECREF(tid); goto done; }
                        merge = lt;
                    }
                }
                if (merge) {
                    /* left to the method, as it was: the merge erases the node */
                    Py_DECREF(tid);
                    if (PyDict_SetItem(st.term, node, old) < 0) goto done;
                    what = 2;
                    break;
                }
                int e = PyDict_SetItem(st.fx_of, tid, node);
                Py_DECREF(tid);
                if (e < 0 || PySet_Discard(stale, node) < 0) goto done;
                if (!(users = PyObject_GetAttr(node, s_users))) goto done;
                PyObject *it = PyObject_GetIter(users);
                if (it == NULL) goto done;
                PyObject *u;
                while ((u = PyIter_Next(it)) != NULL) {
                    int a = PySet_Add(stale, u);
                    Py_DECREF(u);
                    if (a < 0) { Py_DECREF(it); goto done; }
                }
                Py_DECREF(it);
                if (PyErr_Occurred() || PySet_Add(pending, node) < 0) goto done;
                Py_CLEAR(users);
            } else if (PySet_Discard(stale, node) < 0) {
                goto done;
            }
            Py_CLEAR(t);
        }
        int p = PySet_Contains(pending, node);
        if (p < 0) goto done;
        if (!p) {
            p = PySet_Contains(extra, node);
            if (p < 0) goto done;
            if (!p) continue;
        }
        if (PySet_Discard(extra, node) < 0) goto done;
        PyObject *tn = PyDict_GetItemWithError(st.term, node); /* borrowed */
        if (tn == NULL) {
            if (PyErr_Occurred()) goto done;
            continue;
        }
        PyObject *label = PyObject_GetAttr(tn, s_label);
        if (label == NULL) goto done;
        PyObject *ok = PyDict_GetItemWithError(may_root, label);
        Py_DECREF(label);
        if (ok == NULL && PyErr_Occurred()) goto done;
        if (ok == Py_False) continue; /* no pattern's root has its operator */
        what = 1;
        i++;
        break;
    }
    if (what == 0) Py_CLEAR(node);
    res = Py_BuildValue("(nOi)", i, node ? node : Py_None, what);
done:
    Py_XDECREF(node); Py_XDECREF(old); Py_XDECREF(t); Py_XDECREF(users);
    st_clear(&st);
    return res;
}

/* ----------------------------------------------------------------- encoding */

static int put_words(int64_t **w, int64_t *end, PyObject *v) {
    if (!PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "an integer is required (got type %s)", Py_TYPE(v)->tp_name);
        return -1;
    }
    long long x = PyLong_AsLongLong(v);
    if (x == -1 && PyErr_Occurred()) return -1;
    if (*w >= end) {
        PyErr_SetString(PyExc_RuntimeError, "_fxreader: columns changed while encoding");
        return -1;
    }
    *(*w)++ = (int64_t)x;
    return 0;
}

static PyObject *encode_columns(PyObject *self, PyObject *args) {
    PyObject *header, *labels, *children, *attrs, *tail;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!:encode_columns", &PyList_Type, &header, &PyList_Type,
                          &labels, &PyList_Type, &children, &PyList_Type, &attrs, &PyList_Type,
                          &tail))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(labels);
    if (PyList_GET_SIZE(children) != n || PyList_GET_SIZE(attrs) != n) {
        PyErr_SetString(PyExc_ValueError, "encode_columns: columns of different lengths");
        return NULL;
    }
    /* size first: every column entry checked for its shape */
    Py_ssize_t total = PyList_GET_SIZE(header) + PyList_GET_SIZE(tail);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PyList_GET_ITEM(children, i), *a = PyList_GET_ITEM(attrs, i);
        if (!PyTuple_Check(k) || !PyTuple_Check(a)) {
            PyErr_Format(PyExc_TypeError, "encode_columns: node %zd: children and attributes "
                         "must be tuples", i);
            return NULL;
        }
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(a); j++) {
            PyObject *p = PyTuple_GET_ITEM(a, j);
            if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) != 2) {
                PyErr_Format(PyExc_TypeError, "encode_columns: node %zd: an attribute is not an "
                             "(id, value) pair", i);
                return NULL;
            }
        }
        total += 3 + PyTuple_GET_SIZE(k) + 2 * PyTuple_GET_SIZE(a);
    }
    if (total > PY_SSIZE_T_MAX / 8) return PyErr_NoMemory();
    PyObject *out = PyBytes_FromStringAndSize(NULL, total * 8);
    if (out == NULL) return NULL;
    int64_t *w = (int64_t *)PyBytes_AS_STRING(out), *end = w + total;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(header); i++)
        if (put_words(&w, end, PyList_GET_ITEM(header, i)) < 0) goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PyList_GET_ITEM(children, i), *a = PyList_GET_ITEM(attrs, i);
        if (put_words(&w, end, PyList_GET_ITEM(labels, i)) < 0) goto fail;
        if (w >= end) goto changed;
        *w++ = (int64_t)PyTuple_GET_SIZE(k);
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(k); j++)
            if (put_words(&w, end, PyTuple_GET_ITEM(k, j)) < 0) goto fail;
        if (w >= end) goto changed;
        *w++ = (int64_t)PyTuple_GET_SIZE(a);
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(a); j++) {
            PyObject *p = PyTuple_GET_ITEM(a, j);
            if (put_words(&w, end, PyTuple_GET_ITEM(p, 0)) < 0
                || put_words(&w, end, PyTuple_GET_ITEM(p, 1)) < 0)
                goto fail;
        }
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(tail); i++)
        if (put_words(&w, end, PyList_GET_ITEM(tail, i)) < 0) goto fail;
    if (w != end) goto changed;
    return out;
changed:
    PyErr_SetString(PyExc_RuntimeError, "_fxreader: columns changed while encoding");
fail:
    Py_DECREF(out);
    return NULL;
}

/* pass_words(before_labels, before_args, before_outputs, after_labels,
 * after_args, after_outputs, firings, amap) -> bytes: the rewrite
 * validator's buffer of one pass (rewriting/validate.py, encode_words): per
 * graph its node count, per node label, argument count and arguments, its
 * output count and outputs; the firing count and (root, replacement) pairs;
 * the after -> before map. Checked as encode_columns checks. */
static Py_ssize_t graph_size(PyObject *labels, PyObject *args, PyObject *outputs) {
    Py_ssize_t n = PyList_GET_SIZE(labels);
    if (PyList_GET_SIZE(args) != n) {
        PyErr_SetString(PyExc_ValueError, "pass_words: labels and arguments of different lengths");
        return -1;
    }
    Py_ssize_t total = 2 + 2 * n + PyList_GET_SIZE(outputs);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PyList_GET_ITEM(args, i);
        if (!PyTuple_Check(k) && !PyList_Check(k)) {
            PyErr_Format(PyExc_TypeError, "pass_words: node %zd: arguments must be a tuple or "
                         "a list", i);
            return -1;
        }
        total += PySequence_Fast_GET_SIZE(k);
    }
    return total;
}

static int put_graph(int64_t **w, int64_t *end, PyObject *labels, PyObject *args,
                     PyObject *outputs) {
    Py_ssize_t n = PyList_GET_SIZE(labels);
    if (*w >= end) return -2;
    *(*w)++ = (int64_t)n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PyList_GET_ITEM(args, i);
        if (!PyTuple_Check(k) && !PyList_Check(k)) return -2; /* changed since sized */
        if (put_words(w, end, PyList_GET_ITEM(labels, i)) < 0) return -1;
        if (*w >= end) return -2;
        Py_ssize_t nk = PySequence_Fast_GET_SIZE(k);
        *(*w)++ = (int64_t)nk;
        for (Py_ssize_t j = 0; j < nk && j < PySequence_Fast_GET_SIZE(k); j++)
            if (put_words(w, end, PySequence_Fast_GET_ITEM(k, j)) < 0) return -1;
    }
    if (*w >= end) return -2;
    *(*w)++ = (int64_t)PyList_GET_SIZE(outputs);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(outputs); i++)
        if (put_words(w, end, PyList_GET_ITEM(outputs, i)) < 0) return -1;
    return 0;
}

static PyObject *pass_words(PyObject *self, PyObject *a) {
    PyObject *bl, *ba, *bo, *al, *aa, *ao, *fs, *amap;
    if (!PyArg_ParseTuple(a, "O!O!O!O!O!O!O!O!:pass_words", &PyList_Type, &bl, &PyList_Type, &ba,
                          &PyList_Type, &bo, &PyList_Type, &al, &PyList_Type, &aa, &PyList_Type,
                          &ao, &PyList_Type, &fs, &PyList_Type, &amap))
        return NULL;
    Py_ssize_t sb = graph_size(bl, ba, bo), sa = sb < 0 ? -1 : graph_size(al, aa, ao);
    if (sa < 0) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(fs); i++) {
        PyObject *f = PyList_GET_ITEM(fs, i);
        if (!PyTuple_Check(f) || PyTuple_GET_SIZE(f) != 2) {
            PyErr_Format(PyExc_TypeError, "pass_words: firing %zd is not a (root, replacement) "
                         "pair", i);
            return NULL;
        }
    }
    Py_ssize_t total = sb + sa + 1 + 2 * PyList_GET_SIZE(fs) + PyList_GET_SIZE(amap);
    if (total > PY_SSIZE_T_MAX / 8) return PyErr_NoMemory();
    PyObject *out = PyBytes_FromStringAndSize(NULL, total * 8);
    if (out == NULL) return NULL;
    int64_t *w = (int64_t *)PyBytes_AS_STRING(out), *end = w + total;
    int r = put_graph(&w, end, bl, ba, bo);
    if (r == 0) r = put_graph(&w, end, al, aa, ao);
    if (r == 0 && w < end) *w++ = (int64_t)PyList_GET_SIZE(fs);
    for (Py_ssize_t i = 0; r == 0 && i < PyList_GET_SIZE(fs); i++) {
        PyObject *f = PyList_GET_ITEM(fs, i);
        if (put_words(&w, end, PyTuple_GET_ITEM(f, 0)) < 0
            || put_words(&w, end, PyTuple_GET_ITEM(f, 1)) < 0)
            r = -1;
    }
    for (Py_ssize_t i = 0; r == 0 && i < PyList_GET_SIZE(amap); i++)
        if (put_words(&w, end, PyList_GET_ITEM(amap, i)) < 0) r = -1;
    if (r == 0 && w == end) return out;
    if (r != -1) PyErr_SetString(PyExc_RuntimeError, "_fxreader: lists changed while encoding");
    Py_DECREF(out);
    return NULL;
}

/* correspond(n_before, identity, fired, mergeable, before_labels, before_args,
 * after_labels, after_args, claim_rebuilt, resolve, pass_, image, amap, inverse)
 * -> merges: Pass.correspond's walk of the before nodes, natively. ``identity``
 * (after index -> before index) fills ``amap`` (a list of -1s, one per after
 * node) and ``inverse`` (a dict, before -> after); then per before node g, in
 * order, its image is appended to ``image`` (a list: ``resolve(replacement,
 * pass_)`` may read it): a fired root's (``fired``: g -> Firing) is what
 * ``resolve`` gives its replacement; a node kept is its after node; a node
 * gone that is mergeable is the first after node with its label and its
 * arguments' images, else None. Returns the merges [(g, h)] (an after node
 * claimed as rebuilt, with ``claim_rebuilt``, goes to ``amap`` instead). */
static PyObject *correspond(PyObject *self, PyObject *a) {
    Py_ssize_t nb;
    PyObject *identity, *fired, *merge, *bl, *ba, *al, *aa, *resolve, *pass_, *image, *amap,
        *inverse;
    int claim;
    if (!PyArg_ParseTuple(a, "nO!O!O!O!O!O!O!pOOO!O!O!:correspond", &nb, &PyDict_Type,
                          &identity, &PyDict_Type, &fired, &PyList_Type, &merge, &PyList_Type,
                          &bl, &PyList_Type, &ba, &PyList_Type, &al, &PyList_Type, &aa, &claim,
                          &resolve, &pass_, &PyList_Type, &image, &PyList_Type, &amap,
                          &PyDict_Type, &inverse))
        return NULL;
    Py_ssize_t na = PyList_GET_SIZE(amap);
    if (nb < 0 || PyList_GET_SIZE(merge) != nb || PyList_GET_SIZE(bl) != nb
        || PyList_GET_SIZE(ba) != nb || PyList_GET_SIZE(al) != na || PyList_GET_SIZE(aa) != na
        || PyList_GET_SIZE(image) != 0) {
        PyErr_SetString(PyExc_ValueError, "correspond: the lists do not fit the graphs");
        return NULL;
    }
    Py_ssize_t *inv = NULL;
    PyObject **fir = NULL, *merges = NULL, *keyed = NULL, *res = NULL;
    inv = PyMem_Malloc(sizeof(Py_ssize_t) * (nb ? nb : 1));
    fir = PyMem_Calloc(nb ? nb : 1, sizeof(PyObject *));
    if (inv == NULL || fir == NULL) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t g = 0; g < nb; g++) inv[g] = -1;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(identity, &pos, &k, &v)) {
        Py_ssize_t h = PyLong_AsSsize_t(k), g = PyLong_AsSsize_t(v);
        if ((h == -1 || g == -1) && PyErr_Occurred()) goto done;
        if (h < 0 || h >= na || g < 0 || g >= nb) {
            PyErr_SetString(PyExc_IndexError, "correspond: identity entry out of range");
            goto done;
        }
        if (PyList_SetItem(amap, h, Py_NewRef(v)) < 0 || PyDict_SetItem(inverse, v, k) < 0)
            goto done;
        inv[g] = h;
    }
    pos = 0;
    while (PyDict_Next(fired, &pos, &k, &v)) {
        Py_ssize_t g = PyLong_AsSsize_t(k);
        if (g == -1 && PyErr_Occurred()) goto done;
        if (g >= 0 && g < nb) fir[g] = v; /* borrowed: fired is not changed here */
    }
    if (!(merges = PyList_New(0))) goto done;
    for (Py_ssize_t g = 0; g < nb; g++) {
        PyObject *im = NULL; /* new reference: the image appended */
        if (fir[g] != NULL) {
            PyObject *rep = PyObject_GetAttrString(fir[g], "replacement");
            if (rep == NULL) goto done;
            im = PyObject_CallFunctionObjArgs(resolve, rep, pass_, NULL);
            Py_DECREF(rep);
            if (im == NULL) goto done;
        } else {
            int mg = PyObject_IsTrue(PyList_GET_ITEM(merge, g));
            if (mg < 0) goto done;
            if (inv[g] >= 0 || !mg) {
                im = inv[g] >= 0 ? PyLong_FromSsize_t(inv[g]) : Py_NewRef(Py_None);
                if (im == NULL) goto done;
            } else {
                PyObject *args = PyList_GET_ITEM(ba, g);
                PyObject *seq = PySequence_Fast(args, "correspond: arguments are not a sequence");
                if (seq == NULL) goto done;
                Py_ssize_t m = PySequence_Fast_GET_SIZE(seq);
                PyObject *imgs = PyTuple_New(m);
                int none = 0;
                for (Py_ssize_t i = 0; imgs != NULL && i < m; i++) {
                    Py_ssize_t j = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i));
                    if (j == -1 && PyErr_Occurred()) { Py_CLEAR(imgs); break; }
                    if (j < 0) j += g; /* Python's negative index into the images so far */
                    if (j < 0 || j >= g) {
                        PyErr_SetString(PyExc_IndexError, "list index out of range");
                        Py_CLEAR(imgs);
                        break;
                    }
                    PyObject *e = PyList_GET_ITEM(image, j);
                    if (e == Py_None) none = 1;
                    PyTuple_SET_ITEM(imgs, i, Py_NewRef(e));
                }
                Py_DECREF(seq);
                if (imgs == NULL) goto done;
                if (none) {
                    Py_DECREF(imgs);
                    im = Py_NewRef(Py_None);
                } else {
                    if (keyed == NULL) { /* (label, args) -> first after node */
                        if (!(keyed = PyDict_New())) { Py_DECREF(imgs); goto done; }
                        for (Py_ssize_t i = 0; i < na; i++) {
                            PyObject *hk = PyTuple_Pack(2, PyList_GET_ITEM(al, i),
                                                        PyList_GET_ITEM(aa, i));
                            PyObject *hi = hk ? PyLong_FromSsize_t(i) : NULL;
                            PyObject *was = hi ? PyDict_SetDefault(keyed, hk, hi) : NULL;
                            Py_XDECREF(hk);
                            Py_XDECREF(hi);
                            if (was == NULL) { Py_DECREF(imgs); goto done; }
                        }
                    }
                    PyObject *key = PyTuple_Pack(2, PyList_GET_ITEM(bl, g), imgs);
                    Py_DECREF(imgs);
                    if (key == NULL) goto done;
                    PyObject *h = PyDict_GetItemWithError(keyed, key);
                    Py_DECREF(key);
                    if (h == NULL && PyErr_Occurred()) goto done;
                    im = Py_NewRef(h != NULL ? h : Py_None);
                    if (h != NULL) {
                        Py_ssize_t hh = PyLong_AsSsize_t(h);
                        PyObject *cur = PyList_GET_ITEM(amap, hh);
                        int unclaimed = PyLong_Check(cur) && PyLong_AsLong(cur) == -1;
                        PyObject *gi = PyLong_FromSsize_t(g);
                        if (gi == NULL) { Py_DECREF(im); goto done; }
                        int r;
                        if (claim && unclaimed) {
                            r = PyList_SetItem(amap, hh, gi); /* the rebuilt node */
                        } else {
                            PyObject *pair = PyTuple_Pack(2, gi, h);
                            Py_DECREF(gi);
                            r = pair == NULL ? -1 : PyList_Append(merges, pair);
                            Py_XDECREF(pair);
                        }
                        if (r < 0) { Py_DECREF(im); goto done; }
                    }
                }
            }
        }
        int r = PyList_Append(image, im);
        Py_DECREF(im);
        if (r < 0) goto done;
    }
    res = Py_NewRef(merges);
done:
    PyMem_Free(inv);
    PyMem_Free(fir);
    Py_XDECREF(merges);
    Py_XDECREF(keyed);
    return res;
}

/* --------------------------------------------------- the validator's encoding */
/* images(keys, syms, args, node_type, term, labels, children, index, no_attrs)
 * -> (images, inverse): FxChecker._images, natively. Per node i of an
 * encoding (its key, its operator symbol or None, its argument indices), its
 * image in the term graph (labels, children, the hash-consing index): an FX
 * node's term (``term``), a constant's leaf (key ("c", id)), a list's node
 * (``index[(sym, child images, no_attrs)]``), when its label is the symbol
 * and its children are its arguments' images, and no earlier node has it;
 * else -1. ``inverse``: term id -> node. */
static PyObject *images(PyObject *self, PyObject *a) {
    PyObject *keys, *syms, *args, *node_type, *term, *labels, *children, *index, *no_attrs;
    if (!PyArg_ParseTuple(a, "O!O!O!O!O!O!O!O!O:images", &PyList_Type, &keys, &PyList_Type,
                          &syms, &PyList_Type, &args, &PyType_Type, &node_type, &PyDict_Type,
                          &term, &PyList_Type, &labels, &PyList_Type, &children, &PyDict_Type,
                          &index, &no_attrs))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(keys);
    if (PyList_GET_SIZE(syms) != n || PyList_GET_SIZE(args) != n) {
        PyErr_SetString(PyExc_ValueError, "images: columns of different lengths");
        return NULL;
    }
    Py_ssize_t ng = PyList_GET_SIZE(labels);
    PyObject *img = PyList_New(n), *inv = PyDict_New(), *result = NULL;
    Py_ssize_t *im = PyMem_Calloc(n + 1, sizeof(Py_ssize_t));
    if (img == NULL || inv == NULL || im == NULL) {
        if (im == NULL) PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) im[i] = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i), *sym = PyList_GET_ITEM(syms, i);
        PyObject *ai = PyList_GET_ITEM(args, i);
        if (sym == Py_None) continue;
        if (!PyTuple_Check(ai)) {
            PyErr_Format(PyExc_TypeError, "images: node %zd: arguments must be a tuple", i);
            goto done;
        }
        Py_ssize_t na = PyTuple_GET_SIZE(ai), tid = -1;
        for (Py_ssize_t j = 0; j < na; j++) { /* every argument an earlier node */
            Py_ssize_t x = PyLong_AsSsize_t(PyTuple_GET_ITEM(ai, j));
            if (x == -1 && PyErr_Occurred()) goto done;
            if (x < 0 || x >= i) { na = -1; break; }
        }
        if (na < 0) continue; /* an argument not before it: no image */
        PyObject *t = NULL;
        if ((PyObject *)Py_TYPE(key) == node_type) {
            t = PyDict_GetItemWithError(term, key);
            if (t == NULL) { if (PyErr_Occurred()) goto done; continue; }
        } else if (PyTuple_Check(key) && PyTuple_GET_SIZE(key) == 2
                   && PyUnicode_Check(PyTuple_GET_ITEM(key, 0))
                   && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(key, 0), "c") == 0) {
            tid = PyLong_AsSsize_t(PyTuple_GET_ITEM(key, 1));
            if (tid == -1 && PyErr_Occurred()) goto done;
        } else {
            PyObject *kimg = PyTuple_New(na);
            if (kimg == NULL) goto done;
            for (Py_ssize_t j = 0; j < na; j++) {
                PyObject *x = PyLong_FromSsize_t(im[PyLong_AsSsize_t(PyTuple_GET_ITEM(ai, j))]);
                if (x == NULL) { Py_DECREF(kimg); goto done; }
                PyTuple_SET_ITEM(kimg, j, x);
            }
            PyObject *k = PyTuple_Pack(3, sym, kimg, no_attrs);
            Py_DECREF(kimg);
            if (k == NULL) goto done;
            t = PyDict_GetItemWithError(index, k);
            Py_DECREF(k);
            if (t == NULL) { if (PyErr_Occurred()) goto done; continue; }
        }
        if (t != NULL) {
            PyObject *to = PyObject_GetAttr(t, s_id);
            if (to == NULL) goto done;
            tid = PyLong_AsSsize_t(to);
            Py_DECREF(to);
            if (tid == -1 && PyErr_Occurred()) goto done;
        }
        if (tid < 0 || tid >= ng || tid >= PyList_GET_SIZE(children)) continue;
        PyObject *tido = PyLong_FromSsize_t(tid);
        if (tido == NULL) goto done;
        int seen = PyDict_Contains(inv, tido);
        int same = seen == 0 ? PyObject_RichCompareBool(PyList_GET_ITEM(labels, tid), sym, Py_EQ)
                             : 0;
        if (seen < 0 || same < 0) { Py_DECREF(tido); goto done; }
        PyObject *kids = PyList_GET_ITEM(children, tid);
        int ok = same && PyTuple_Check(kids) && PyTuple_GET_SIZE(kids) == na;
        for (Py_ssize_t j = 0; ok && j < na; j++) {
            Py_ssize_t c = PyLong_AsSsize_t(PyTuple_GET_ITEM(kids, j));
            if (c == -1 && PyErr_Occurred()) { Py_DECREF(tido); goto done; }
            ok = im[PyLong_AsSsize_t(PyTuple_GET_ITEM(ai, j))] == c;
        }
        if (ok) {
            PyObject *io = PyLong_FromSsize_t(i);
            if (io == NULL || PyDict_SetItem(inv, tido, io) < 0) {
                Py_XDECREF(io); Py_DECREF(tido);
                goto done;
            }
            Py_DECREF(io);
            im[i] = tid;
        }
        Py_DECREF(tido);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyLong_FromSsize_t(im[i]);
        if (x == NULL) goto done;
        PyList_SET_ITEM(img, i, x);
    }
    result = PyTuple_Pack(2, img, inv);
done:
    PyMem_Free(im);
    if (img != NULL && result == NULL) {
        for (Py_ssize_t i = 0; i < n; i++) /* the unset items are NULL: fill before freeing */
            if (PyList_GET_ITEM(img, i) == NULL) PyList_SET_ITEM(img, i, Py_NewRef(Py_None));
    }
    Py_XDECREF(img); Py_XDECREF(inv);
    return result;
}


/* The common case of FxChecker._node, natively: a call_function whose
 * target the checker has read (``targets``: id(target) -> (target, stand-in,
 * operator symbol)) and whose positional form the import cached (``calls``);
 * its argument specs (an FX node; ("c", term id) for a constant: scalars
 * through ``const_specs`` by (type, value), flat lists and tuples of scalars
 * through the import's ``tg._consts``, else ``tg.arg(a).id``), its label
 * (interned in ``label_ids``, Labels.table, as Labels interns) and purity
 * (``pure_targets`` by id(target), else ``is_pure(node)``). The cache entry
 * is written as _node writes it. Returns a new reference to the node's info,
 * NULL with no error set when it is not the common case (the caller asks
 * _node), NULL with an error set on an error. */
typedef struct {
    PyObject *targets, *calls, *const_specs, *scalars, *tg, *label_ids, *pure_targets, *is_pure,
        *getitem, *sym_ids, *consts, *graph_labels, *cache;
} Fast;

/* importer._const_cache_key(a) of a flat list or tuple of scalars, the key
 * of tg._consts (new reference); NULL without an error for anything else */
static PyObject *flat_const_key(Fast *f, PyObject *a) {
    PyObject *seq = PyTuple_Check(a) ? (PyObject *)&PyTuple_Type : (PyObject *)&PyList_Type;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(a);
    PyObject *pairs = PyTuple_New(n);
    if (pairs == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PySequence_Fast_GET_ITEM(a, i), *t = (PyObject *)Py_TYPE(e);
        int sc = PySet_Contains(f->scalars, t);
        PyObject *p = sc == 1 ? scalar_key(t, e) : NULL;
        if (p == NULL) { Py_DECREF(pairs); return NULL; }
        PyTuple_SET_ITEM(pairs, i, p);
    }
    PyObject *key = PyTuple_Pack(2, seq, pairs);
    Py_DECREF(pairs);
    return key;
}

/* table[key], interned as validate.Labels interns it (the next int) when
 * new: a new reference */
static PyObject *intern_label(PyObject *table, PyObject *key) {
    PyObject *label = PyDict_GetItemWithError(table, key);
    if (label != NULL) return Py_NewRef(label);
    if (PyErr_Occurred()) return NULL;
    label = PyLong_FromSsize_t(PyDict_GET_SIZE(table));
    if (label != NULL && PyDict_SetItem(table, key, label) < 0) Py_CLEAR(label);
    return label;
}

/* the label of key (new reference), interned in Labels.table */
static PyObject *fast_label(Fast *f, PyObject *key) {
    return intern_label(f->label_ids, key);
}

/* the info of a node and its cache entry (new reference to the info) */
static PyObject *fast_out(Fast *f, PyObject *node, PyObject *args, PyObject *kwargs,
                          PyObject *target, PyObject *label, PyObject *nodes, int pure,
                          PyObject *specs, PyObject *sym) {
    PyObject *out = PyTuple_Pack(5, label, nodes, pure ? Py_True : Py_False, specs, sym);
    if (out == NULL) return NULL;
    PyObject *entry = PyTuple_Pack(4, args, kwargs, target, out);
    if (entry == NULL || PyDict_SetItem(f->cache, node, entry) < 0) Py_CLEAR(out);
    Py_XDECREF(entry);
    return out;
}

/* _node of a placeholder or get_attr node: the leaf of symbol
 * ("input", "<op>:<name>") when the symbol exists (else NULL, no error) */
static PyObject *fast_leaf(Fast *f, PyObject *node, PyObject *op, PyObject *target,
                           PyObject *args, PyObject *kwargs) {
    PyObject *name = fx_attr(node, FX_NAME), *out = NULL;
    if (name == NULL) return NULL;
    PyObject *text = PyUnicode_FromFormat("%S:%S", op, name);
    PyObject *k = text == NULL ? NULL : PyTuple_Pack(2, s_input, text);
    Py_XDECREF(text);
    PyObject *sym = k == NULL ? NULL : PyDict_GetItemWithError(f->sym_ids, k);
    Py_XDECREF(k);
    if (sym != NULL) {
        PyObject *key = PyTuple_Pack(3, sym, op, str_eq(op, s_get_attr) ? target : name);
        PyObject *label = key == NULL ? NULL : fast_label(f, key);
        Py_XDECREF(key);
        PyObject *nodes = label == NULL ? NULL : PyList_New(0);
        if (nodes != NULL)
            out = fast_out(f, node, args, kwargs, target, label, nodes, 1, empty_tuple, sym);
        Py_XDECREF(label);
        Py_XDECREF(nodes);
    }
    Py_DECREF(name);
    return out;
}

static int has_node(PyObject *a, PyObject *node_type, int depth) {
    if (depth > 100) return 1; /* too deep to tell here: _node decides */
    PyObject *items = PyDict_Check(a) ? PyDict_Values(a) : Py_NewRef(a);
    if (items == NULL) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(items);
    PyObject **v = PySequence_Fast_ITEMS(items);
    int r = 0;
    for (Py_ssize_t i = 0; r == 0 && i < n; i++) {
        PyObject *e = v[i];
        if ((PyObject *)Py_TYPE(e) == node_type) r = 1;
        else if (PyList_Check(e) || PyTuple_Check(e) || PyDict_Check(e))
            r = has_node(e, node_type, depth + 1);
    }
    Py_DECREF(items);
    return r;
}

/* bool(a <op> b), as Python computes it (PyObject_RichCompareBool would
 * take a is b for equal) */
static int rich_bool(PyObject *a, PyObject *b, int op) {
    PyObject *r = PyObject_RichCompare(a, b, op);
    if (r == NULL) return -1;
    int t = PyObject_IsTrue(r);
    Py_DECREF(r);
    return t;
}

static PyObject *fast_spec(Fast *f, PyObject *a, PyObject *node_type) {
    /* a constant (the caller has checked a is not a node nor a list or tuple holding one) */
    PyObject *ck = NULL;
    if (PySet_Contains(f->scalars, (PyObject *)Py_TYPE(a)) == 1) {
        /* validate_fx._const_key: False for a NaN (no identity shortcut) */
        int self_eq = rich_bool(a, a, Py_EQ);
        if (self_eq < 0) return NULL;
        if (self_eq) {
            ck = scalar_key((PyObject *)Py_TYPE(a), a);
            if (ck == NULL) return NULL;
            PyObject *hit = PyDict_GetItemWithError(f->const_specs, ck);
            if (hit != NULL) { Py_DECREF(ck); return Py_NewRef(hit); }
            if (PyErr_Occurred()) { Py_DECREF(ck); return NULL; }
        }
    } else if (PyErr_Occurred()) return NULL;
    else if (PyList_Check(a) || PyTuple_Check(a)) { /* sizes, dims: the import's leaf */
        PyObject *key = flat_const_key(f, a);
        if (key == NULL && PyErr_Occurred()) return NULL;
        PyObject *t = key == NULL ? NULL : PyDict_GetItemWithError(f->consts, key);
        Py_XDECREF(key);
        if (t != NULL) {
            PyObject *tid = PyObject_GetAttr(t, s_id);
            if (tid == NULL) return NULL;
            PyObject *spec = PyTuple_Pack(2, s_c, tid);
            Py_DECREF(tid);
            return spec;
        }
        if (PyErr_Occurred()) return NULL;
    }
    PyObject *t = PyObject_CallMethodOneArg(f->tg, s_arg, a), *spec = NULL;
    if (t != NULL) {
        PyObject *tid = PyObject_GetAttr(t, s_id);
        Py_DECREF(t);
        if (tid != NULL) {
            spec = PyTuple_Pack(2, s_c, tid);
            Py_DECREF(tid);
        }
    }
    if (spec != NULL && ck != NULL && PyDict_SetItem(f->const_specs, ck, spec) < 0) Py_CLEAR(spec);
    Py_XDECREF(ck);
    return spec;
}

static PyObject *fast_node(Fast *f, PyObject *node, PyObject *node_type, PyObject *target,
                           PyObject *args, PyObject *kwargs) {
    PyObject *tid = PyLong_FromVoidPtr(target);
    if (tid == NULL) return NULL;
    PyObject *tk = PyDict_GetItemWithError(f->targets, tid);
    PyObject *pt = tk == NULL ? NULL : PyDict_GetItemWithError(f->pure_targets, tid);
    Py_DECREF(tid);
    if (PyErr_Occurred()) return NULL;
    if (tk == NULL || !PyTuple_Check(tk) || PyTuple_GET_SIZE(tk) != 3
        || PyTuple_GET_ITEM(tk, 0) != target || PyTuple_GET_ITEM(tk, 2) == Py_None)
        return NULL;
    PyObject *hit = PyDict_GetItemWithError(f->calls, node);
    if (hit == NULL || !PyTuple_Check(hit) || PyTuple_GET_SIZE(hit) != 4
        || PyTuple_GET_ITEM(hit, 0) != args || PyTuple_GET_ITEM(hit, 1) != kwargs
        || PyTuple_GET_ITEM(hit, 2) != target || !PyList_Check(PyTuple_GET_ITEM(hit, 3)))
        return NULL;
    PyObject *pos = PyTuple_GET_ITEM(hit, 3);
    Py_INCREF(pos);
    PyObject *nodes = PyList_New(0), *specs = NULL, *out = NULL;
    if (nodes == NULL) goto done;
    Py_ssize_t n = PyList_GET_SIZE(pos);
    if (!(specs = PyTuple_New(n))) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyList_GET_ITEM(pos, i), *s;
        if ((PyObject *)Py_TYPE(a) == node_type) {
            if (PyList_Append(nodes, a) < 0) goto done;
            s = Py_NewRef(a);
        } else {
            if (PyList_Check(a) || PyTuple_Check(a)) {
                int h = has_node(a, node_type, 0);
                if (h < 0) goto done;
                if (h) goto done; /* a list holding nodes: _node's */
            }
            if (!(s = fast_spec(f, a, node_type))) goto done;
        }
        PyTuple_SET_ITEM(specs, i, s);
    }
    int pure;
    if (target == f->getitem) pure = 1;
    else if (pt != NULL && PyTuple_Check(pt) && PyTuple_GET_SIZE(pt) == 2) {
        pure = PyObject_IsTrue(PyTuple_GET_ITEM(pt, 0));
        if (pure < 0) goto done;
    } else {
        PyObject *r = PyObject_CallOneArg(f->is_pure, node);
        if (r == NULL) goto done;
        pure = PyObject_IsTrue(r);
        Py_DECREF(r);
        if (pure < 0) goto done;
    }
    PyObject *sym = PyTuple_GET_ITEM(tk, 2);
    PyObject *key = PyTuple_Pack(2, sym, PyTuple_GET_ITEM(tk, 1));
    if (key == NULL) goto done;
    PyObject *label = fast_label(f, key);
    Py_DECREF(key);
    if (label == NULL) goto done;
    out = fast_out(f, node, args, kwargs, target, label, nodes, pure, specs, sym);
    Py_DECREF(label);
done:
    Py_DECREF(pos);
    Py_XDECREF(nodes);
    Py_XDECREF(specs);
    return out;
}

/* encode_fx(nodes, node_type, cache, node_info, assert_target, output_nodes, before_index,
 *           known, const_labels, const_label, list_label, fast)
 * does FxChecker.encode's walk (pypm_verified/torch/validate_fx.py) over the
 * FX node list ``nodes``: per node its info from ``cache`` (node -> (args,
 * kwargs, target, info), valid while the three are the same objects), else
 * from ``node_info(node)``; the outputs (``output_nodes(output node)``), the
 * impure nodes, the nodes they reach; with ``before_index`` (a dict, or None)
 * and ``known`` (a set) also the nodes the graph before a pass encoded or the
 * pass created, and what they use. Constants (("c", term id): label from
 * ``const_labels``, else ``const_label(term id)``) and lists (("l", specs):
 * ``list_label(n)``) are nodes before their first user. ``fast`` (None, or
 * the tuple of Fast's fields) lets fast_node read the common calls. Returns (labels,
 * args, names, keys, index, mergeable, syms, outputs, impure): the
 * Encoding's columns, then the output FX nodes and the impure FX nodes. */

typedef struct {
    PyObject *labels, *args, *names, *keys, *index, *mergeable, *syms;
    PyObject *node_type, *const_labels, *const_label, *list_label, *list_labels;
    PyObject *label_table, *graph_labels; /* with fast: Labels.table, tg.graph._labels */
} Enc;

static Py_ssize_t enc_append(Enc *e, PyObject *key, PyObject *label, PyObject *args,
                             PyObject *name, int mergeable, PyObject *sym) {
    Py_ssize_t j = PyList_GET_SIZE(e->labels);
    PyObject *jo = PyLong_FromSsize_t(j);
    if (jo == NULL) return -1;
    int bad = PyList_Append(e->labels, label) < 0 || PyList_Append(e->args, args) < 0
              || PyList_Append(e->names, name) < 0 || PyList_Append(e->keys, key) < 0
              || PyList_Append(e->mergeable, mergeable ? Py_True : Py_False) < 0
              || PyList_Append(e->syms, sym) < 0 || PyDict_SetItem(e->index, key, jo) < 0;
    Py_DECREF(jo);
    return bad ? -1 : j;
}

/* index.get(spec, own) for an FX node; else the spec emitted (new
 * reference to its index as an int object), NULL on error */
static PyObject *enc_emit(Enc *e, PyObject *spec, Py_ssize_t own, int depth) {
    PyObject *j = PyDict_GetItemWithError(e->index, spec);
    if (j != NULL) return Py_NewRef(j);
    if (PyErr_Occurred()) return NULL;
    if ((PyObject *)Py_TYPE(spec) == e->node_type) return PyLong_FromSsize_t(own);
    if (depth > 100 || !PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 2
        || !PyUnicode_Check(PyTuple_GET_ITEM(spec, 0))) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "encode_fx: malformed argument spec");
        return NULL;
    }
    PyObject *tag = PyTuple_GET_ITEM(spec, 0), *body = PyTuple_GET_ITEM(spec, 1);
    PyObject *ls = NULL, *kids = NULL, *name = NULL;
    if (PyUnicode_CompareWithASCIIString(tag, "c") == 0) {
        ls = PyDict_GetItemWithError(e->const_labels, body);
        if (ls != NULL) Py_INCREF(ls);
        else if (PyErr_Occurred()) return NULL;
        else if (e->label_table != NULL && PyLong_Check(body)) {
            /* FxChecker._const_label: (label of (symbol, "c"), symbol) */
            Py_ssize_t tid = PyLong_AsSsize_t(body);
            if (tid == -1 && PyErr_Occurred()) return NULL;
            if (tid < 0 || tid >= PyList_GET_SIZE(e->graph_labels)) {
                PyErr_Format(PyExc_IndexError, "encode_fx: constant %zd is not in the term graph",
                             tid);
                return NULL;
            }
            PyObject *sym = PyList_GET_ITEM(e->graph_labels, tid);
            PyObject *key = PyTuple_Pack(2, sym, s_c);
            PyObject *label = key == NULL ? NULL : intern_label(e->label_table, key);
            Py_XDECREF(key);
            ls = label == NULL ? NULL : PyTuple_Pack(2, label, sym);
            Py_XDECREF(label);
            if (ls != NULL && PyDict_SetItem(e->const_labels, body, ls) < 0) Py_CLEAR(ls);
        } else ls = PyObject_CallOneArg(e->const_label, body);
        if (ls == NULL) return NULL;
        kids = Py_NewRef(empty_tuple);
        name = PyUnicode_FromFormat("constant %%%S", body);
    } else if (PyUnicode_CompareWithASCIIString(tag, "l") == 0 && PyTuple_Check(body)) {
        Py_ssize_t k = PyTuple_GET_SIZE(body);
        kids = PyTuple_New(k);
        if (kids == NULL) return NULL;
        for (Py_ssize_t i = 0; i < k; i++) {
            PyObject *x = enc_emit(e, PyTuple_GET_ITEM(body, i),
                                   PyList_GET_SIZE(e->labels), depth + 1);
            if (x == NULL) { Py_DECREF(kids); return NULL; }
            PyTuple_SET_ITEM(kids, i, x);
        }
        PyObject *ko = PyLong_FromSsize_t(k);
        if (ko == NULL) { Py_DECREF(kids); return NULL; }
        ls = PyDict_GetItemWithError(e->list_labels, ko);
        if (ls != NULL) Py_INCREF(ls);
        else if (!PyErr_Occurred()) {
            ls = PyObject_CallOneArg(e->list_label, ko);
            if (ls != NULL && PyDict_SetItem(e->list_labels, ko, ls) < 0) Py_CLEAR(ls);
        }
        Py_DECREF(ko);
        if (ls == NULL) { Py_DECREF(kids); return NULL; }
        name = PyUnicode_FromFormat("list of %zd", k);
    } else {
        PyErr_SetString(PyExc_TypeError, "encode_fx: malformed argument spec");
        return NULL;
    }
    Py_ssize_t at = -1;
    if (name != NULL && PyTuple_Check(ls) && PyTuple_GET_SIZE(ls) == 2)
        at = enc_append(e, spec, PyTuple_GET_ITEM(ls, 0), kids, name, 1, PyTuple_GET_ITEM(ls, 1));
    else if (name != NULL)
        PyErr_SetString(PyExc_TypeError, "encode_fx: a label is not a (label, operator) pair");
    Py_DECREF(ls); Py_DECREF(kids); Py_XDECREF(name);
    return at < 0 ? NULL : PyLong_FromSsize_t(at);
}

static PyObject *encode_fx(PyObject *self, PyObject *a) {
    PyObject *nodes, *cache, *node_info, *assert_target, *output_nodes, *before_index, *known,
        *fast_args;
    Enc e;
    Fast fast = {0};
    memset(&e, 0, sizeof(e));
    if (!PyArg_ParseTuple(a, "O!O!O!OOOOOO!OOO:encode_fx", &PyList_Type, &nodes, &PyType_Type,
                          &e.node_type, &PyDict_Type, &cache, &node_info, &assert_target,
                          &output_nodes, &before_index, &known, &PyDict_Type, &e.const_labels,
                          &e.const_label, &e.list_label, &fast_args))
        return NULL;
    int use_fast = fast_args != Py_None;
    if (use_fast) {
        if (!PyTuple_Check(fast_args) || PyTuple_GET_SIZE(fast_args) != 12) {
            PyErr_SetString(PyExc_TypeError, "encode_fx: fast must be None or a tuple of 12");
            return NULL;
        }
        PyObject **v = &PyTuple_GET_ITEM(fast_args, 0);
        fast = (Fast){v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11],
                      cache};
        if (!PyDict_Check(fast.targets) || !PyDict_Check(fast.calls)
            || !PyDict_Check(fast.const_specs) || !PyAnySet_Check(fast.scalars)
            || !PyDict_Check(fast.label_ids) || !PyDict_Check(fast.pure_targets)
            || !PyDict_Check(fast.sym_ids) || !PyDict_Check(fast.consts)
            || !PyList_Check(fast.graph_labels)) {
            PyErr_SetString(PyExc_TypeError, "encode_fx: malformed fast tables");
            return NULL;
        }
    }
    if ((before_index != Py_None && !PyDict_Check(before_index))
        || (before_index != Py_None && !PyAnySet_Check(known))) {
        PyErr_SetString(PyExc_TypeError, "encode_fx: before_index must be a dict (or None) "
                        "and known a set");
        return NULL;
    }
    if (use_fast) {
        e.label_table = fast.label_ids;
        e.graph_labels = fast.graph_labels;
    }
    Py_ssize_t n = PyList_GET_SIZE(nodes);
    PyObject *result = NULL, *outputs = NULL, *impure = NULL, *pos = NULL;
    PyObject **info = NULL, **fx = NULL; /* per recorded node: its info, its FX node */
    char *keep = NULL;
    Py_ssize_t *stack = NULL, m = 0;
    if (!(info = PyMem_Calloc(n + 1, sizeof(PyObject *)))
        || !(fx = PyMem_Calloc(n + 1, sizeof(PyObject *))) || !(keep = PyMem_Calloc(n + 1, 1))
        || !(stack = PyMem_Calloc(n + 1, sizeof(Py_ssize_t)))) {
        PyErr_NoMemory();
        goto done;
    }
    if (!(outputs = PyList_New(0)) || !(impure = PyList_New(0)) || !(pos = PyDict_New()))
        goto done;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *node = PyList_GET_ITEM(nodes, k);
        if (k == 0) fx_layout(e.node_type);
        PyObject *op = fx_attr(node, FX_OP);
        if (op == NULL) goto done;
        int is_output = PyUnicode_Check(op) && PyUnicode_CompareWithASCIIString(op, "output") == 0;
        int is_call = str_eq(op, s_call_function);
        int is_leaf = !is_call && (str_eq(op, s_placeholder) || str_eq(op, s_get_attr));
        if (is_output) {
            Py_DECREF(op);
            PyObject *outs = PyObject_CallOneArg(output_nodes, node);
            if (outs == NULL) goto done;
            int bad = !PyList_Check(outs);
            for (Py_ssize_t i = 0; !bad && i < PyList_GET_SIZE(outs); i++)
                bad = PyList_Append(outputs, PyList_GET_ITEM(outs, i)) < 0;
            Py_DECREF(outs);
            if (bad) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "encode_fx: outputs");
                goto done;
            }
            continue;
        }
        PyObject *target = fx_attr(node, FX_TARGET);
        if (target == NULL) { Py_DECREF(op); goto done; }
        if (is_call && target == assert_target) { Py_DECREF(op); Py_DECREF(target); continue; }
        PyObject *it = NULL, *hit = PyDict_GetItemWithError(cache, node);
        PyObject *args = fx_attr(node, FX_ARGS), *kwargs = fx_attr(node, FX_KWARGS);
        if (PyErr_Occurred() || args == NULL || kwargs == NULL) {
            Py_XDECREF(args); Py_XDECREF(kwargs); Py_DECREF(target); Py_DECREF(op);
            goto done;
        }
        if (hit != NULL && PyTuple_Check(hit) && PyTuple_GET_SIZE(hit) == 4
            && PyTuple_GET_ITEM(hit, 2) == target && PyTuple_GET_ITEM(hit, 0) == args
            && PyTuple_GET_ITEM(hit, 1) == kwargs)
            it = Py_NewRef(PyTuple_GET_ITEM(hit, 3));
        else if (use_fast && (is_call || is_leaf)) {
            it = is_call ? fast_node(&fast, node, e.node_type, target, args, kwargs)
                         : fast_leaf(&fast, node, op, target, args, kwargs);
            if (it == NULL) PyErr_Clear(); /* not the common case (or it failed): _node's */
        }
        Py_DECREF(args); Py_DECREF(kwargs); Py_DECREF(target); Py_DECREF(op);
        if (it == NULL && !(it = PyObject_CallOneArg(node_info, node))) goto done;
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 5
            || !PyList_Check(PyTuple_GET_ITEM(it, 1)) || !PyTuple_Check(PyTuple_GET_ITEM(it, 3))) {
            Py_DECREF(it);
            PyErr_SetString(PyExc_TypeError, "encode_fx: malformed node info");
            goto done;
        }
        PyObject *mo = PyLong_FromSsize_t(m);
        if (mo == NULL || PyDict_SetItem(pos, node, mo) < 0) { Py_XDECREF(mo); Py_DECREF(it); goto done; }
        Py_DECREF(mo);
        info[m] = it;
        fx[m] = node;
        m++;
        int pure = PyObject_IsTrue(PyTuple_GET_ITEM(it, 2));
        if (pure < 0) goto done;
        if (!pure && PyList_Append(impure, node) < 0) goto done;
    }
    /* the nodes the outputs and the impure nodes reach */
    Py_ssize_t sp = 0;
#define PUSH_ROOTS(list)                                                                     \
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {                                 \
        PyObject *p = PyDict_GetItemWithError(pos, PyList_GET_ITEM(list, i));                \
        if (p == NULL) { if (PyErr_Occurred()) goto done; continue; }                         \
        Py_ssize_t q = PyLong_AsSsize_t(p);                                                  \
        if (!keep[q]) { keep[q] = 1; stack[sp++] = q; }                                      \
    }
    PUSH_ROOTS(outputs)
    PUSH_ROOTS(impure)
#undef PUSH_ROOTS
    while (sp > 0) {
        Py_ssize_t q = stack[--sp];
        PyObject *kids = PyTuple_GET_ITEM(info[q], 1);
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(kids); i++) {
            PyObject *p = PyDict_GetItemWithError(pos, PyList_GET_ITEM(kids, i));
            if (p == NULL) { if (PyErr_Occurred()) goto done; continue; }
            Py_ssize_t r = PyLong_AsSsize_t(p);
            if (!keep[r]) { keep[r] = 1; stack[sp++] = r; }
        }
    }
    if (before_index != Py_None) {
        /* the graph after a pass: also what the graph before it encoded, and
         * what the pass created (but leaves, the program's interface, only
         * when used), and what those use */
        for (Py_ssize_t q = 0; q < m; q++) {
            if (keep[q]) continue;
            PyObject *op = fx_attr(fx[q], FX_OP);
            if (op == NULL) goto done;
            int leaf = str_eq(op, s_placeholder) || str_eq(op, s_get_attr);
            Py_DECREF(op);
            if (leaf) continue;
            int in_before = PyDict_Contains(before_index, fx[q]);
            if (in_before < 0) goto done;
            int in_known = in_before ? 1 : PySet_Contains(known, fx[q]);
            if (in_known < 0) goto done;
            if (in_before || !in_known) keep[q] = 2;
        }
        for (Py_ssize_t q = m - 1; q >= 0; q--) {
            if (!keep[q]) continue;
            PyObject *kids = PyTuple_GET_ITEM(info[q], 1);
            for (Py_ssize_t i = 0; i < PyList_GET_SIZE(kids); i++) {
                PyObject *p = PyDict_GetItemWithError(pos, PyList_GET_ITEM(kids, i));
                if (p == NULL) { if (PyErr_Occurred()) goto done; continue; }
                keep[PyLong_AsSsize_t(p)] = 1;
            }
        }
    }
    if (!(e.labels = PyList_New(0)) || !(e.args = PyList_New(0)) || !(e.names = PyList_New(0))
        || !(e.keys = PyList_New(0)) || !(e.index = PyDict_New())
        || !(e.mergeable = PyList_New(0)) || !(e.syms = PyList_New(0))
        || !(e.list_labels = PyDict_New()))
        goto done;
    for (Py_ssize_t q = 0; q < m; q++) {
        if (!keep[q]) continue;
        PyObject *it = info[q], *specs = PyTuple_GET_ITEM(it, 3);
        Py_ssize_t ns = PyTuple_GET_SIZE(specs);
        for (Py_ssize_t i = 0; i < ns; i++) { /* its constants and lists first */
            PyObject *s = PyTuple_GET_ITEM(specs, i);
            if ((PyObject *)Py_TYPE(s) == e.node_type) continue;
            PyObject *x = enc_emit(&e, s, PyList_GET_SIZE(e.labels), 0);
            if (x == NULL) goto done;
            Py_DECREF(x);
        }
        Py_ssize_t i0 = PyList_GET_SIZE(e.labels);
        PyObject *args = PyTuple_New(ns);
        if (args == NULL) goto done;
        for (Py_ssize_t i = 0; i < ns; i++) {
            /* an argument not listed before its user (a cycle, a use before
             * the definition): its own index, which the validator refuses */
            PyObject *x = PyDict_GetItemWithError(e.index, PyTuple_GET_ITEM(specs, i));
            if (x != NULL) Py_INCREF(x);
            else if (!PyErr_Occurred()) x = PyLong_FromSsize_t(i0);
            if (x == NULL) { Py_DECREF(args); goto done; }
            PyTuple_SET_ITEM(args, i, x);
        }
        int pure = PyObject_IsTrue(PyTuple_GET_ITEM(it, 2));
        PyObject *op = fx_attr(fx[q], FX_OP), *name = fx_attr(fx[q], FX_NAME);
        Py_ssize_t at = -1;
        if (pure >= 0 && op != NULL && name != NULL)
            at = enc_append(&e, fx[q], PyTuple_GET_ITEM(it, 0), args, name,
                            pure && str_eq(op, s_call_function), PyTuple_GET_ITEM(it, 4));
        Py_XDECREF(op); Py_XDECREF(name); Py_DECREF(args);
        if (at < 0) goto done;
    }
    result = PyTuple_Pack(9, e.labels, e.args, e.names, e.keys, e.index, e.mergeable, e.syms,
                          outputs, impure);
done:
    if (info != NULL)
        for (Py_ssize_t q = 0; q < m; q++) Py_XDECREF(info[q]);
    PyMem_Free(info); PyMem_Free(fx); PyMem_Free(keep); PyMem_Free(stack);
    Py_XDECREF(outputs); Py_XDECREF(impure); Py_XDECREF(pos);
    Py_XDECREF(e.labels); Py_XDECREF(e.args); Py_XDECREF(e.names); Py_XDECREF(e.keys);
    Py_XDECREF(e.index); Py_XDECREF(e.mergeable); Py_XDECREF(e.syms); Py_XDECREF(e.list_labels);
    return result;
}

/* ------------------------------------------------------------ engine words */
/* engine_graph(nodes, ctx, tabs, helper, leaf_classes, sym_attr, magic,
 * version, opclass) reads an FX graph's node list once
 * and writes the engine's graph encoding of its term graph directly
 * (docs/internals/format.md: per term its label, child count, child ids,
 * attribute count and (attribute, value) pairs), hash-consing the terms in a
 * C table: no Python term graph, no Node objects. The terms, their order and
 * their ids are TermGraph.build's (tests/test_engine_words.py compares the
 * words with TermGraph(...).build().graph.encode()) for the nodes it reads:
 * placeholders and get_attr nodes (input leaves), calls of an op overload
 * or operator.getitem that fit their schema, other calls (opaque operators,
 * never shared), the output node; their arguments nodes, constants, lists
 * of constants, lists holding nodes and objects with no constant form (an
 * input named by the object's id, as TermGraph.arg makes it).
 * ``tabs`` = (targets: id(target) -> (target, symbol, pure, arity), consts:
 * importer._const_cache_key -> symbol, inputs: "<op>:<name>" -> symbol,
 * lists: n -> symbol of list<n>, outputs: n -> symbol, types: the
 * importer's (sizes, dtype) -> (shape, dtype, attributes)); a miss asks
 * ``helper`` (learn_target(node), learn_const(a), learn_input(name),
 * learn_list(n), learn_output(n), learn_opaque(node, n),
 * learn_opaque_input(a) -- each the symbol, or None where the import would
 * not make a plain term -- _type(val), call_args(node), opaque_args(node),
 * flatten(args)).
 * The words end with the labels' operator classes (Graph.sym_attrs: a
 * leaf's from ``leaf_classes``, core.graph._LEAF_CLASS, another's
 * sym_attr(symbol)) and begin with the header (``magic``, ``version``, the
 * number of terms); ``opclass`` is the attribute id of the class.
 * Returns (the words as bytes, the term id of each node of ``nodes``, per
 * term its origin -- the first FX node, a constant's first value, Ellipsis
 * for a list), or None when a node's arguments do not fit its operator (the
 * import raises there: the caller imports in Python). */

#define EG_RECENT 8

typedef struct {
    int64_t *w; Py_ssize_t n, cap;                                      /* the words */
    int64_t *label, *type; Py_ssize_t *koff, *kn; Py_ssize_t nt, tcap;  /* per term */
    int64_t *kids; Py_ssize_t nk, kcap;                                 /* child ids */
    Py_ssize_t *slot; Py_ssize_t scap, used;                            /* hash-consing */
    int64_t *tw; Py_ssize_t ntw, twcap;                                 /* attribute words */
    Py_ssize_t *toff, *tlen; Py_ssize_t ntype, typecap;                 /* per type */
    PyObject *recent[EG_RECENT]; Py_ssize_t recent_id[EG_RECENT]; int recent_next;
} EG;

static void eg_free(EG *g) {
    PyMem_Free(g->w); PyMem_Free(g->label); PyMem_Free(g->type); PyMem_Free(g->koff);
    PyMem_Free(g->kn); PyMem_Free(g->kids); PyMem_Free(g->slot); PyMem_Free(g->tw);
    PyMem_Free(g->toff); PyMem_Free(g->tlen);
    for (int i = 0; i < EG_RECENT; i++) Py_CLEAR(g->recent[i]);
}

static int eg_realloc(void **p, Py_ssize_t n, size_t sz) {
    void *q = PyMem_Realloc(*p, (size_t)n * sz);
    if (q == NULL) { PyErr_NoMemory(); return -1; }
    *p = q;
    return 0;
}

/* the new capacity (a power of two >= need) when cap is short, else 0 */
static Py_ssize_t eg_more(Py_ssize_t cap, Py_ssize_t need) {
    if (need <= cap) return 0;
    Py_ssize_t c = cap ? cap : 256;
    while (c < need) c *= 2;
    return c;
}

static int eg_word(EG *g, int64_t v) {
    Py_ssize_t c = eg_more(g->cap, g->n + 1);
    if (c) {
        if (eg_realloc((void **)&g->w, c, sizeof(int64_t)) < 0) return -1;
        g->cap = c;
    }
    g->w[g->n++] = v;
    return 0;
}

static uint64_t eg_hash(int64_t label, int64_t type, const int64_t *kids, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)label;
    h = (h ^ (uint64_t)type) * 1099511628211ULL;
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ (uint64_t)kids[i]) * 1099511628211ULL;
    return h ^ (h >> 29);
}

static int eg_rehash(EG *g, Py_ssize_t cap) {
    Py_ssize_t *s = PyMem_Malloc((size_t)cap * sizeof(Py_ssize_t));
    if (s == NULL) { PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = 0; i < cap; i++) s[i] = -1;
    for (Py_ssize_t i = 0; i < g->scap; i++) {
        Py_ssize_t t = g->slot[i];
        if (t < 0) continue;
        uint64_t h = eg_hash(g->label[t], g->type[t], g->kids + g->koff[t], g->kn[t]);
        Py_ssize_t j = (Py_ssize_t)(h & (uint64_t)(cap - 1));
        while (s[j] >= 0) j = (j + 1) & (cap - 1);
        s[j] = t;
    }
    PyMem_Free(g->slot);
    g->slot = s;
    g->scap = cap;
    return 0;
}

/* The term (label, type, kids): the equal one made before (hash-consing),
 * else a new one, its words written; ``distinct``: always a new one, never
 * shared (an impure call, an input, the output). Its id, or -1 (error). */
static Py_ssize_t eg_term(EG *g, int64_t label, Py_ssize_t type, const int64_t *kids,
                          Py_ssize_t n, int distinct) {
    Py_ssize_t j = -1;
    if (!distinct) {
        if (2 * (g->used + 1) > g->scap && eg_rehash(g, g->scap ? 2 * g->scap : 1024) < 0)
            return -1;
        uint64_t h = eg_hash(label, type, kids, n);
        for (j = (Py_ssize_t)(h & (uint64_t)(g->scap - 1));; j = (j + 1) & (g->scap - 1)) {
            Py_ssize_t t = g->slot[j];
            if (t < 0) break;
            if (g->label[t] == label && g->type[t] == type && g->kn[t] == n
                && (n == 0 || memcmp(g->kids + g->koff[t], kids, (size_t)n * sizeof(int64_t)) == 0))
                return t;
        }
    }
    Py_ssize_t t = g->nt, c = eg_more(g->tcap, t + 1);
    if (c) {
        if (eg_realloc((void **)&g->label, c, sizeof(int64_t)) < 0
            || eg_realloc((void **)&g->type, c, sizeof(int64_t)) < 0
            || eg_realloc((void **)&g->koff, c, sizeof(Py_ssize_t)) < 0
            || eg_realloc((void **)&g->kn, c, sizeof(Py_ssize_t)) < 0)
            return -1;
        g->tcap = c;
    }
    c = eg_more(g->kcap, g->nk + n);
    if (c) {
        if (eg_realloc((void **)&g->kids, c, sizeof(int64_t)) < 0) return -1;
        g->kcap = c;
    }
    if (n) memcpy(g->kids + g->nk, kids, (size_t)n * sizeof(int64_t));
    g->label[t] = label; g->type[t] = type; g->koff[t] = g->nk; g->kn[t] = n;
    g->nk += n;
    g->nt++;
    if (!distinct) { g->slot[j] = t; g->used++; }
    Py_ssize_t na = g->tlen[type];
    if (eg_word(g, label) < 0 || eg_word(g, n) < 0) return -1;
    for (Py_ssize_t i = 0; i < n; i++) if (eg_word(g, kids[i]) < 0) return -1;
    if (eg_word(g, na) < 0) return -1;
    for (Py_ssize_t i = 0; i < 2 * na; i++)
        if (eg_word(g, g->tw[g->toff[type] + i]) < 0) return -1;
    return t;
}

static Py_ssize_t eg_type_of(EG *g, PyObject *ids, PyObject *attrs);

/* The id of the tensor type whose attributes are ``attrs`` (a tuple of
 * (attribute, value) pairs; equal tuples, one id), its words kept. -1: error,
 * -2: a value outside int64 (the caller gives up: the Python path raises) */
static Py_ssize_t eg_type(EG *g, PyObject *ids, PyObject *attrs) {
    /* the last few attribute objects seen (nodes of one tensor type share
     * one, importer._static_types) before the table keyed by content */
    for (int i = 0; i < EG_RECENT; i++)
        if (g->recent[i] == attrs) return g->recent_id[i];
    Py_ssize_t k = eg_type_of(g, ids, attrs);
    if (k >= 0) {
        int i = g->recent_next;
        g->recent_next = (i + 1) % EG_RECENT;
        Py_XSETREF(g->recent[i], Py_NewRef(attrs));
        g->recent_id[i] = k;
    }
    return k;
}

static Py_ssize_t eg_type_of(EG *g, PyObject *ids, PyObject *attrs) {
    PyObject *hit = PyDict_GetItemWithError(ids, attrs);
    if (hit != NULL) return PyLong_AsSsize_t(hit);
    if (PyErr_Occurred()) return -1;
    if (!PyTuple_Check(attrs)) return -2;
    Py_ssize_t na = PyTuple_GET_SIZE(attrs), k = g->ntype, c = eg_more(g->typecap, k + 1);
    if (c) {
        if (eg_realloc((void **)&g->toff, c, sizeof(Py_ssize_t)) < 0
            || eg_realloc((void **)&g->tlen, c, sizeof(Py_ssize_t)) < 0)
            return -1;
        g->typecap = c;
    }
    c = eg_more(g->twcap, g->ntw + 2 * na);
    if (c) {
        if (eg_realloc((void **)&g->tw, c, sizeof(int64_t)) < 0) return -1;
        g->twcap = c;
    }
    for (Py_ssize_t i = 0; i < na; i++) {
        PyObject *p = PyTuple_GET_ITEM(attrs, i);
        if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) != 2) return -2;
        for (int e = 0; e < 2; e++) {
            int over = 0;
            long long v = PyLong_Check(PyTuple_GET_ITEM(p, e))
                              ? PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(p, e), &over)
                              : (over = 1, 0);
            if (v == -1 && PyErr_Occurred()) return -1;
            if (over) return -2;
            g->tw[g->ntw + 2 * i + e] = v;
        }
    }
    g->toff[k] = g->ntw; g->tlen[k] = na;
    g->ntw += 2 * na;
    g->ntype++;
    PyObject *kid = PyLong_FromSsize_t(k);
    if (kid == NULL || PyDict_SetItem(ids, attrs, kid) < 0) { Py_XDECREF(kid); return -1; }
    Py_DECREF(kid);
    return k;
}

typedef struct {
    EG g;
    Ctx *c;
    St st;                /* for call_args and type_of: types and tg (the helper); no calls */
    PyObject *targets, *consts, *inputs, *lists, *outputs, *helper;
    PyObject *term_of;    /* FX node -> term id */
    PyObject *origin;     /* per term */
    PyObject *labels;     /* set */
    PyObject *type_ids;   /* attributes tuple -> type id */
    Py_ssize_t no_type;   /* the type id of no attributes */
} EW;

/* table[key], else helper.<learn>(arg) stored there: a new reference, Py_None
 * (a new reference) when the helper says None, NULL on error */
static PyObject *ew_lookup(EW *w, PyObject *table, PyObject *key, const char *learn,
                           PyObject *arg) {
    PyObject *v = PyDict_GetItemWithError(table, key);
    if (v != NULL) return Py_NewRef(v);
    if (PyErr_Occurred()) return NULL;
    v = PyObject_CallMethod(w->helper, learn, "O", arg);
    if (v != NULL && v != Py_None && PyDict_SetItem(table, key, v) < 0) Py_CLEAR(v);
    return v;
}

/* a new term's origin and label noted (0, or -1) */
static int ew_note(EW *w, Py_ssize_t t, int64_t label, PyObject *origin) {
    if (t < PyList_GET_SIZE(w->origin)) return 0; /* not new */
    if (PyList_Append(w->origin, origin) < 0) return -1;
    PyObject *l = PyLong_FromLongLong(label);
    int r = l == NULL ? -1 : PySet_Add(w->labels, l);
    Py_XDECREF(l);
    return r;
}

/* the symbol in ``v`` (a new reference from ew_lookup, consumed): 1 and
 * *out, 0 (None: give up), -1 (error) */
static int ew_symbol(PyObject *v, int64_t *out) {
    if (v == NULL) return -1;
    if (v == Py_None || !PyLong_Check(v)) { Py_DECREF(v); return 0; }
    long long s = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (s == -1 && PyErr_Occurred()) return -1;
    *out = s;
    return 1;
}

static int ew_is_flat(EW *w, PyObject *a) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(a);
    for (Py_ssize_t i = 0; i < n; i++) {
        int r = PySet_Contains(w->c->scalar_types,
                               (PyObject *)Py_TYPE(PySequence_Fast_GET_ITEM(a, i)));
        if (r <= 0) return r;
    }
    return 1;
}

static int ew_has_node(EW *w, PyObject *a, int depth) {
    if (depth > 50) return -2;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(a);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PySequence_Fast_GET_ITEM(a, i);
        if ((PyObject *)Py_TYPE(e) == w->c->fx_node_type) return 1;
        if (PyObject_TypeCheck(e, (PyTypeObject *)w->c->fx_node_type)) return -2; /* a subclass */
        if (PyList_Check(e) || PyTuple_Check(e)) {
            int r = ew_has_node(w, e, depth + 1);
            if (r != 0) return r;
        } else if (PyDict_Check(e)) {
            return -2; /* a dict: the Python import's */
        }
    }
    return 0;
}

static Py_ssize_t ew_arg(EW *w, PyObject *a, int depth);

/* The term ids of the items of ``items`` (a list or tuple) into *kids: the
 * caller's 16-slot ``stack``, or a new buffer when longer (the caller frees
 * *kids when it is not ``stack``). Their number, or -1 (error), -2 (not read
 * here). The length is read again at each item (a method ew_arg calls could
 * change the list). */
static Py_ssize_t ew_kids(EW *w, PyObject *items, int depth, int64_t **kids, int64_t *stack) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(items);
    *kids = stack;
    if (n > 16 && !(*kids = PyMem_Malloc(n * sizeof(int64_t)))) {
        *kids = stack;
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i >= PySequence_Fast_GET_SIZE(items)) return -2; /* changed under us */
        PyObject *e = Py_NewRef(PySequence_Fast_GET_ITEM(items, i));
        Py_ssize_t k = ew_arg(w, e, depth);
        Py_DECREF(e);
        if (k < 0) return k;
        (*kids)[i] = k;
    }
    return n;
}

/* The type id of ``node``'s metadata (TermGraph._type), *val and *typ set
 * (new references, released by the caller): >= 0, -1 (error), -2 (a value
 * outside int64: not read here) */
static Py_ssize_t ew_node_type(EW *w, PyObject *node, PyObject **val, PyObject **typ) {
    Py_CLEAR(*val);
    Py_CLEAR(*typ);
    if (!(*val = meta_val(node)) || !(*typ = type_of(&w->st, w->c, *val))) return -1;
    return eg_type(&w->g, w->type_ids, PyTuple_GET_ITEM(*typ, 2));
}

/* The term id of an argument ``a`` (TermGraph.arg): >= 0, -1 (error), -2
 * (not read here) */
static Py_ssize_t ew_arg(EW *w, PyObject *a, int depth) {
    PyObject *tp = (PyObject *)Py_TYPE(a);
    if (tp == w->c->fx_node_type) {
        PyObject *t = PyDict_GetItemWithError(w->term_of, a);
        if (t == NULL) return PyErr_Occurred() ? -1 : -2; /* a use before its definition */
        return PyLong_AsSsize_t(t);
    }
    if (PyObject_TypeCheck(a, (PyTypeObject *)w->c->fx_node_type)) return -2; /* a subclass */
    PyObject *key = NULL;
    int scalar = PySet_Contains(w->c->scalar_types, tp);
    if (scalar < 0) return -1;
    if (scalar) {
        key = scalar_key(tp, a);
    } else if (PyList_Check(a) || PyTuple_Check(a)) {
        if (depth > 50) return -2;
        int flat = ew_is_flat(w, a);
        if (flat < 0) return -1;
        if (flat) {
            Fast f = {.scalars = w->c->scalar_types};
            key = flat_const_key(&f, a); /* _const_cache_key's flat case */
            if (key == NULL && !PyErr_Occurred()) return -2;
        } else {
            int h = ew_has_node(w, a, 0);
            if (h < 0) return h == -2 ? -2 : -1;
            if (h) { /* list<n> over its elements' terms (TermGraph.arg) */
                int64_t sym, stackk[16], *kids;
                Py_ssize_t n = ew_kids(w, a, depth + 1, &kids, stackk), r = n;
                if (r >= 0) {
                    PyObject *nn = PyLong_FromSsize_t(n);
                    int s = nn == NULL ? -1 : ew_symbol(ew_lookup(w, w->lists, nn, "learn_list", nn), &sym);
                    Py_XDECREF(nn);
                    if (s <= 0) r = s == 0 ? -2 : -1;
                    else {
                        r = eg_term(&w->g, sym, w->no_type, kids, n, 0);
                        if (r >= 0 && ew_note(w, r, sym, Py_Ellipsis) < 0) r = -1;
                    }
                }
                if (kids != stackk) PyMem_Free(kids);
                return r;
            }
            key = NULL; /* a nested list of constants: the helper's own table */
        }
    } else {
        key = NULL; /* not a plain constant: the helper's (an opaque input at worst) */
    }
    int64_t sym;
    int s;
    if (key != NULL) {
        s = ew_symbol(ew_lookup(w, w->consts, key, "learn_const", a), &sym);
        Py_DECREF(key);
    } else {
        if (PyErr_Occurred()) return -1;
        s = ew_symbol(PyObject_CallMethod(w->helper, "learn_const", "O", a), &sym);
    }
    if (s == 0) /* no constant form: the import's opaque input of the object */
        s = ew_symbol(PyObject_CallMethod(w->helper, "learn_opaque_input", "O", a), &sym);
    if (s <= 0) return s == 0 ? -2 : -1;
    Py_ssize_t t = eg_term(&w->g, sym, w->no_type, NULL, 0, 0);
    if (t >= 0 && ew_note(w, t, sym, a) < 0) return -1;
    return t;
}

/* the term of one FX node: >= 0, -1 (error), -2 (not read here) */
static Py_ssize_t ew_node(EW *w, PyObject *node) {
    Ctx *c = w->c;
    PyObject *kind = fx_attr(node, FX_OP);
    if (kind == NULL) return -1;
    Py_ssize_t t = -2;
    int64_t sym = 0, stackk[16], *kids = stackk;
    PyObject *target = NULL, *tid = NULL, *ent = NULL, *pos = NULL, *val = NULL, *typ = NULL,
             *name = NULL, *flat = NULL;
    if (str_eq(kind, s_call_function)) {
        if (!(target = fx_attr(node, FX_TARGET)) || !(tid = PyLong_FromVoidPtr(target))) goto fail;
        ent = PyDict_GetItemWithError(w->targets, tid);
        if (ent != NULL && PyTuple_Check(ent) && PyTuple_GET_SIZE(ent) == 4
            && PyTuple_GET_ITEM(ent, 0) == target) {
            Py_INCREF(ent);
        } else {
            if (PyErr_Occurred()) goto fail;
            ent = PyObject_CallMethod(w->helper, "learn_target", "O", node);
            if (ent == NULL) goto fail;
            if (ent == Py_None) goto opaque; /* not an operator: an opaque call */
            if (!PyTuple_Check(ent) || PyTuple_GET_SIZE(ent) != 4
                || PyTuple_GET_ITEM(ent, 0) != target)
                goto done;
            if (PyDict_SetItem(w->targets, tid, ent) < 0) goto fail;
        }
        int pure = PyObject_IsTrue(PyTuple_GET_ITEM(ent, 2));
        if (pure < 0) goto fail;
        int s = ew_symbol(Py_NewRef(PyTuple_GET_ITEM(ent, 1)), &sym);
        if (s <= 0) { t = s == 0 ? -2 : -1; goto done; }
        Py_ssize_t arity = PyLong_Check(PyTuple_GET_ITEM(ent, 3))
                               ? PyLong_AsSsize_t(PyTuple_GET_ITEM(ent, 3)) : -1;
        if (arity == -1 && PyErr_Occurred()) goto fail;
        if (!(pos = call_args(&w->st, c, node, target, tid))) goto fail;
        if (!PyList_Check(pos)) goto opaque; /* fits no schema: an opaque call */
        if (PyList_GET_SIZE(pos) != arity) goto done; /* the import raises: Python's */
        Py_ssize_t ty = ew_node_type(w, node, &val, &typ);
        if (ty < 0) { t = ty; goto done; }
        Py_ssize_t n = ew_kids(w, pos, 0, &kids, stackk);
        if (n < 0) { t = n; goto done; }
        t = eg_term(&w->g, sym, ty, kids, n, !pure);
    } else if (PyUnicode_Check(kind)
               && (PyUnicode_CompareWithASCIIString(kind, "call_method") == 0
                   || PyUnicode_CompareWithASCIIString(kind, "call_module") == 0)) {
        goto opaque;
    } else if (str_eq(kind, s_placeholder) || str_eq(kind, s_get_attr)) {
        PyObject *nm = fx_attr(node, FX_NAME);
        if (nm == NULL) goto fail;
        name = PyUnicode_Check(nm) ? PyUnicode_FromFormat("%U:%U", kind, nm) : NULL;
        Py_DECREF(nm);
        if (name == NULL) { if (PyErr_Occurred()) goto fail; goto done; }
        int s = ew_symbol(ew_lookup(w, w->inputs, name, "learn_input", name), &sym);
        if (s <= 0) { t = s == 0 ? -2 : -1; goto done; }
        Py_ssize_t ty = ew_node_type(w, node, &val, &typ);
        if (ty < 0) { t = ty; goto done; }
        t = eg_term(&w->g, sym, ty, NULL, 0, 1); /* one input per name */
    } else if (PyUnicode_Check(kind) && PyUnicode_CompareWithASCIIString(kind, "output") == 0) {
        /* an opaque output<n> over the flattened arguments, never shared */
        PyObject *args = fx_attr(node, FX_ARGS);
        if (args == NULL) goto fail;
        flat = PyObject_CallMethod(w->helper, "flatten", "O", args);
        Py_DECREF(args);
        if (flat == NULL) goto fail;
        if (!PyList_Check(flat)) goto done;
        Py_ssize_t n = ew_kids(w, flat, 0, &kids, stackk);
        if (n < 0) { t = n; goto done; }
        PyObject *nn = PyLong_FromSsize_t(n);
        int s = nn == NULL ? -1 : ew_symbol(ew_lookup(w, w->outputs, nn, "learn_output", nn), &sym);
        Py_XDECREF(nn);
        if (s <= 0) { t = s == 0 ? -2 : -1; goto done; }
        t = eg_term(&w->g, sym, w->no_type, kids, n, 1);
    }
    goto noted;
opaque: {
    /* a call the import reads as an opaque operator (a Python callable, a
     * call that fits no schema, a method or module call): over its
     * arguments, then its keyword arguments' values, never shared, typed by
     * its metadata (TermGraph.import_node) */
    Py_CLEAR(flat);
    if (!(flat = PyObject_CallMethod(w->helper, "opaque_args", "O", node))) goto fail;
    if (!PyList_Check(flat)) goto done;
    Py_ssize_t n = ew_kids(w, flat, 0, &kids, stackk);
    if (n < 0) { t = n; goto done; }
    int s = ew_symbol(PyObject_CallMethod(w->helper, "learn_opaque", "On", node, n), &sym);
    if (s <= 0) { t = s == 0 ? -2 : -1; goto done; }
    Py_ssize_t ty = ew_node_type(w, node, &val, &typ);
    if (ty < 0) { t = ty; goto done; }
    t = eg_term(&w->g, sym, ty, kids, n, 1);
}
noted:
    if (t >= 0 && ew_note(w, t, sym, node) < 0) goto fail;
    goto done;
fail:
    t = -1;
done:
    if (kids != stackk) PyMem_Free(kids);
    Py_DECREF(kind);
    Py_XDECREF(target); Py_XDECREF(tid); Py_XDECREF(ent); Py_XDECREF(pos); Py_XDECREF(val);
    Py_XDECREF(typ); Py_XDECREF(name); Py_XDECREF(flat);
    return t;
}

static PyObject *engine_graph(PyObject *self, PyObject *a) {
    PyObject *nodes, *ctx, *tabs, *helper, *leaf_classes, *sym_attr, *sorted = NULL;
    long long magic, version, opclass;
    if (!PyArg_ParseTuple(a, "O!OO!OO!OLLL:engine_graph", &PyList_Type, &nodes, &ctx,
                          &PyTuple_Type, &tabs, &helper, &PyDict_Type, &leaf_classes,
                          &sym_attr, &magic, &version, &opclass))
        return NULL;
    Ctx c;
    EW w;
    memset(&w, 0, sizeof(w));
    if (ctx_load(&c, ctx) < 0) return NULL;
    if (PyTuple_GET_SIZE(tabs) != 6) {
        PyErr_SetString(PyExc_TypeError, "engine_graph: tabs must be a tuple of 6 dicts");
        return NULL;
    }
    for (int i = 0; i < 6; i++)
        if (!PyDict_Check(PyTuple_GET_ITEM(tabs, i))) {
            PyErr_SetString(PyExc_TypeError, "engine_graph: tabs must be a tuple of 6 dicts");
            return NULL;
        }
    w.c = &c;
    w.targets = PyTuple_GET_ITEM(tabs, 0); w.consts = PyTuple_GET_ITEM(tabs, 1);
    w.inputs = PyTuple_GET_ITEM(tabs, 2); w.lists = PyTuple_GET_ITEM(tabs, 3);
    w.outputs = PyTuple_GET_ITEM(tabs, 4);
    w.st.types = PyTuple_GET_ITEM(tabs, 5);
    w.st.tg = w.helper = helper;
    PyObject *result = NULL, *ids = NULL;
    if (!(w.term_of = PyDict_New())
        || !(w.origin = PyList_New(0)) || !(w.labels = PySet_New(NULL))
        || !(w.type_ids = PyDict_New()) || !(ids = PyList_New(PyList_GET_SIZE(nodes))))
        goto done;
    if ((w.no_type = eg_type(&w.g, w.type_ids, empty_tuple)) < 0) goto done;
    fx_layout(c.fx_node_type);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(ids); i++) {
        if (i >= PyList_GET_SIZE(nodes)) {
            PyErr_SetString(PyExc_RuntimeError, "engine_graph: the node list changed");
            goto done;
        }
        PyObject *node = Py_NewRef(PyList_GET_ITEM(nodes, i));
        Py_ssize_t t = ew_node(&w, node);
        PyObject *tid = t >= 0 ? PyLong_FromSsize_t(t) : NULL;
        int bad = tid == NULL || PyDict_SetItem(w.term_of, node, tid) < 0;
        Py_DECREF(node);
        if (bad) {
            Py_XDECREF(tid);
            if (t == -2 && !PyErr_Occurred()) result = Py_NewRef(Py_None); /* not read here */
            goto done;
        }
        PyList_SET_ITEM(ids, i, tid);
    }
    /* the operators' classes (Graph.sym_attrs): a leaf's from the process's
     * table, another's from sym_attr(symbol) */
    if (!(sorted = PySequence_List(w.labels)) || PyList_Sort(sorted) < 0) goto done;
    Py_ssize_t nl = PyList_GET_SIZE(sorted), at = w.g.n, count = 0;
    if (eg_word(&w.g, 0) < 0) goto done;
    for (Py_ssize_t i = 0; i < nl; i++) {
        PyObject *sym = PyList_GET_ITEM(sorted, i);
        PyObject *v = PyDict_GetItemWithError(leaf_classes, sym);
        if (v != NULL) Py_INCREF(v);
        else if (PyErr_Occurred() || !(v = PyObject_CallOneArg(sym_attr, sym))) goto done;
        if (v == Py_None) { Py_DECREF(v); continue; }
        int over = 0;
        long long code = PyLong_Check(v) ? PyLong_AsLongLongAndOverflow(v, &over) : (over = 1, 0);
        Py_DECREF(v);
        if (code == -1 && PyErr_Occurred()) goto done;
        if (over) { result = Py_NewRef(Py_None); goto done; } /* not a class code: Python's */
        if (eg_word(&w.g, PyLong_AsLongLong(sym)) < 0 || eg_word(&w.g, opclass) < 0
            || eg_word(&w.g, code) < 0)
            goto done;
        count++;
    }
    w.g.w[at] = count;
    PyObject *words = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)((w.g.n + 3) * sizeof(int64_t)));
    if (words != NULL) {
        int64_t *out = (int64_t *)PyBytes_AS_STRING(words);
        out[0] = magic; out[1] = version; out[2] = w.g.nt;
        memcpy(out + 3, w.g.w, (size_t)w.g.n * sizeof(int64_t));
        result = PyTuple_Pack(3, words, ids, w.origin);
    }
    Py_XDECREF(words);
done:
    eg_free(&w.g);
    Py_XDECREF(w.term_of); Py_XDECREF(w.origin); Py_XDECREF(w.labels);
    Py_XDECREF(w.type_ids); Py_XDECREF(ids); Py_XDECREF(sorted);
    return result;
}

/* ----------------------------------------------------------------- matching */

/* The engine library's pypm_match (pypm_verified.h), called through its
 * address: no Python frame and no cffi conversion per pattern. */
typedef int (*pypm_match_fn)(int64_t graph, int64_t patterns, int64_t pattern_index,
                             int64_t root, int64_t fuel, int64_t *out, size_t out_cap,
                             size_t *out_len);

/* first_match(fn, graph, patterns, root, fuel, indices, start, no_match, cap)
 * calls pypm_match (at address fn) for pattern indices[start], indices[start+1],
 * ... at node ``root`` until one answers other than ``no_match`` (a status
 * word): returns (position, words) with the answer's words, or (position,
 * None) when the call returned an error code or needed more than ``cap``
 * words (the caller asks again through its own path, which raises or
 * retries), or None when none answered. */
static PyObject *first_match(PyObject *self, PyObject *a) {
    unsigned long long fn;
    long long graph, patterns, root, fuel, no_match;
    PyObject *indices;
    Py_ssize_t start, cap;
    if (!PyArg_ParseTuple(a, "KLLLLO!nLn:first_match", &fn, &graph, &patterns, &root, &fuel,
                          &PyTuple_Type, &indices, &start, &no_match, &cap))
        return NULL;
    if (fn == 0 || cap < 1 || cap > (1 << 24) || start < 0) {
        PyErr_SetString(PyExc_ValueError, "first_match: bad function address, capacity or start");
        return NULL;
    }
    pypm_match_fn call = (pypm_match_fn)(uintptr_t)fn;
    int64_t *out = PyMem_Malloc((size_t)cap * sizeof(int64_t));
    if (out == NULL) return PyErr_NoMemory();
    PyObject *res = NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(indices);
    for (Py_ssize_t k = start; k < n; k++) {
        PyObject *io = PyTuple_GET_ITEM(indices, k);
        long long i = PyLong_Check(io) ? PyLong_AsLongLong(io) : -1;
        if (i < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "first_match: an index is not an int >= 0");
            goto done;
        }
        size_t len = 0;
        int code = call(graph, patterns, i, root, fuel, out, (size_t)cap, &len);
        if (code == 0 && len >= 1 && out[0] == no_match) continue;
        if (code != 0 || len > (size_t)cap) {
            res = Py_BuildValue("(nO)", k, Py_None);
            goto done;
        }
        PyObject *words = PyTuple_New((Py_ssize_t)len);
        if (words == NULL) goto done;
        for (size_t j = 0; j < len; j++) {
            PyObject *w = PyLong_FromLongLong(out[j]);
            if (w == NULL) { Py_DECREF(words); goto done; }
            PyTuple_SET_ITEM(words, (Py_ssize_t)j, w);
        }
        res = Py_BuildValue("(nN)", k, words);
        goto done;
    }
    res = Py_NewRef(Py_None);
done:
    PyMem_Free(out);
    return res;
}


/* ---------------------------------------------------------------------------
 * read_unchanged: FxChecker._read_unchanged (pypm_verified/torch/validate_fx.py),
 * the per-firing reading of a match whose root's term changed in the pass,
 * natively. Returns the substitution list [(variable, before key)], None
 * where the Python method returns None, NotImplemented where an argument is
 * not of the shape this code reads (the method then reads it). */

#define RU_OTHER (-2) /* not this code's case: the caller reads it in Python */
#define RU_DEPTH 200

/* validate_fx._replaced_only(old, new, fired, key_of, node_type): 1, 0, -1
 * (an error), RU_OTHER */
static int replaced_only(PyObject *old, PyObject *new, PyObject *fired, PyObject *key_of,
                         PyObject *node_type, int depth) {
    if (old == new) return 1;
    if (depth > RU_DEPTH) return RU_OTHER;
    if ((PyObject *)Py_TYPE(old) == node_type) {
        PyObject *s = old;
        Py_ssize_t k = 0, nf = PyDict_GET_SIZE(fired);
        for (;;) {
            PyObject *r = PyDict_GetItemWithError(fired, s);
            if (r == NULL) {
                if (PyErr_Occurred()) return -1;
                break;
            }
            if (k > nf) break;
            s = r;
            k++;
        }
        if (s != new) return 0;
        PyObject *b = PyDict_GetItemWithError(key_of, new);
        if (b == NULL && PyErr_Occurred()) return -1;
        return b == old;
    }
    if (PyTuple_Check(old) || PyList_Check(old)) {
        if (!(PyTuple_Check(new) || PyList_Check(new))) return 0;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(old);
        if (PySequence_Fast_GET_SIZE(new) != n) return 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            /* a list may change under a comparison's Python code: read it again */
            if (i >= PySequence_Fast_GET_SIZE(old) || i >= PySequence_Fast_GET_SIZE(new))
                return RU_OTHER;
            PyObject *a = PySequence_Fast_GET_ITEM(old, i), *b = PySequence_Fast_GET_ITEM(new, i);
            Py_INCREF(a);
            Py_INCREF(b);
            int r = replaced_only(a, b, fired, key_of, node_type, depth + 1);
            Py_DECREF(a);
            Py_DECREF(b);
            if (r != 1) return r;
        }
        return 1;
    }
    return 0;
}

/* the node FX changed in the pass (args, kwargs other objects than at its
 * reading): only arguments a firing replaced, each by a binding standing for
 * it; 1, 0, -1, RU_OTHER */
static int ru_changed_only(PyObject *hit, PyObject *u, PyObject *fired, PyObject *key_of,
                           PyObject *node_type) {
    PyObject *old = PyTuple_GET_ITEM(hit, 1), *args = fx_attr(u, FX_ARGS);
    if (args == NULL) return -1;
    PyObject *new = fx_attr(u, FX_KWARGS);
    if (new == NULL) { Py_DECREF(args); return -1; }
    int r = RU_OTHER;
    if (!PyDict_Check(old) || !PyDict_Check(new)) goto done;
    /* list(old) != list(new): the keys, in order */
    r = 0;
    if (PyDict_GET_SIZE(old) != PyDict_GET_SIZE(new)) goto done;
    Py_ssize_t po = 0, pn = 0;
    PyObject *ko, *vo, *kn, *vn;
    while (PyDict_Next(old, &po, &ko, &vo)) {
        if (!PyDict_Next(new, &pn, &kn, &vn)) { r = RU_OTHER; goto done; }
        int eq = PyObject_RichCompareBool(ko, kn, Py_EQ);
        if (eq <= 0) { r = eq; goto done; }
        if (PyDict_GET_SIZE(old) != PyDict_GET_SIZE(new)) { r = RU_OTHER; goto done; }
    }
    r = replaced_only(PyTuple_GET_ITEM(hit, 0), args, fired, key_of, node_type, 0);
    if (r != 1) goto done;
    po = pn = 0;
    while (PyDict_Next(old, &po, &ko, &vo)) {
        if (!PyDict_Next(new, &pn, &kn, &vn)) { r = RU_OTHER; goto done; }
        Py_INCREF(vo);
        Py_INCREF(vn);
        r = replaced_only(vo, vn, fired, key_of, node_type, 0);
        Py_DECREF(vo);
        Py_DECREF(vn);
        if (r != 1) goto done;
    }
done:
    Py_DECREF(args);
    Py_DECREF(new);
    return r;
}

/* the position dict[key] names in list (*at): 1; 0 when key is not in dict;
 * RU_OTHER when it is not an index of list; -1 on an error */
static int ru_position(PyObject *dict, PyObject *key, PyObject *list, Py_ssize_t *at) {
    PyObject *j = PyDict_GetItemWithError(dict, key);
    if (j == NULL) return PyErr_Occurred() ? -1 : 0;
    *at = PyLong_Check(j) ? PyLong_AsSsize_t(j) : -1;
    if (*at < 0 || *at >= PyList_GET_SIZE(list)) return PyErr_Occurred() ? -1 : RU_OTHER;
    return 1;
}

static PyObject *read_unchanged(PyObject *self, PyObject *a) {
    PyObject *subst, *fx_of, *inv, *keys, *back, *index, *images, *known, *cache, *root, *fired,
        *node_type;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(a, "OOOOOOOOOOnOO:read_unchanged", &subst, &fx_of, &inv, &keys,
                          &back, &index, &images, &known, &cache, &root, &limit, &fired,
                          &node_type))
        return NULL;
    if (!PyDict_CheckExact(subst) || !PyDict_CheckExact(fx_of) || !PyDict_CheckExact(inv)
        || !PyList_CheckExact(keys) || !PyDict_CheckExact(back) || !PyDict_CheckExact(index)
        || !PyList_CheckExact(images) || !PySet_CheckExact(known) || !PyDict_CheckExact(cache)
        || !PyDict_CheckExact(fired))
        return Py_NewRef(Py_NotImplemented); /* not the tables this code reads */
    PyObject *out = PyList_New(0), *key_of = PyDict_New(), *stack = NULL, *seen = NULL;
    PyObject *res = NULL;
    int r = 0; /* 1: done, 0: None, RU_OTHER: NotImplemented, -1: error */
    if (out == NULL || key_of == NULL) goto err;
    /* the bindings: each a key of the graph before the pass */
    Py_ssize_t pos = 0;
    PyObject *x, *n;
    while (PyDict_Next(subst, &pos, &x, &n)) {
        PyObject *tid = PyObject_GetAttr(n, s_id), *k, *pair;
        if (tid == NULL) goto err;
        PyObject *s = PyDict_GetItemWithError(fx_of, tid);
        if (s == NULL) { /* a constant or a list: the same term */
            Py_ssize_t jj;
            int at = PyErr_Occurred() ? -1 : ru_position(inv, tid, keys, &jj);
            Py_DECREF(tid);
            if (at != 1) { r = at; goto end; } /* None, another case, an error */
            k = PyList_GET_ITEM(keys, jj);
        } else {
            Py_DECREF(tid);
            k = PyDict_GetItemWithError(key_of, s);
            if (k == NULL) {
                if (PyErr_Occurred()) goto err;
                Py_ssize_t steps = 0;
                k = s;
                for (;;) { /* a replacement stands for the node it replaced */
                    PyObject *b = PyDict_GetItemWithError(back, k);
                    if (b == NULL) {
                        if (PyErr_Occurred()) goto err;
                        break;
                    }
                    k = b;
                    steps++;
                    if (k == Py_None || steps > PyDict_GET_SIZE(back)) goto none;
                }
                if (k != s) {
                    int in = PyDict_Contains(index, s);
                    if (in < 0) goto err;
                    if (in) goto none; /* a node of the pass start made another's replacement */
                }
                Py_ssize_t jj;
                int at = ru_position(index, k, images, &jj);
                if (at != 1) { r = at; goto end; } /* None, another case, an error */
                PyObject *im = PyList_GET_ITEM(images, jj);
                if (!PyLong_Check(im)) goto other;
                Py_ssize_t iv = PyLong_AsSsize_t(im);
                if (iv == -1 && PyErr_Occurred()) goto err;
                if (iv < 0) goto none;
                if (PyDict_SetItem(key_of, s, k) < 0) goto err;
            }
        }
        pair = PyTuple_Pack(2, x, k);
        if (pair == NULL) goto err;
        int ap = PyList_Append(out, pair);
        Py_DECREF(pair);
        if (ap < 0) goto err;
    }
    /* the FX nodes from the root down to the bindings: as at the pass start,
     * or changed only where a firing's replacement stands for a binding */
    if (!(stack = PyList_New(0)) || !(seen = PySet_New(NULL))) goto err;
    if (PyList_Append(stack, root) < 0) goto err;
    while (PyList_GET_SIZE(stack) > 0) {
        Py_ssize_t top = PyList_GET_SIZE(stack) - 1;
        PyObject *u = Py_NewRef(PyList_GET_ITEM(stack, top));
        if (PyList_SetSlice(stack, top, top + 1, NULL) < 0) { Py_DECREF(u); goto err; }
        int in = PyDict_Contains(key_of, u);
        if (in == 0) in = PySet_Contains(seen, u);
        if (in != 0) {
            Py_DECREF(u);
            if (in < 0) goto err;
            continue;
        }
        if (PySet_Add(seen, u) < 0) { Py_DECREF(u); goto err; }
        PyObject *hit = PyDict_GetItemWithError(cache, u);
        if (hit == NULL && PyErr_Occurred()) { Py_DECREF(u); goto err; }
        if (PySet_GET_SIZE(seen) > limit || hit == NULL) { Py_DECREF(u); goto none; }
        int kn = PySet_Contains(known, u);
        if (kn <= 0) { Py_DECREF(u); if (kn < 0) goto err; goto none; }
        if (!PyTuple_Check(hit) || PyTuple_GET_SIZE(hit) < 4) { Py_DECREF(u); goto other; }
        Py_INCREF(hit);
        PyObject *info = PyTuple_GET_ITEM(hit, 3), *t = fx_attr(u, FX_TARGET);
        PyObject *kids = PyTuple_Check(info) && PyTuple_GET_SIZE(info) > 1
                         ? PyTuple_GET_ITEM(info, 1) : NULL;
        int st = 0; /* 0: push all the arguments; 1: push those not fired; else an exit */
        if (t == NULL) st = -1;
        else if (PyTuple_GET_ITEM(hit, 2) != t) st = 2;
        else if (kids == NULL || !PyList_Check(kids)) st = 3;
        else {
            PyObject *ua = fx_attr(u, FX_ARGS), *uk = ua == NULL ? NULL : fx_attr(u, FX_KWARGS);
            if (uk == NULL) st = -1;
            else if (PyTuple_GET_ITEM(hit, 0) != ua || PyTuple_GET_ITEM(hit, 1) != uk) {
                int c = ru_changed_only(hit, u, fired, key_of, node_type);
                st = c == 1 ? 1 : c == 0 ? 2 : c == RU_OTHER ? 3 : -1;
            }
            Py_XDECREF(ua);
            Py_XDECREF(uk);
        }
        Py_XDECREF(t);
        if (st == 0 || st == 1) {
            /* the list may change under a comparison's Python code: a copy */
            PyObject *copy = PySequence_List(kids);
            if (copy == NULL) st = -1;
            for (Py_ssize_t i = 0; st >= 0 && i < PyList_GET_SIZE(copy); i++) {
                PyObject *v = PyList_GET_ITEM(copy, i);
                int f = st == 1 ? PyDict_Contains(fired, v) : 0;
                if (f < 0 || (f == 0 && PyList_Append(stack, v) < 0)) st = -1;
            }
            Py_XDECREF(copy);
        }
        Py_DECREF(hit);
        Py_DECREF(u);
        if (st == -1) goto err;
        if (st == 2) goto none;
        if (st == 3) goto other;
    }
    r = 1;
    goto end;
none:
    r = 0;
    goto end;
other:
    r = RU_OTHER;
    goto end;
err:
    r = -1;
end:
    if (r == 1) res = Py_NewRef(out);
    else if (r == 0) res = Py_NewRef(Py_None);
    else if (r == RU_OTHER) res = Py_NewRef(Py_NotImplemented);
    Py_XDECREF(out);
    Py_XDECREF(key_of);
    Py_XDECREF(stack);
    Py_XDECREF(seen);
    return res;
}

static PyMethodDef methods[] = {
    {"build", fx_build, METH_VARARGS,
     "build(tg, nodes, ctx) -> list of merged FX nodes: import every FX node of the list into "
     "the TermGraph tg, as TermGraph.build does."},
    {"import_again", fx_import_again, METH_VARARGS,
     "import_again(state, node) -> term or None: TermGraph.import_node's re-import of a call "
     "from its recipe (same metadata object and target), natively; None: the method decides."},
    {"walk", fx_walk, METH_VARARGS,
     "walk(state, nodes, i, stale, pending, extra, may_root) -> (i, node, what): the rewrite "
     "driver's walk of a pass from index i to the next node it acts on in Python (1: try it, "
     "2: re-import it; 0: the end), re-importing stale nodes natively on the way."},
    {"encode_columns", encode_columns, METH_VARARGS,
     "encode_columns(header, labels, children, attrs, tail) -> bytes: the int64 words of a "
     "graph encoding (native byte order)."},
    {"pass_words", pass_words, METH_VARARGS,
     "pass_words(before_labels, before_args, before_outputs, after_labels, after_args, "
     "after_outputs, firings, amap) -> bytes: the rewrite validator's int64 words of a pass."},
    {"correspond", correspond, METH_VARARGS,
     "correspond(n_before, identity, fired, mergeable, before_labels, before_args, "
     "after_labels, after_args, claim_rebuilt, resolve, pass_, image, amap, inverse) -> "
     "merges: Pass.correspond's walk of the before nodes."},
    {"images", images, METH_VARARGS,
     "images(keys, syms, args, node_type, term, labels, children, index, no_attrs) -> "
     "(images, inverse): the term graph's node each node of an encoding is (FxChecker._images)."},
    {"first_match", first_match, METH_VARARGS,
     "first_match(fn, graph, patterns, root, fuel, indices, start, no_match, cap) -> "
     "(position, words or None) or None: pypm_match for each pattern index from start on "
     "until one answers other than no match."},
    {"encode_fx", encode_fx, METH_VARARGS,
     "encode_fx(nodes, node_type, cache, node_info, assert_target, output_nodes, before_index, "
     "known, const_labels, const_label, list_label, fast) -> the columns of the rewrite validator's "
     "encoding of an FX graph, as FxChecker.encode computes them."},
    {"read_unchanged", read_unchanged, METH_VARARGS,
     "read_unchanged(substitution, fx_of, inverse, keys, back, index, images, known, cache, "
     "root, limit, fired, node_type) -> [(variable, key)], None or NotImplemented: "
     "FxChecker._read_unchanged's reading of a match in the graph before the pass."},
    {"engine_graph", engine_graph, METH_VARARGS,
     "engine_graph(nodes, ctx, tabs, helper, leaf_classes, sym_attr, magic, version, opclass) "
     "-> (words, term ids, origins) or None: the engine's encoding of the term graph of an FX "
     "node list, written directly."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_fxreader",
                                    "The native reader of FX graphs (see _native/__init__.py).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__fxreader(void) {
#define I(var, text) if (!(var = PyUnicode_InternFromString(text))) return NULL
    I(s_op, "op"); I(s_target, "target"); I(s_meta, "meta"); I(s_args, "_args");
    I(s_kwargs, "_kwargs"); I(s_name, "name"); I(s_val, "val"); I(s_id, "id");
    I(s_arity, "arity"); I(s_shape, "shape"); I(s_dtype, "dtype");
    I(s_call_function, "call_function"); I(s_placeholder, "placeholder");
    I(s_get_attr, "get_attr"); I(s_distinct, "distinct"); I(s_kind_op, "op");
    I(s_input, "input"); I(s_import_node, "import_node"); I(s_call_args, "call_args");
    I(s_type, "_type"); I(s_arg, "arg"); I(s_replace_all_uses_with, "replace_all_uses_with");
    I(s_input_typed, "input_typed"); I(s_graph, "graph"); I(s_nodes, "nodes");
    I(s_labels, "_labels"); I(s_children, "_children"); I(s_attrs, "_attrs");
    I(s_index, "_index"); I(s_inputs, "_inputs"); I(s_term, "term"); I(s_fx_of, "fx_of");
    I(s_recipe, "_recipe"); I(s_calls, "_calls"); I(s_targets, "_targets");
    I(s_types, "_types"); I(s_consts, "_consts"); I(s_target_m, "_target"); I(s_c, "c");
    I(s_neg_zero, "-0.0"); I(s_users, "users"); I(s_label, "label");
#undef I
    if (!(empty_tuple = PyTuple_New(0))) return NULL;
    return PyModule_Create(&moddef);
}
