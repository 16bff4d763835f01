"""The Terra tracer: ``df.function`` runs steps of imperative programs on generated graphs.

* :mod:`.location` — program locations (call-site stack + iteration index);
* :mod:`.trace` — recording a step's ops through the eager recorder hook;
* :mod:`.loops` — folding loops whose iterations trace alike into one loop node;
* :mod:`.trace_graph` — merging traces into a TraceGraph;
* :mod:`.case_assignment` — Algorithm 1 (switch-cases) and its coverage condition;
* :mod:`.generate` — the step graph: Switch-Cases, Case Selects, Input Feeding and
  Output Fetching on Send/Recv, variables ordered by control edges;
* :mod:`.coexec` — the Python side of co-execution and fallback;
* :mod:`.step` — ``df.function`` itself.
"""
from .step import Function, function

__all__ = ["function", "Function"]
