"""The two matching engines behind one interface (:mod:`.matching`): the
verified engine (the Coq-extracted matcher in the engine library, reached
through :mod:`.binding` with the wire format of :mod:`.serialize`) and the
pure-Python reference engine (:mod:`.reference`); plus the declarative
checker (:mod:`.declarative`), an executable reading of ``p@θ ≈ t`` that the
tests hold both engines to."""
from .matching import ENGINES, Match, PatternSet, check_engine, match, match_all

__all__ = ["ENGINES", "Match", "PatternSet", "check_engine", "match", "match_all"]
