"""Graph IR: types, values, equations, blocks, functions; builder, printer, parser, verifier."""

# The builder and the printer sit above core.py and op.py, and tell them as they load
# how a called op emits itself and how ``str`` renders IR: load them with the package.
from . import builder, printer  # noqa: F401
