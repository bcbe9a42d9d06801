"""Building generated C into extension modules, and the on-disk cache of them."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from array import array
from pathlib import Path

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import cache, compiler, libraries

from .build_child import HEADERS, add_source, linked_module, module_source

CHILD = Path(__file__).with_name("build_child.py")

needs_cc = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A fresh, not yet existing cache directory for this test."""
    path = tmp_path / "cache" / "pullback"
    monkeypatch.setenv("PULLBACK_CACHE_DIR", str(path))
    monkeypatch.delenv("PULLBACK_CFLAGS", raising=False)
    return path


def child(*args: str) -> dict:
    """Run build_child.py in a new process (with this process's environment)."""
    proc = subprocess.run([sys.executable, str(CHILD), *args], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def entry(cache_dir: Path) -> Path:
    """The one cache entry's shared object."""
    (so,) = cache_dir.glob("pb_t_*.so")
    return so


def assert_sealed(so: Path) -> None:
    """The entry ends in a trailer naming its key and the digest of the bytes before."""
    data, payload = so.read_bytes(), cache.payload(so)
    trailer = data[len(payload):]
    assert so.stem.rsplit("-", 1)[1].encode() in trailer
    assert hashlib.sha256(payload).hexdigest().encode() in trailer
    assert payload.startswith(b"\x7fELF") or sys.platform == "darwin"


def add(module, x: float, y: float) -> float:
    return module.f(array("d", [x, y]))


@needs_cc
def test_build_load_run_and_memoise(cache_dir):
    module = compiler.build_module(add_source("pb_t_add"), "pb_t_add", headers=HEADERS)
    assert add(module, 1.5, 2.0) == 3.5
    assert compiler.build_module(add_source("pb_t_add"), "pb_t_add", headers=HEADERS) is module
    assert cache_dir.stat().st_mode & 0o777 == 0o700
    so = entry(cache_dir)
    assert module.__file__ == str(so)
    assert_sealed(so)
    assert not list(cache_dir.glob("*.sha256"))  # nothing beside it is trusted


@needs_cc
def test_compiler_probes_are_cached_on_disk(cache_dir, monkeypatch):
    compiler._probes.clear()
    compiler.build_module(add_source("pb_t_probe1"), "pb_t_probe1", headers=HEADERS)
    assert len(list(cache_dir.glob("probes-*.json"))) == 1

    def no_probe(*args):
        raise AssertionError("probed again")

    compiler._probes.clear()  # as in a new process
    monkeypatch.setattr(compiler, "_probe", no_probe)
    module = compiler.build_module(add_source("pb_t_probe2"), "pb_t_probe2", headers=HEADERS)
    assert add(module, 1.5, 2.0) == 3.5


@needs_cc
def test_cflags_are_appended_and_key_the_cache(cache_dir, monkeypatch):
    monkeypatch.setenv("PULLBACK_CFLAGS", "-DOFFSET=10.0")
    module = compiler.build_module(add_source("pb_t_flags"), "pb_t_flags", headers=HEADERS)
    assert add(module, 1.5, 2.0) == 13.5
    monkeypatch.delenv("PULLBACK_CFLAGS")
    plain = compiler.build_module(add_source("pb_t_flags"), "pb_t_flags", headers=HEADERS)
    assert add(plain, 1.5, 2.0) == 3.5
    assert len(list(cache_dir.glob("*.so"))) == 2


@needs_cc
def test_cache_hit_in_a_new_process(cache_dir):
    first = child("load", "pb_t_hit")
    so = entry(cache_dir)
    before = so.stat()
    second = child("load", "pb_t_hit")
    after = so.stat()
    assert first["result"] == second["result"] == 3.5
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)
    print(f"\nbuild {first['seconds'] * 1e3:.1f} ms; "
          f"cache hit in a new process {second['seconds'] * 1e3:.1f} ms")


def _damaged(data: bytes, damage: str, other: bytes) -> bytes:
    """An entry's bytes damaged: cut short, one byte flipped, random bytes in its place,
    another module's entry in its place."""
    middle = len(data) // 2
    return {"truncate": data[:middle],
            "flip": data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1:],
            "garbage": np.random.default_rng(0).bytes(len(data)),
            "another": other}[damage]


@needs_cc
@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "another"])
def test_damaged_entry_is_rebuilt_not_loaded(cache_dir, damage):
    """However the file is damaged, and even with a digest beside it that matches the
    damage (as a digest file written by the damaging process would), a new process
    rebuilds the entry with a warning instead of loading it (which crashed: SIGBUS)."""
    name = f"pb_t_{damage}"
    child("load", "pb_t_other")
    other = entry(cache_dir)
    child("load", name)
    (so,) = cache_dir.glob(f"{name}-*.so")
    data = so.read_bytes()
    bad = _damaged(data, damage, other.read_bytes())
    so.write_bytes(bad)
    so.with_suffix(".sha256").write_text(hashlib.sha256(bad).hexdigest() + "\n")
    proc = subprocess.run([sys.executable, str(CHILD), "load", name], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["result"] == 3.5
    assert "is damaged" in proc.stderr and "rebuilding it" in proc.stderr
    assert so.read_bytes() == data


@needs_cc
def test_concurrent_builds_both_succeed(cache_dir, tmp_path):
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    args = [sys.executable, str(CHILD), "load", "pb_t_race", str(barrier), "2"]
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = []
    for proc in procs:
        out, err = proc.communicate()
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    assert [result["result"] for result in results] == [3.5, 3.5]
    entries = sorted(p.name for p in cache_dir.iterdir() if p.name.startswith("pb_t_race"))
    assert [Path(e).suffix for e in entries] == [".so"]  # one entry, no leftovers
    assert not [p for p in cache_dir.iterdir() if p.name.startswith(".")]
    print("\nconcurrent builds took", [round(r["seconds"], 3) for r in results], "s")


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
def test_cache_dir_writable_by_others_is_refused(cache_dir, mode):
    cache_dir.mkdir(parents=True)
    cache_dir.chmod(mode)
    with pytest.raises(cache.CacheError, match="writable by other users") as info:
        cache.cache_dir()
    assert str(cache_dir) in str(info.value)
    assert "chmod 700" in str(info.value) and "PULLBACK_CACHE_DIR" in str(info.value)


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root")
def test_cache_dir_of_another_user_is_refused(cache_dir):
    cache_dir.mkdir(parents=True, mode=0o700)
    os.chown(cache_dir, 12345, 12345)
    with pytest.raises(cache.CacheError, match="belongs to another user"):
        cache.cache_dir()


@needs_cc
def test_compile_error_shows_stderr_and_keeps_the_source(cache_dir):
    source = module_source("pb_t_bad", "", "#error pullback-test-marker\n")
    with pytest.raises(compiler.BuildError, match="pullback-test-marker") as info:
        compiler.build_module(source, "pb_t_bad")
    kept = Path(re.search(r"source kept in (\S+)", str(info.value))[1])
    assert kept.read_text() == source
    shutil.rmtree(kept.parent)
    # nothing of the failed build (the compiler probes' answers may be there)
    assert not [p for p in cache_dir.iterdir() if not p.name.startswith("probes-")]


@needs_cc
def test_blas_dgemm_links(cache_dir):
    body = f"""
static PyObject *f(PyObject *self, PyObject *args) {{
    Py_buffer a, b, c;
    if (!PyArg_ParseTuple(args, "y*y*w*", &a, &b, &c)) return NULL;
    {compiler.BLAS_PREFIX}cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 2,
                                   1.0, a.buf, 2, b.buf, 2, 0.0, c.buf, 2);
    PyBuffer_Release(&a); PyBuffer_Release(&b); PyBuffer_Release(&c);
    Py_RETURN_NONE;
}}
"""
    source = module_source("pb_t_blas", f"#include <{compiler.BLAS_HEADER}>", body)
    module = compiler.build_module(source, "pb_t_blas")
    a, b = np.random.default_rng(0).standard_normal((2, 2, 2))
    c = np.zeros((2, 2))
    module.f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-15)


@needs_cc
def test_rejected_optional_flags_are_dropped(cache_dir, tmp_path, monkeypatch):
    log = tmp_path / "cc.log"
    wrapper = tmp_path / "cc-without-openmp"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\n'
                       f'case " $* " in *" -fopenmp "*) exit 1;; esac\n'
                       f'exec {compiler.compiler_info()[0]} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PULLBACK_CC", str(wrapper))
    module = compiler.build_module(add_source("pb_t_noomp"), "pb_t_noomp", headers=HEADERS)
    assert add(module, 1.5, 2.0) == 3.5
    (line,) = [line for line in log.read_text().splitlines() if "pb_t_noomp.c" in line]
    assert "-march=native" in line.split() and "-fopenmp" not in line.split()


def test_no_compiler(cache_dir, monkeypatch):
    monkeypatch.setenv("PULLBACK_CC", "/nonexistent/pullback-cc")
    assert compiler.compiler_info() is None and not compiler.have_compiler()
    with pytest.raises(compiler.NoCompilerError, match="no working C compiler"):
        compiler.build_module(add_source("pb_t_nocc"), "pb_t_nocc")
    (message,) = child("warn")["warnings"]
    assert "/nonexistent/pullback-cc" in message and "interpreter" in message


@pytest.mark.parametrize(("name", "headers"), [("not-an-identifier", {}),
                                               ("pb_t_names", {"../escape.h": ""})])
def test_bad_names_are_refused(name, headers):
    with pytest.raises(ValueError):
        compiler.build_module("", name, headers=headers)


@needs_cc
def test_libraries_are_built_once_and_linked_by_each_module(cache_dir):
    """Modules link shared libraries (pullback's runtime) built once into the cache,
    those missing at once, beside the module's own compile; a damaged library entry is
    rebuilt, also before a module found in the cache is loaded."""
    assert linked_module("pb_t_lib1").f(1.25) == 3.5
    (so,) = cache_dir.glob("libpbtwice-*.so")
    (inc,) = cache_dir.glob("libpbinc-*.so")
    built = so.stat().st_mtime_ns, inc.stat().st_mtime_ns
    assert linked_module("pb_t_lib2").f(4.0) == 9.0
    assert (so.stat().st_mtime_ns, inc.stat().st_mtime_ns) == built
    data = so.read_bytes()
    so.unlink()  # a new file: the loaded library's pages stay mapped
    so.write_bytes(data[:100])
    with pytest.warns(RuntimeWarning, match="is damaged"):
        assert linked_module("pb_t_lib3").f(-1.0) == -1.0 and so.stat().st_size > 100
    so.unlink()
    assert child("linked", "pb_t_lib1") == {"result": 2.0} and so.stat().st_size > 100


def _scale(x, a):
    return x * a


@needs_cc
def test_a_generated_module_includes_no_python_or_numpy_header(cache_dir):
    """The glue library is every module's Python side: a module compiles its own code
    and the description of its entry, not Python's and NumPy's headers."""
    lowered = pb.jit(_scale, backend="c").lower(np.ones(3), 2.0)
    included = re.compile(r'#include [<"](.+?)[>"]')
    assert included.findall(lowered.source) == [libraries.PRELUDE]
    assert included.findall(libraries.HEADERS[libraries.PRELUDE]) == \
        ["runtime.h", "cblas.h", "omp.h"]
    assert "pb_entry" in lowered.source and "PyObject" not in lowered.source
    assert pb.jit(_scale, backend="c")(np.arange(3.0), 2.0).tolist() == [0.0, 2.0, 4.0]


def _scaled_sum(x, n):
    s = x
    for i in range(n):  # a run-time trip count: the loop is a fault site of its own
        s = s * 1.5 + x[i]
    return s


def test_a_module_is_named_the_same_by_every_staging():
    """A loop among the fault sites put its blocks' reprs, which hold their addresses,
    into the module's text: its name (a hash of the text) changed with every staging,
    so every new process built the module again instead of finding it in the cache."""
    args = (np.ones(4), np.int64(3))
    first = pb.jit(_scaled_sum, backend="c").lower(*args).source
    second = pb.jit(_scaled_sum, backend="c").lower(*args).source
    assert " object at 0x" not in first
    assert first == second
