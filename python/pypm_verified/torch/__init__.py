"""The PyTorch layer: load a model, import its FX graph as a term graph,
rewrite it with the rule library, check numerics, save it.

    from pypm_verified.torch import load_program, rewrite_program
    prog = load_program("model.pt2")
    result = rewrite_program(prog.ep, target="cpu")
"""
from .driver import Driver, Report, RewriteError, Value, current_target
from .importer import TermGraph, import_graph

__all__ = ["Driver", "Report", "RewriteError", "Value", "current_target", "TermGraph",
           "import_graph"]
