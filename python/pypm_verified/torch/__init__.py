"""The PyTorch layer: load a model (:mod:`.loader`), import its FX graph as
a term graph (:mod:`.importer`), rewrite it with the rule library
(:mod:`.driver`, rules from :mod:`pypm_verified.library`), check numerics
(:mod:`.check`) and save it (:mod:`.pipeline`); or only find every match of
a pattern set in an FX graph (:func:`.fxmatch.match_fx`, read natively into
the engine, no term graph). Also here: the torch
operators the rules use (:mod:`.ops`), the ATen overload registry
(:mod:`.overloads`), the fused kernels (:mod:`.kernels`) and the measured
profitability table (:mod:`.profitability`).

    from pypm_verified.torch import load_model, rewrite_program
    prog = load_model("model.pt2")
    result = rewrite_program(prog, target="cpu")
"""
from .driver import Driver, RewriteError, RuleContext, Value, rewrite_graph_module
from .fxmatch import FxMatch, match_fx
from .importer import TermGraph
from .loader import LoadError, LoadedModel, NeedsPickle, load_model
from .pipeline import Result, rewrite_program, save_atomic

__all__ = ["Driver", "RewriteError", "RuleContext", "Value", "rewrite_graph_module",
           "FxMatch", "match_fx",
           "TermGraph", "LoadError", "LoadedModel", "NeedsPickle", "load_model", "Result",
           "rewrite_program", "save_atomic"]
