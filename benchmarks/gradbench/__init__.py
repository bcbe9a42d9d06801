"""A GradBench tool for pullback: ``python -m benchmarks.gradbench.tool``.

GradBench (github.com/gradbench/gradbench) runs an *eval* process that sends JSON lines to
a *tool* process; this package is pullback's tool. Each eval lives in ``evals/NAME.py``
with its objective written once in plain Python + NumPy and every derivative produced by
pullback; ``tool.py`` speaks the protocol.
"""
