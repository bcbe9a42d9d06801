"""Optimisation passes: pure ``Func -> Func`` rewrites of graph IR (dead code, common
subexpressions, constant folding, algebraic identities, inlining, loop-invariant code
motion), run in order by ``manager.optimize``."""
