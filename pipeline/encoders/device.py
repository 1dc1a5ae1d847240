"""Device, numeric precision and memory format of a cell's training (CPU and CUDA alike).

- ``train.precision``: ``float32``; ``bfloat16`` — the encoder's training-mode forward passes
  run under ``torch.autocast(<device>, torch.bfloat16)`` (weights, gradients and optimizer state
  stay float32; the encoder's output is cast back to float32, so every loss is computed in
  float32); ``auto`` — whichever of the two trains faster on this device, by a measurement.
- ``train.memory_format``: ``contiguous``; ``channels_last`` — the weights of an image encoder
  and its 4-D inputs in NHWC order (oneDNN and cuDNN convolutions are faster that way);
  ``auto`` — measured likewise. Vector encoders have no such layout: always ``contiguous``.

Both apply to training only: an encoder in eval mode (held-out embeddings, snapshots, every
later stage) runs in float32 on its float32 weights, so the exported numbers are computed the
same way whatever the training ran in. On this project's CPUs the fast path differs by machine
(ResNet-18 at 32×32 trained 1.9× faster in bf16 on an AVX512-BF16 EPYC; a CPU without bf16
arithmetic emulates it and is slower), which is why ``auto`` measures instead of assuming, and
why what it chose is returned (:class:`ComputeMode`) to be recorded with the cell: two machines
may train the same cell id differently, and the record says so. The default stays float32.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import platform
import statistics
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

PRECISIONS = ("float32", "bfloat16")
MEMORY_FORMATS = ("contiguous", "channels_last")
DEFAULT = ("float32", "contiguous")
# `auto` leaves the default only for a setting at least this much faster (median throughput):
# measurements on a shared machine move by a few percent, and a near-tie must not flip a
# cell's numerics from one run to the next.
AUTO_MARGIN = 0.10


class DeviceUnavailableError(ValueError):
    """The cell asks for a device this node does not have: a failure of where it ran, not of the
    cell (it is retried on the next run, e.g. with ``compute.num_gpus > 0``)."""


def pick_device(prefer: str = "auto") -> torch.device:
    """``'auto'``: cuda if available else cpu; ``'cpu'``; ``'cuda'`` / ``'cuda:N'`` (must exist)."""
    if prefer == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if prefer == "cpu":
        return torch.device("cpu")
    if prefer.startswith("cuda"):
        if not torch.cuda.is_available():
            raise DeviceUnavailableError(
                f"device = {prefer!r}: CUDA is not available here ({_no_cuda_why()}); "
                "allowed: 'auto' (falls back to the CPU), 'cpu', or run the cell on "
                "a node with a GPU (compute.num_gpus > 0)")
        return torch.device(prefer)
    raise ValueError(f"device = {prefer!r}: allowed: 'auto', 'cpu', 'cuda', 'cuda:N'")


def _no_cuda_why() -> str:
    import os

    built = torch.version.cuda
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    where = f"node {platform.node()}, torch {torch.__version__}"
    if built is None:
        return f"{where} is a CPU-only build"
    return f"{where} built for CUDA {built}, no usable device, CUDA_VISIBLE_DEVICES={visible!r}"


def device_name(device: torch.device) -> str:
    """A readable name of the device: the GPU's model, or the CPU's model and thread count."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{_cpu_model()} ({torch.get_num_threads()} threads)"


@functools.cache
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def autocast_context(device: torch.device,
                     precision: str) -> contextlib.AbstractContextManager[Any]:
    """``torch.autocast(device.type, bfloat16)`` for ``precision == 'bfloat16'``, else a no-op."""
    if precision == "bfloat16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    if precision != "float32":
        raise ValueError(
            f"train.precision = {precision!r}: allowed: {list(PRECISIONS)} (or 'auto', "
            "resolved by resolve_compute_mode)")
    return contextlib.nullcontext()


@dataclass(frozen=True)
class ComputeMode:
    """How a cell trained: what it ran in, and why (recorded with the cell).

    precision / memory_format: the settings that ran (never ``auto``); requested: the params
    values (``train.precision``, ``train.memory_format``); chosen_by: ``params`` (as requested),
    ``measured`` (``auto``: the fastest setting by at least :data:`AUTO_MARGIN`, else the
    default) or ``not applicable`` (no trainable weights, or channels_last for vector inputs);
    device: the device's model; images_per_second: the measurement behind an ``auto`` choice,
    one entry per setting tried (``"bfloat16/channels_last"`` ...).
    """

    precision: str
    memory_format: str
    requested: tuple[str, str]
    chosen_by: str
    device: str
    images_per_second: Mapping[str, float] = field(default_factory=dict)

    def as_record(self) -> dict[str, Any]:
        """JSON-ready: the ``compute`` entry of a cell record."""
        return {"precision": self.precision, "memory_format": self.memory_format,
                "requested": {"precision": self.requested[0], "memory_format": self.requested[1]},
                "chosen_by": self.chosen_by, "device": self.device,
                "images_per_second": dict(self.images_per_second)}


def _check(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in (*allowed, "auto"):
        raise ValueError(f"train.{name} = {value!r}: allowed: {[*allowed, 'auto']}")


def check_bf16(device: torch.device) -> None:
    """bfloat16 needs a GPU that computes in it (Ampere and later); any CPU can (maybe slowly)."""
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ValueError(f"train.precision = 'bfloat16': {torch.cuda.get_device_name(device)} "
                         "has no bfloat16 arithmetic; allowed here: 'float32' or 'auto'")


def candidates(precision: str, memory_format: str, image_input: bool,
               device: torch.device) -> list[tuple[str, str]]:
    """The (precision, memory format) settings ``auto`` chooses among, the default first."""
    _check("precision", precision, PRECISIONS)
    _check("memory_format", memory_format, MEMORY_FORMATS)
    bf16_ok = device.type != "cuda" or torch.cuda.is_bf16_supported()
    precs = [p for p in PRECISIONS
             if bf16_ok or p == "float32"] if precision == "auto" else [precision]
    fmts = list(MEMORY_FORMATS) if memory_format == "auto" else [memory_format]
    if not image_input:
        fmts = ["contiguous"]
    out = [(p, f) for p in precs for f in fmts]
    out.sort(key=lambda s: s != DEFAULT)
    return out


def resolve_compute_mode(precision: str, memory_format: str, device: torch.device,
                         step: Callable[[str, str], Callable[[], None]] | None,
                         image_input: bool, batch: int) -> ComputeMode:
    """The setting a cell trains with; measures ``step`` per candidate when anything is ``auto``.

    ``step(precision, memory_format)`` returns a function doing one training step of ``batch``
    images in that setting (see :func:`encoder_step`); ``None``: nothing to train.
    """
    requested = (precision, memory_format)
    name = device_name(device)
    if step is None:  # a frozen encoder: nothing trains, the setting is moot
        return ComputeMode(*DEFAULT, requested, "not applicable", name)
    options = candidates(precision, memory_format, image_input, device)
    fmt_na = memory_format == "channels_last" and not image_input
    if len(options) == 1:
        if options[0][0] == "bfloat16":
            check_bf16(device)
        return ComputeMode(*options[0], requested, "not applicable" if fmt_na else "params", name)
    rates = {f"{p}/{f}": batch / seconds for (p, f), seconds in
             measure_settings(step, options).items()}
    base = rates["/".join(options[0])]
    best = max(rates, key=rates.__getitem__)
    pick = best if rates[best] >= (1 + AUTO_MARGIN) * base else "/".join(options[0])
    p, f = pick.split("/")
    return ComputeMode(p, f, requested, "measured", name,
                       {k: round(v, 1) for k, v in rates.items()})


def measure_settings(step: Callable[[str, str], Callable[[], None]],
                     options: list[tuple[str, str]], repeats: int = 3,
                     min_seconds: float = 0.05) -> dict[tuple[str, str], float]:
    """Median seconds per step of each setting: one warm-up step, then ``repeats`` samples.

    A sample is the mean of back-to-back steps lasting at least ``min_seconds`` (a linear
    encoder's step takes microseconds), after one untimed step of the same setting; settings
    take turns, so load from other work hits all.
    """
    fns = {s: step(*s) for s in options}
    for fn in fns.values():
        fn()
    samples: dict[tuple[str, str], list[float]] = {s: [] for s in options}
    for _ in range(repeats):
        for s, fn in fns.items():
            fn()  # untimed: a sample starts in its own setting's steady state
            n, start = 0, time.perf_counter()
            while True:
                fn()
                n += 1
                elapsed = time.perf_counter() - start
                if elapsed >= min_seconds:
                    break
            samples[s].append(elapsed / n)
    return {s: statistics.median(v) for s, v in samples.items()}


def encoder_step(model: nn.Module, input_shape: tuple[int, ...], batch: int,
                 device: torch.device) -> Callable[[str, str], Callable[[], None]]:
    """``step(precision, memory_format)``: one SGD step of a copy of ``model`` on random inputs.

    The copy and the inputs are private (its own generator): measuring never touches the cell's
    weights or random streams.
    """
    gen = torch.Generator().manual_seed(0)
    x = torch.randn((batch, *input_shape), generator=gen).to(device)

    def step(precision: str, memory_format: str) -> Callable[[], None]:
        net = copy.deepcopy(model).to(device).train()
        apply_compute_mode(net, ComputeMode(precision, memory_format, (precision, memory_format),
                                            "params", ""), device)
        params = [p for p in net.parameters() if p.requires_grad]
        opt = torch.optim.SGD(params, lr=1e-3) if params else None

        def run() -> None:
            if opt is None:  # a frozen encoder: its forward is the step
                with torch.no_grad():
                    net(x)
            else:
                opt.zero_grad(set_to_none=True)
                net(x).square().mean().backward()
                opt.step()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        return run
    return step


_CACHE: dict[tuple[Any, ...], ComputeMode] = {}
_CACHE_LOCK = threading.Lock()


def cached_compute_mode(key: tuple[Any, ...], resolve: Callable[[], ComputeMode]) -> ComputeMode:
    """One measurement per (architecture, options, input shape, batch, device, threads) and process.

    A Ray worker trains many cells of one architecture; measuring once keeps ``auto`` cheap,
    and keeps the choice the same for every cell the worker trains.
    """
    with _CACHE_LOCK:
        if key not in _CACHE:
            _CACHE[key] = resolve()
        return _CACHE[key]


def apply_compute_mode(model: nn.Module, mode: ComputeMode, device: torch.device) -> None:
    """Make ``model``'s training-mode forward run in ``mode`` (in place; weights stay float32).

    channels_last: the weights are converted and 4-D inputs made NHWC before the forward.
    bfloat16: the forward runs under autocast and its output is cast to float32. Both happen in
    forward hooks, only while ``model.training``; the state dict (keys, dtypes) is unchanged.
    """
    channels_last = mode.memory_format == "channels_last"
    bf16 = mode.precision == "bfloat16"
    if not (channels_last or bf16):
        return
    if channels_last:
        model.to(memory_format=torch.channels_last)
    contexts: list[contextlib.AbstractContextManager[Any]] = []

    def before(module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        if not module.training:
            return None
        if bf16:
            ctx = autocast_context(device, "bfloat16")
            ctx.__enter__()
            contexts.append(ctx)
        if channels_last:
            return tuple(a.contiguous(memory_format=torch.channels_last)
                         if isinstance(a, Tensor) and a.dim() == 4 else a for a in args)
        return None

    def after(module: nn.Module, args: tuple[Any, ...], output: Any) -> Any:
        if not (bf16 and contexts):
            return None
        contexts.pop().__exit__(None, None, None)
        return output.float() if isinstance(output, Tensor) else output

    model.register_forward_pre_hook(before)
    # always_call: the autocast context is left even when the forward raises
    model.register_forward_hook(after, always_call=True)
