/* readfloor: the floor of any reader of an FX graph, for bench_fxreader.py.
 *
 * walk(nodes, fake_tensor_type) reads, per FX node of the list, what every
 * reader of the graph must read -- its op, target, args and kwargs, and its
 * meta["val"]'s shape and dtype when that is a fake tensor -- and builds
 * nothing (it returns a checksum: the ranks and argument counts summed).
 * The native import does this and builds the Python term graph; the
 * difference is what building that graph costs. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *s_op, *s_target, *s_args, *s_kwargs, *s_meta, *s_val, *s_shape, *s_dtype;

static PyObject *walk(PyObject *self, PyObject *a) {
    PyObject *nodes, *fake;
    long long total = 0;
    if (!PyArg_ParseTuple(a, "O!O:walk", &PyList_Type, &nodes, &fake)) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(nodes); i++) {
        PyObject *n = PyList_GET_ITEM(nodes, i);
        PyObject *op = PyObject_GetAttr(n, s_op), *t = op ? PyObject_GetAttr(n, s_target) : NULL,
                 *ar = t ? PyObject_GetAttr(n, s_args) : NULL,
                 *kw = ar ? PyObject_GetAttr(n, s_kwargs) : NULL,
                 *meta = kw ? PyObject_GetAttr(n, s_meta) : NULL;
        int ok = meta != NULL;
        PyObject *val = ok && PyDict_Check(meta) ? PyDict_GetItemWithError(meta, s_val) : NULL;
        if (ok && val == NULL && PyErr_Occurred()) ok = 0;
        if (ok && val != NULL && (PyObject *)Py_TYPE(val) == fake) {
            PyObject *sh = PyObject_GetAttr(val, s_shape);
            PyObject *dt = sh ? PyObject_GetAttr(val, s_dtype) : NULL;
            if (dt == NULL) ok = 0;
            else if (PyTuple_Check(sh)) total += PyTuple_GET_SIZE(sh);
            Py_XDECREF(sh);
            Py_XDECREF(dt);
        }
        if (ok && PyTuple_Check(ar)) total += PyTuple_GET_SIZE(ar);
        Py_XDECREF(op); Py_XDECREF(t); Py_XDECREF(ar); Py_XDECREF(kw); Py_XDECREF(meta);
        if (!ok) return NULL;
    }
    return PyLong_FromLongLong(total);
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, "walk(nodes, fake_tensor_type) -> checksum"},
    {NULL, NULL, 0, NULL}};
static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "readfloor",
                                    "The reading floor of an FX graph (bench only).", -1, methods};

PyMODINIT_FUNC PyInit_readfloor(void) {
#define I(var, text) if (!(var = PyUnicode_InternFromString(text))) return NULL
    I(s_op, "op"); I(s_target, "target"); I(s_args, "_args"); I(s_kwargs, "_kwargs");
    I(s_meta, "meta"); I(s_val, "val"); I(s_shape, "shape"); I(s_dtype, "dtype");
#undef I
    return PyModule_Create(&moddef);
}
