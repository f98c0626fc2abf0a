"""Bilevel optimization: hypergradients of an upper objective through the solution of a lower problem.

The family's problems, hypergradient estimators and solvers are exported here as they land (issue 15:
natural hypergradient descent, multi-task bilevel with weighted-Chebyshev penalties, decision-focused OT
ambiguity sets; the distributed bilevel methods of Distributed II build on the same layer).
"""

__all__: list[str] = []
