"""A module's entry in C: ``pb_run``, which computes the results from the arguments the
glue library read, and the description (``pb_entry``) the glue reads them by."""

from __future__ import annotations

from collections.abc import Mapping

from ....ir.core import Func
from ....ir.types import StackType
from ..loops.ir import Unsupported, ctype

#: Result arrays of at least this many bytes take memory NumPy freed from earlier ones
#: (``PB_BIG`` in ``glue.c``).
BIG_RESULT = 1 << 20

#: pullback's dtype codes in a module's entry (``PB_BOOL`` ... in ``runtime.h``).
PB_TYPES = {"bool": "PB_BOOL", "int32": "PB_INT32", "int64": "PB_INT64",
            "float32": "PB_FLOAT32", "float64": "PB_FLOAT64"}

#: What every module includes (``runtime/module.h``: the runtime, CBLAS, OpenMP), one
#: header that the compiler precompiles once (``build/compiler.py``).
INCLUDES = '#include "module.h"\n'


def entry(func: Func, name: str, notes: str, donated: Mapping[int, int]) -> str:
    """The entry of module ``name`` computing ``func`` (``pbf_0``); ``notes`` (a
    comment) says what its faults and prints say; ``donated``: the parameters callers
    hand over, each with the result whose buffer it is (``pb_entry.donor``)."""
    ins, outs = func.in_types, func.out_types
    if any(isinstance(t, StackType) for t in [*ins, *outs]):
        raise Unsupported("a compiled function cannot take or return a stack")
    args = [f"*(const {ctype(t.dtype)} *)in[{k}]" if t.shape == () else
            f"(const {ctype(t.dtype)} *)in[{k}]" for k, t in enumerate(ins)]
    args += [f"({ctype(t.dtype)} *)out[{k}]" for k, t in enumerate(outs)]
    lines = [f"/* what faults and prints say: {notes} */",
             "static int pb_run(pb_ctx *ctx, void *const *in, void *const *out) {",
             f"    return pbf_0(ctx{''.join(', ' + a for a in args)});",
             "}",
             "static pb_pool *pb_kept;"]
    params = []
    for k, t in enumerate([*ins, *outs]):
        dims = "NULL"
        if t.shape:
            lines.append(f"static const int64_t pb_dims{k}[] = {{{', '.join(map(str, t.shape))}}};")
            dims = f"pb_dims{k}"
        params.append(f"{{{PB_TYPES[t.dtype.name]}, {len(t.shape)}, {dims}}}")
    big = any(t.size * t.dtype.np.itemsize >= BIG_RESULT for t in outs if t.shape)
    donor = "NULL"
    if donated:
        by_result = {k: j for j, k in donated.items()}
        lines.append(f"static const int pb_donor[] = "
                     f"{{{', '.join(str(by_result.get(k, -1)) for k in range(len(outs)))}}};")
        donor = "pb_donor"
    lines += [
        f"static const pb_param pb_params[] = {{{', '.join(params) or '{0, 0, NULL}'}}};",
        f"static const pb_entry pb_this = {{{len(ins)}, {len(outs)}, {int(big)}, pb_params, "
        f"pb_run, &pb_kept, {donor}}};",
        "",
        f"void *PyInit_{name}(void) {{  /* the module object */",
        f'    return pb_module_new("{name}", &pb_this);',
        "}",
        ""]
    return "\n".join(lines)
