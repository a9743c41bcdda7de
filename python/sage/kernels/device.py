"""Properties of the CUDA device a launch plan is sized for (cached per device)."""

from __future__ import annotations

import functools

import torch


@functools.lru_cache(maxsize=None)
def sm_count(device: int) -> int:
    """The number of SMs of CUDA device ``device``: a persistent grid's size."""
    return torch.cuda.get_device_properties(device).multi_processor_count


@functools.lru_cache(maxsize=None)
def shared_memory(device: int) -> int:
    """The shared memory one program of CUDA device ``device`` may opt in to, in bytes."""
    return torch.cuda.get_device_properties(device).shared_memory_per_block_optin
