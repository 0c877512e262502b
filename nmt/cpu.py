"""CPU runtime settings that have to be made before the first matrix product."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)


# oneDNN's instruction sets without bf16 products: ONEDNN_MAX_CPU_ISA set to one of them keeps
# oneDNN from the CPU's bf16 instructions, so bf16 is emulated there as on a CPU without them
ONEDNN_ISAS_WITHOUT_BF16 = (
    "SSE41",
    "AVX",
    "AVX2",
    "AVX2_VNNI",
    "AVX2_VNNI_2",
    "AVX512_CORE",
    "AVX512_CORE_VNNI",
)


def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bf16 in hardware (AVX-512 BF16 or AMX, through oneDNN), and
    ONEDNN_MAX_CPU_ISA lets oneDNN use it. Elsewhere bf16 is emulated, many times slower than
    float32 (docs/benchmarks.md). oneDNN's own `_is_mkldnn_bf16_supported` says yes for any
    AVX-512 CPU, which only emulates it."""
    if os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper() in ONEDNN_ISAS_WITHOUT_BF16:
        return False
    import torch  # here: the configs' resolver reaches this module, a CTranslate2 command too

    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def warn_if_emulated_bf16(device: torch.device, wants_bf16: bool, setting: str) -> None:
    """One warning when bf16 is asked for on a CPU that would emulate it."""
    if wants_bf16 and device.type == "cpu" and not cpu_has_native_bf16():
        log.warning(
            "%s: this CPU has no native bf16 (AVX-512 BF16/AMX), so bf16 is emulated and "
            "much slower than float32 here",
            setting,
        )


def default_threads() -> int:
    """torch's default thread count, found without importing torch (~1.7 s a CTranslate2
    command would otherwise pay): MKL_NUM_THREADS, else OMP_NUM_THREADS, else the machine's
    physical cores (as cpuinfo counts them for torch), else its logical ones."""
    for name in ("MKL_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return physical_cores() or os.cpu_count() or 1


def physical_cores() -> int:
    """The machine's cores, a core's hyperthreads counted once (Linux's CPU topology: package,
    die where the kernel names one, core), or 0 where the topology cannot be read."""
    cores = set()
    for cpu in Path("/sys/devices/system/cpu").glob("cpu[0-9]*"):
        topology = cpu / "topology"
        try:
            package = (topology / "physical_package_id").read_text()
            core = (topology / "core_id").read_text()
        except OSError:  # an offline CPU has no topology; another system, no folder at all
            continue
        die = topology / "die_id"
        cores.add((package, die.read_text() if die.exists() else "", core))
    return len(cores)


def precision_for_this_cpu(native_bf16: str, otherwise: str) -> str:
    """The config resolver `${cpu_precision:NATIVE,OTHERWISE}`: `native_bf16` on a CPU with
    native bf16, else `otherwise`. For CPU recipes that train in bf16 where it pays."""
    return native_bf16 if cpu_has_native_bf16() else otherwise


def set_onednn_kernel_cache(capacity: int | None) -> None:
    """Let oneDNN keep up to `capacity` compiled matrix-product kernels (its default: 1024).

    With native bf16 (AVX-512 BF16, AMX) every new product shape compiles a kernel, ~2 ms
    each. Token-budget batches come in a few hundred shapes that recur every epoch (see
    TokenBatchSampler), several thousand kernels for a whole step's products: with the
    default cache they are compiled again every epoch (docs/benchmarks.md has the cost).
    oneDNN reads the capacity when it
    creates its first kernel, so call this first. None leaves oneDNN's own setting
    (ONEDNN_PRIMITIVE_CACHE_CAPACITY) alone.
    """
    if capacity is not None:
        if capacity < 0:
            raise ValueError(f"onednn_kernel_cache must be >= 0, not {capacity}")
        os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = str(capacity)
