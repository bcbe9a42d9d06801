"""Python ints meeting narrower NumPy ints: NumPy 2 raises OverflowError when they don't fit."""

import numpy as np
import pytest

from harness import check_operator, stage
from pullback.backends import interp
from pullback.numpy_api import OPERATORS


@pytest.mark.parametrize("n", [5, -(2**31), 2**31 - 1])
def test_run_time_python_int_that_fits(n):
    check_operator("add", np.arange(3, dtype=np.int32), n, dyn=(1,))


@pytest.mark.parametrize("n", [2**31, -(2**31) - 1, 2**40])
def test_run_time_python_int_that_does_not_fit_raises_overflow(n):
    x = np.arange(3, dtype=np.int32)
    with pytest.raises(OverflowError, match=f"Python integer {n} out of bounds for int32"):
        x + n
    func, leaves, _, _ = stage(OPERATORS["add"], (x, n), {}, dyn=(1,))
    with pytest.raises(OverflowError, match=f"Python integer {n} out of bounds for int32"):
        interp.run(func, *leaves)


def test_compile_time_python_int_that_does_not_fit_raises_while_staging():
    with pytest.raises(OverflowError, match="out of bounds for int32"):
        stage(OPERATORS["mul"], (np.arange(3, dtype=np.int32), 2**33), {})
