"""The primitives, one module per family; importing this package registers them all."""

from . import (  # noqa: F401
    ad,
    control,
    conv,
    elementwise,
    index,
    linalg,
    random,
    reduce,
    shape,
    sort,
    spectral,
    stack,
)
