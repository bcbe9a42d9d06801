"""Neural-network layers as pytrees (``pb.nn``), in the style of Equinox: a module is a
dataclass whose array fields are its parameters and whose configuration fields are
``pb.field(static=True)``; its ``__call__`` is plain NumPy that pullback stages like user
code, so one ``pb.jit`` compiles a model's forward pass, its gradient and the optimiser
update together.  Layers are built from random keys by ``Layer.init(key, ...)``."""
