"""Plan: the analyses of graph IR that decide kernels, fused values, buffer lives and
in-place updates."""
