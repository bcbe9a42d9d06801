"""The C backend's tests lower products by the default inline/BLAS crossover: measured on
the machine (``lower/products.py``), it would move while the tests run, and with it which
products are BLAS calls (``test_crossover.py`` tests the measured one)."""

import pytest

from pullback.backends.c.lower import products


@pytest.fixture(autouse=True)
def default_gemm_crossover(monkeypatch):
    monkeypatch.setattr(products, "measured_crossover", lambda dt: {})
