"""The calculus and the data every layer shares (no matcher: the engines
are :mod:`pypm_verified.engines`): the calculus of ``theories/Syntax.v``
(:mod:`.syntax`, :mod:`.wellformed`), the wire-level tables (:mod:`.wire`),
the term graph patterns match on (:mod:`.graph`), the symbol table
(:mod:`.symbols`) and the fuel bound of ``theories/Fuel.v`` (:mod:`.fuel`).

``pm.core.X`` names every constructor and check of the calculus."""
from .syntax import *  # noqa: F401,F403
from .syntax import (R, children, fold, map_pattern, walk, with_children)  # noqa: F401
from .wellformed import *  # noqa: F401,F403
from .wellformed import IllFormed  # noqa: F401
from .wire import *  # noqa: F401,F403
