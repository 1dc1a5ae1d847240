"""What one cell cost: training time and rate, peak memory, the device, and energy where the
machine has counters for it. Read from the operating system's and the driver's own counters;
a quantity the machine does not expose is None (energy: ``energy_source = "not measured"``),
never an estimate from a model of the hardware.

:class:`CostMeter` is a context manager around a cell's work
(:func:`pipeline.runtime.cells.one_cell.run_cell` wraps training and the export of its held-out
embeddings in it). What it measures, and the limits:

- **Peak RSS** (``peak_rss_bytes``): a Ray worker process trains many cells, so its lifetime peak
  (``getrusage``'s ``ru_maxrss``) is not one cell's. On entry the meter resets the kernel's
  resident-set high-water mark of this process (Linux: writing ``5`` to ``/proc/self/clear_refs``,
  Documentation/filesystems/proc.rst), and on exit reads it back (``VmHWM`` of
  ``/proc/self/status``): the most memory the process had resident at any moment while the cell
  ran. It includes what the process held at the start (the interpreter, torch, the dataset, and
  memory the allocator kept from earlier cells), recorded as ``rss_start_bytes``; memory reused
  from that keep is not counted twice, so ``peak − start`` is a lower bound of the cell's own
  need. Cells that share a process at the same time (threads) would share one mark: a worker
  runs one cell at a time. Without ``/proc`` (not Linux) both are None.
- **CUDA peak** (``cuda_peak_bytes``, CUDA cells only): ``torch.cuda.max_memory_allocated`` after
  ``torch.cuda.reset_peak_memory_stats`` on entry: the most bytes of tensors the caching
  allocator held for this process on the device (not what it reserved, not the CUDA context).
- **Energy** (``energy_joules``): the increase of the energy counters over the cell.
  Intel RAPL (``/sys/class/powercap/intel-rapl:<i>``): every CPU package zone (``package-<i>``)
  and its ``dram`` sub-zone, each counter's wrap-around undone with its ``max_energy_range_uj``
  (at most one wrap between the two readings is seen: a package counter's range is typically
  2^38 µJ ≈ 262 kJ, some 40 minutes at 100 W, so a cell longer than that on a busy socket is
  under-counted). NVML (only when
  ``pynvml`` is importable, CUDA cells): the GPU's ``nvmlDeviceGetTotalEnergyConsumption`` (mJ).
  Both count the whole socket / the whole GPU: work running beside the cell (other cells packed
  on the node, other processes) is included, so per-cell energy over-counts when cells run in
  parallel. Counters that are absent or unreadable (``energy_uj`` is root-only on many kernels)
  give ``energy_joules = None`` and ``energy_source = "not measured"``.

Training time and rate come from the training history (:func:`throughput`), not from the meter.
"""

from __future__ import annotations

import platform
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import torch

from pipeline.metrics import NOT_MEASURED

POWERCAP = Path("/sys/class/powercap")
PROC_SELF = Path("/proc/self")
_PACKAGE_ZONE = re.compile(r"intel-rapl:\d+$")
_SUB_ZONE = re.compile(r"intel-rapl:\d+:\d+$")


# --- training time and rate --------------------------------------------------------------------

def throughput(epoch_seconds: Sequence[float], n: int,
               batch_size: int) -> tuple[float, float | None]:
    """(train_seconds, samples_per_second) of a training history.

    train_seconds: the sum of the epochs' seconds (``EpochRecord.seconds``: each epoch's batches,
    views, forward and backward passes and optimiser steps; not the set-up, the held-out
    snapshots or writing files). samples_per_second: training examples (anchors) whose loss was
    back-propagated, per second: ``epochs × ⌊n / B⌋ · B / train_seconds`` (the last partial batch
    of an epoch is dropped, so this is ``n × epochs / train_seconds`` when B divides n); each
    example also costs its views and negatives, so the rate is not work-equivalent across k.
    None when no epoch ran or no time was measured.
    """
    if n <= 0 or batch_size <= 0:
        raise ValueError(f"n = {n}, batch_size = {batch_size}: both must be > 0")
    seconds = float(sum(epoch_seconds))
    samples = len(epoch_seconds) * (n // batch_size) * batch_size
    return seconds, (samples / seconds if samples and seconds > 0 else None)


# --- peak resident memory ------------------------------------------------------------------------

def reset_peak_rss(proc: Path = PROC_SELF) -> bool:
    """Reset this process's resident-set high-water mark (``VmHWM``) to its current RSS;
    False where the kernel offers no way (not Linux, or ``clear_refs`` not writable)."""
    try:
        (proc / "clear_refs").write_text("5")
    except OSError:
        return False
    return True


def rss_status(proc: Path = PROC_SELF) -> tuple[int | None, int | None]:
    """(VmRSS, VmHWM) of ``/proc/<pid>/status`` in bytes; None for what is not there."""
    try:
        text = (proc / "status").read_text()
    except OSError:
        return None, None
    found = dict(re.findall(r"^(VmRSS|VmHWM):\s+(\d+) kB$", text, flags=re.MULTILINE))
    rss, hwm = found.get("VmRSS"), found.get("VmHWM")
    return (int(rss) * 1024 if rss else None), (int(hwm) * 1024 if hwm else None)


# --- energy --------------------------------------------------------------------------------------

def counter_delta(before: int, after: int, max_range: int) -> int:
    """The increase of a counter that runs from 0 to ``max_range`` and then starts again at 0
    (a RAPL ``energy_uj``), assuming it wrapped at most once between the two readings."""
    if max_range <= 0 or not (0 <= before <= max_range and 0 <= after <= max_range):
        raise ValueError(f"before = {before}, after = {after}, max_range = {max_range}: "
                         "readings must lie in [0, max_range] and max_range must be > 0")
    return after - before if after >= before else max_range - before + after


def rapl_zones(root: Path = POWERCAP) -> list[Path]:
    """The RAPL zones whose energy adds up without overlap (``root`` lists every zone, the
    sub-zones ``intel-rapl:<i>:<j>`` beside their packages, as ``/sys/class/powercap`` does): each
    CPU package
    (``intel-rapl:<i>`` named ``package-<i>``) and its ``dram`` sub-zone (DRAM is outside the
    package's count; core and uncore sub-zones are inside it, and ``psys`` holds the packages)."""
    zones = []
    for path in sorted(root.glob("intel-rapl:*")) if root.is_dir() else []:
        name = _read(path / "name")
        if (_PACKAGE_ZONE.match(path.name) and name.startswith("package")) or (
                _SUB_ZONE.match(path.name) and name == "dram"):
            zones.append(path)
    return zones


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def read_rapl(root: Path = POWERCAP) -> dict[str, tuple[int, int]] | None:
    """Zone → (``energy_uj``, ``max_energy_range_uj``) of :func:`rapl_zones`; None when there is
    no zone or one of them cannot be read."""
    out = {}
    for zone in rapl_zones(root):
        energy, top = _read(zone / "energy_uj"), _read(zone / "max_energy_range_uj")
        if not (energy.isdigit() and top.isdigit()):
            return None
        label = _read(zone / "name")  # a sub-zone intel-rapl:<i>:<j> is listed beside its parent
        parent = (_read(root / zone.name.rsplit(":", 1)[0] / "name")
                  if _SUB_ZONE.match(zone.name) else "")
        out[f"{parent}/{label}" if parent else label] = (int(energy), int(top))
    return out or None


def rapl_joules(before: dict[str, tuple[int, int]] | None,
                after: dict[str, tuple[int, int]] | None) -> float | None:
    """Joules between two :func:`read_rapl` readings (summed over zones); None unless both
    readings hold the same zones."""
    if not before or not after or set(before) != set(after):
        return None
    micro = sum(counter_delta(before[z][0], after[z][0], after[z][1]) for z in before)
    return micro / 1e6


def _nvml_millijoules(device: torch.device) -> int | None:
    """The GPU's energy counter (mJ since the driver loaded) by NVML, found by its PCI bus id
    (so ``CUDA_VISIBLE_DEVICES`` renumbering does not matter); None without pynvml, on a GPU
    without the counter (before Volta), or on any NVML error."""
    try:
        import pynvml  # type: ignore[import-not-found]  # optional, not a dependency
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        props: Any = torch.cuda.get_device_properties(device)  # the stubs lack the PCI ids
        bus = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
        handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus)
        return int(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle))
    except Exception:  # noqa: BLE001 — no counter is "not measured", never a failed cell
        return None


# --- the meter -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Cost:
    """What :class:`CostMeter` measured over one cell (bytes, joules, seconds); None: not
    measured on this machine. ``energy_source``: the counters summed ("rapl: package-0,
    package-0/dram", "nvml: GPU <its name>") or ``"not measured"``."""

    device: str
    device_name: str
    rss_start_bytes: int | None
    peak_rss_bytes: int | None
    cuda_peak_bytes: int | None
    energy_joules: float | None
    energy_source: str

    def as_record(self) -> dict[str, Any]:
        return asdict(self)


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's model name (``/proc/cpuinfo``, else ``platform``)."""
    if device.type == "cuda":
        return str(torch.cuda.get_device_name(device))
    model = re.search(r"^model name\s*:\s*(.+)$", _read(Path("/proc/cpuinfo")), re.MULTILINE)
    return model.group(1).strip() if model else (platform.processor() or platform.machine())


class CostMeter:
    """``with CostMeter(device) as meter: ...`` then ``meter.cost``: see the module docstring.
    ``powercap`` and ``proc``: where the RAPL zones and this process's ``/proc`` entry are (the
    tests point them at fake folders). Never raises for a counter it cannot read."""

    def __init__(self, device: torch.device, powercap: Path = POWERCAP, proc: Path = PROC_SELF):
        self.device, self.powercap, self.proc = device, powercap, proc
        self.cost: Cost | None = None
        self._cuda = device.type == "cuda" and torch.cuda.is_available()

    def __enter__(self) -> CostMeter:
        self._reset = reset_peak_rss(self.proc)
        self._rss_start = rss_status(self.proc)[0]
        if self._cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        self._nvml = _nvml_millijoules(self.device) if self._cuda else None
        self._rapl = read_rapl(self.powercap)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self._cuda:
            torch.cuda.synchronize(self.device)
        rapl_after = read_rapl(self.powercap)
        nvml_after = _nvml_millijoules(self.device) if self._cuda else None
        cuda_peak = int(torch.cuda.max_memory_allocated(self.device)) if self._cuda else None
        peak = rss_status(self.proc)[1] if self._reset else None
        parts, sources = [], []
        joules = rapl_joules(self._rapl, rapl_after)
        if joules is not None and rapl_after is not None:
            parts.append(joules)
            sources.append("rapl: " + ", ".join(sorted(rapl_after)))
        if self._nvml is not None and nvml_after is not None and nvml_after >= self._nvml:
            parts.append((nvml_after - self._nvml) / 1e3)
            sources.append(f"nvml: GPU {torch.cuda.get_device_name(self.device)}")
        self.cost = Cost(str(self.device), device_name(self.device),
                         self._rss_start if self._reset else None, peak, cuda_peak,
                         sum(parts) if parts else None, "; ".join(sources) or NOT_MEASURED)
