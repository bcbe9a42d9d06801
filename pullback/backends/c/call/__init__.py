"""Call: a built module called from Python (its calling convention, the fast path of
``pb.jit`` calls), and what it may take of the machine."""
