"""One module per GradBench eval; each exposes ``FUNCTIONS``, a dict of `Entry` by name."""
