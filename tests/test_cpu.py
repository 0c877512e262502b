import os
import subprocess
import sys

import pytest
import torch

# Three bf16 products of two shapes, A B A, after set_onednn_kernel_cache(capacity): whether
# the third finds A's kernel shows in oneDNN's own log of kernel creations.
PRODUCTS = """
import sys, torch
from nmt.cpu import set_onednn_kernel_cache
set_onednn_kernel_cache(int(sys.argv[1]))
weight = torch.randn(64, 32).bfloat16()
for rows in (5, 6, 5):
    torch.nn.functional.linear(torch.randn(rows, 32).bfloat16(), weight)
"""


def kernel_creations(capacity: int) -> list[str]:
    env = {**os.environ, "ONEDNN_VERBOSE": "profile_create"}
    env.pop("ONEDNN_PRIMITIVE_CACHE_CAPACITY", None)
    out = subprocess.run(
        [sys.executable, "-c", PRODUCTS, str(capacity)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line.split(",")[3] for line in out.splitlines() if ",create:" in line]


def test_the_kernel_cache_capacity_reaches_onednn():
    roomy = kernel_creations(16)
    if not roomy:
        pytest.skip("bf16 products do not go through oneDNN on this CPU")
    assert roomy == ["create:cache_miss", "create:cache_miss", "create:cache_hit"]
    assert kernel_creations(1) == ["create:cache_miss"] * 3


def test_a_negative_kernel_cache_is_refused():
    from nmt.cpu import set_onednn_kernel_cache

    with pytest.raises(ValueError, match="onednn_kernel_cache"):
        set_onednn_kernel_cache(-1)


def test_native_bf16_means_the_cpus_bf16_instructions_not_onednns_avx512_claim(monkeypatch):
    """oneDNN says bf16 is supported on any AVX-512 CPU, where it is emulated: the recipe must
    not pick bf16 there, nor where ONEDNN_MAX_CPU_ISA keeps oneDNN below the bf16 instructions
    (set to AVX2, a machine with AMX multiplies as an AVX2-only one does)."""
    import nmt.cpu

    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    for isa, native in [("avx2", False), ("AVX512_CORE_VNNI", False), ("AVX512_CORE_AMX", True)]:
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", isa)
        assert nmt.cpu.cpu_has_native_bf16() is native, isa
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    for avx512_bf16, amx, native in [
        (False, False, False),
        (True, False, True),
        (False, True, True),
    ]:
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda v=avx512_bf16: v)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda v=amx: v)
        assert nmt.cpu.cpu_has_native_bf16() is native


def test_default_threads_are_torchs_own_found_without_torch(monkeypatch):
    """A CTranslate2 command's threads=0 is torch's default, found without importing torch:
    the same number torch gives in a fresh interpreter (this one's threads are the tests'),
    and MKL_NUM_THREADS, else OMP_NUM_THREADS, above the cores, as torch reads them."""
    from nmt.cpu import default_threads, physical_cores

    env = {k: v for k, v in os.environ.items() if k not in ("MKL_NUM_THREADS", "OMP_NUM_THREADS")}
    code = "import torch, nmt.cpu; print(torch.get_num_threads(), nmt.cpu.default_threads())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    theirs, ours = out.stdout.split()
    assert ours == theirs and int(ours) == physical_cores() <= (os.cpu_count() or 1)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert default_threads() == 3
    monkeypatch.setenv("MKL_NUM_THREADS", "5")
    assert default_threads() == 5
    monkeypatch.setenv("MKL_NUM_THREADS", "0")  # unset, as torch reads it
    assert default_threads() == 3
