"""Baseline graph rewriters for bench/bench_matchers.py: the pypm rule set
expressed with torch.fx's subgraph rewriter, Inductor's pattern matcher
(register_replacement and register_graph_pattern) and a hand-written Python
walk, plus the bare walk that is the floor. See each module's docstring for
what it can and cannot express."""
