"""What the machine can run fast: native bf16 on this CPU or on the GPU, and the precision
``--precision auto`` resolves to.

bf16 autocast pays only where the hardware computes in bf16: CUDA GPUs that support it
(Ampere and later: A10G, L4, A100, H100), and CPUs with AVX512-BF16 or AMX. Elsewhere PyTorch
emulates it, and a trial runs about ten times slower than in fp32 (measured on an AVX2-only
CPU: 3.3 against 34.4 train examples/s). So ``auto`` is bf16 where it is native and fp32
everywhere else; it is resolved on the machine that launches the sweep, for the device the
trials ask for, before any trial id is computed, so the id names the precision that runs.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
EMULATED_SLOWDOWN = "about 10x slower than fp32 (measured: 3.3 vs 34.4 train examples/s)"


@cache
def cpu_flags() -> frozenset[str]:
    """The instruction-set flags of this machine's CPU (Linux ``/proc/cpuinfo``; empty
    elsewhere, which counts as "no native bf16")."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


@cache
def cpu_name() -> str:
    """This CPU as a cost table names it: model name, family/model numbers (several CPU
    generations share a model name) and whether it computes bf16 natively."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    import platform

    name = fields.get("model name") or platform.processor() or platform.machine() or "CPU"
    family = (f" family {fields['cpu family']} model {fields['model']}"
              if "cpu family" in fields and "model" in fields else "")
    bf16 = ", ".join(f for f in CPU_BF16_FLAGS if f in cpu_flags()) or "no native bf16"
    return f"{name}{family} ({bf16})"


def native_bf16_cpu() -> bool:
    return bool(set(CPU_BF16_FLAGS) & cpu_flags())


def native_bf16_gpu() -> bool | None:
    """Whether this machine's GPU computes bf16 natively; None without a GPU here."""
    import torch

    if not torch.cuda.is_available():
        return None
    return bool(torch.cuda.is_bf16_supported())


def resolve_precision(precision: str, on_gpu: bool) -> tuple[str, str]:
    """(precision to run, why) for a trial on a GPU (``on_gpu``) or on CPUs. ``auto`` is bf16
    where it is native; a GPU this machine cannot see is taken to be bf16-capable (every
    GPU of ``cluster.yaml`` is), and a trial on one without falls back to fp32 and records
    it (``precision_used``)."""
    if precision != "auto":
        return precision, f"--precision {precision}"
    if on_gpu:
        native = native_bf16_gpu()
        if native is False:
            return "fp32", "auto: this machine's GPU has no native bf16"
        return "bf16", ("auto: the GPU has native bf16" if native
                        else "auto: GPU trials (bf16 on every GPU of cluster.yaml)")
    if native_bf16_cpu():
        return "bf16", "auto: this CPU has native bf16 (avx512_bf16/amx_bf16)"
    return "fp32", "auto: this CPU has no native bf16 (no avx512_bf16/amx_bf16)"


def emulated_bf16_warning(precision: str, on_gpu: bool) -> str | None:
    """A warning when bf16 is asked for where it would be emulated (CPU trials here)."""
    if precision == "bf16" and not on_gpu and not native_bf16_cpu():
        return ("--precision bf16 on a CPU without native bf16 (no avx512_bf16/amx_bf16): "
                f"emulated, {EMULATED_SLOWDOWN}; use --precision auto or fp32")
    return None


def eval_batch_size(device_type: str) -> int:
    """Dev batches: 64 examples on CPUs (cache-sized), 256 on a GPU (a batch of 64 short
    sequences leaves a GPU mostly idle). Evaluation draws no random numbers: the size
    changes no training number."""
    return 256 if device_type == "cuda" else 64


def cuda_memory_start(use_gpu: bool) -> int | None:
    """Where a trial on the GPU starts: the bytes PyTorch still holds allocated on it (what
    earlier trials of a reused worker left: a leak shows as a rising start), after resetting
    the peak so ``cuda_memory_peak`` is this trial's. None without a GPU."""
    import torch

    if not (use_gpu and torch.cuda.is_available()):
        return None
    torch.cuda.reset_peak_memory_stats()
    return int(torch.cuda.memory_allocated())


def cuda_memory_peak(device: str | None) -> int | None:
    """The most bytes PyTorch held allocated on the trial's GPU since ``cuda_memory_start``
    (``torch.cuda.max_memory_allocated``); None for a trial not on a GPU. ``device``: the
    trial's device label ("cuda (NVIDIA H200)"); a trial uses its worker's current GPU."""
    import torch

    if not device or not device.startswith("cuda") or not torch.cuda.is_available():
        return None
    return int(torch.cuda.max_memory_allocated())
