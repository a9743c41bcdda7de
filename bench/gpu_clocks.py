"""The GPU's SM clock and board power while a benchmark times something.

An H100 running attention at full speed can hit its board power limit (700 W
on the SXM part): the driver then lowers the SM clock (throttle reason "SW
power cap"), and two kernels that do the same work in the same number of
cycles can take different times because they draw different power. A speed
ratio is read correctly only with the clock each side ran at.

:class:`ClockSampler` polls ``nvidia-smi`` in a background thread (every
``period_ms``) for the timed device; :meth:`ClockSampler.window` summarises
the samples taken between two ``time.perf_counter()`` readings. Without
``nvidia-smi`` the sampler is inactive and every window is None. The parsing
is torch-free, so the CPU tests cover it.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any

#: What each sample asks ``nvidia-smi --query-gpu`` for, in this order.
QUERY = "clocks.sm,power.draw,clocks_event_reasons.active"
#: Bits of ``clocks_event_reasons.active`` that mean the power limit holds the
#: clock down: the driver's power cap (0x4) and the hardware power brake (0x80).
POWER_REASONS = 0x4 | 0x80


@dataclass(frozen=True)
class Sample:
    """One ``nvidia-smi`` reading: host time (``time.perf_counter``), SM clock
    (MHz), board power (W) and the active clock event (throttle) reasons."""

    at: float
    sm_mhz: float
    power_w: float
    reasons: int


def parse_sample(line: str, at: float) -> Sample | None:
    """The :class:`Sample` of one CSV line of :data:`QUERY` (``--format=csv,
    noheader,nounits``), or None for a line that is not one (a header, "[N/A]")."""
    fields = [field.strip() for field in line.split(",")]
    if len(fields) != 3:
        return None
    try:
        return Sample(at, float(fields[0]), float(fields[1]), int(fields[2], 16))
    except ValueError:
        return None


def summarise(samples: list[Sample]) -> dict[str, Any] | None:
    """Mean SM clock and power of ``samples``, the lowest clock, and the
    fraction of them held down by the power limit (:data:`POWER_REASONS`);
    None without samples."""
    if not samples:
        return None
    return {"sm_mhz": statistics.fmean(s.sm_mhz for s in samples),
            "min_sm_mhz": min(s.sm_mhz for s in samples),
            "power_w": statistics.fmean(s.power_w for s in samples),
            "power_capped": sum(bool(s.reasons & POWER_REASONS) for s in samples) / len(samples),
            "samples": len(samples)}


def cell(summary: dict[str, Any] | None) -> str | None:
    """A table cell for a :func:`summarise` result: the mean SM clock (MHz),
    with "cap" where the power limit held it down in at least half of the
    samples; None without samples."""
    if not summary:
        return None
    return f"{summary['sm_mhz']:.0f}" + (" cap" if summary["power_capped"] >= 0.5 else "")


class ClockSampler:
    """``nvidia-smi`` polled in the background while the context is open.

    ``device`` selects the GPU as ``nvidia-smi -i`` does (an index, or a UUID
    "GPU-..."); None: the first. Inactive (``active`` False, every window
    None) where ``nvidia-smi`` is not installed or does not start.
    """

    def __init__(self, device: str | None = None, period_ms: int = 20) -> None:
        self.device, self.period_ms = device, period_ms
        self.samples: list[Sample] = []
        self._process: subprocess.Popen[str] | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        """Whether samples are being taken."""
        return self._process is not None

    def __enter__(self) -> ClockSampler:
        smi = shutil.which("nvidia-smi")
        if smi is None:
            return self
        command = [smi, f"--query-gpu={QUERY}", "--format=csv,noheader,nounits",
                   f"--loop-ms={self.period_ms}"]
        if self.device is not None:
            command.append(f"--id={self.device}")
        try:
            self._process = subprocess.Popen(command, stdout=subprocess.PIPE,
                                             stderr=subprocess.DEVNULL, text=True, bufsize=1)
        except OSError:
            return self
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        return self

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            sample = parse_sample(line, time.perf_counter())
            if sample is not None:
                with self._lock:
                    self.samples.append(sample)

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover - a hung nvidia-smi
                self._process.kill()
            self._process = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def window(self, start: float, end: float) -> dict[str, Any] | None:
        """:func:`summarise` of the samples taken from ``start`` to ``end``
        (``time.perf_counter()`` readings); None if none was."""
        with self._lock:
            inside = [s for s in self.samples if start <= s.at <= end]
        return summarise(inside)


def current_device_sampler(torch: Any, period_ms: int = 20) -> ClockSampler:
    """A :class:`ClockSampler` of torch's current CUDA device (the first GPU
    where torch does not report the device's UUID)."""
    return ClockSampler(cuda_device_id(torch), period_ms)


def cuda_device_id(torch: Any) -> str | None:
    """``nvidia-smi``'s id ("GPU-<uuid>") of torch's current CUDA device, or None
    where torch does not report its UUID."""
    try:
        uuid = torch.cuda.get_device_properties(torch.cuda.current_device()).uuid
    except (AttributeError, RuntimeError):
        return None
    return f"GPU-{uuid}"
