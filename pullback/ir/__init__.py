"""Graph IR: types, values, equations, blocks, functions; builder, printer, parser, verifier."""
