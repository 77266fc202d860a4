"""A task's inputs, generated from a seed: the same values in the judge and in the candidate process.

    gen = input_fn(task_module, "cpu")           # get_small_inputs on a CPU when the task has it
    xs = make_inputs(gen, seed, "cuda")          # the seed's values, on the device
    xs = make_inputs(gen, refresh_seed(s, rep), "cuda")   # the rep-th timed call's fresh values

NOTE: torch's global generator is forked around every generation (torch.random.fork_rng), so that
generating inputs neither depends on nor changes what the caller's process had seeded: in the
candidate process torch.initial_seed() keeps saying the entropy it was seeded with, and in the judge
(the caller's own process, possibly verifying in several threads) generations never interleave.
"""

from __future__ import annotations

import math
import threading

_LOCK = threading.Lock()


def input_fn(task_mod, device: str):
    """The task's input generator for device: get_small_inputs() on a CPU, when the task defines it."""
    use_small = device == "cpu" and callable(getattr(task_mod, "get_small_inputs", None))
    return task_mod.get_small_inputs if use_small else task_mod.get_inputs


def make_inputs(gen, seed: int, device: str) -> list:
    """gen()'s inputs under `seed`, on device (tensors moved there; other values as they are)."""
    import torch

    devices = [torch.cuda.current_device()] if device == "cuda" else []
    with _LOCK, torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        with torch.device(device):
            xs = list(gen())
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in xs]


def build_seeded(factory, seed: int, device: str):
    """factory() under `seed` (a model's random initial parameters), the caller's generator left as it was."""
    import torch

    devices = [torch.cuda.current_device()] if device == "cuda" else []
    with _LOCK, torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        return factory()


def input_checksums(xs: list, seed: int, device: str) -> list[float]:
    """One number per input, the same in the judge and in the candidate process for the same values: a
    tensor's float64 sum weighted by the ±1 pattern of `seed` (verifier.timing.weighted_checksum), a number
    as itself, anything else by the CRC-32 of its repr. What the judge compares to know that the candidate
    process made the inputs it made (verifier.judge, inputs sent as a seed)."""
    import zlib

    import torch

    from verifier import timing

    weights = None
    sums = []
    for x in xs:
        if isinstance(x, torch.Tensor):
            if weights is None:
                weights = timing.checksum_weights(seed, device)
            sums.append(float(timing.weighted_checksum(x.to(weights.device), weights)))
        elif type(x) in (bool, int, float):
            sums.append(float(x))
        else:
            sums.append(float(zlib.crc32(repr(x).encode())))
    return sums


def refresh_seed(seed: int, rep: int) -> int:
    """The seed of the rep-th timed call's fresh inputs (warm-up calls have negative reps)."""
    return (seed + 7919 * (rep + 2)) % 2**62


def block_seed(seed: int, call: int) -> int:
    """The seed of the call-th input set of a timing block."""
    return (seed + 104729 * (call + 1)) % 2**62


# ---- inputs with a few large values (the judge's spiked trial)
#
# Where a task reduces many inputs to few outputs (a loss, a norm, a row's logsumexp), a kernel that reads only
# part of its input (every other block, with the sum scaled up) estimates i.i.d. inputs' reduction so closely
# that the averaged output lands inside the tolerance. A few elements far from the rest make every skipped
# element count: a skipped spike moves its row's result by far more than any tolerance.

SPIKE_EVERY = 4096      # one spiked element in this many (at least one a tensor)
SPIKE_SIGMAS = 10.0     # how far from the tensor's mean, in its standard deviations (e^10 still fits fp16)


def spike_inputs(xs: list, seed: int) -> int:
    """Set one element in SPIKE_EVERY of each floating-point input tensor (positions and signs from seed) to its
    mean ± SPIKE_SIGMAS standard deviations, in place; returns how many tensors were changed. Tensors of a
    single value (std 0) and non-float inputs (indices, masks) are left as they are."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    changed = 0
    for x in xs:
        if not (isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 1):
            continue
        flat = x.detach().reshape(-1)          # a view where x is contiguous, a copy otherwise
        # NOTE: no float64 copy of a task-sized tensor (GBs on a GPU): a NaN or inf anywhere makes these so
        std, mean = (float(v) for v in torch.std_mean(flat if flat.dtype == torch.float64 else flat.float()))
        if not (std > 0 and math.isfinite(std) and math.isfinite(mean)):
            continue
        count = max(1, flat.numel() // SPIKE_EVERY)
        where = torch.randint(0, flat.numel(), (count,), generator=gen)
        signs = torch.randint(0, 2, (count,), generator=gen, dtype=torch.float64) * 2 - 1
        values = (mean + signs * SPIKE_SIGMAS * std).to(x.dtype)
        flat[where.to(flat.device)] = values.to(flat.device)
        if flat.data_ptr() != x.data_ptr():
            x.detach().copy_(flat.view(x.shape))
        changed += 1
    return changed
