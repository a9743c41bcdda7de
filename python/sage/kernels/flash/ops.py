"""The sage FlashAttention forward on torch tensors (``@sage.jit``), for benchmarks and tests.

:func:`flash_attention` ``(q, k, v, causal=False, sm_scale=None) -> o`` (or
``(o, lse)``): softmax(q kᵀ · sm_scale) v in f16 or bf16 with f32
accumulation, the tile plan of :func:`default_tiles` unless given one.
CUDA tensors run on the GPU; CPU tensors run the same kernel in the CPU
interpreter (slow: for tests).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass

import torch

from sage.jit import jit
from sage.kernels.device import sm_count
from sage.kernels.flash.kernels import flash_forward

#: One JIT object (its in-memory cache of compiled specialisations persists
#: across calls); q, k, v and o may be strided (unit last stride).
FLASH = jit(flash_forward, strided=("q", "k", "v", "o"))

#: log2(e): the kernel's softmax runs in base 2.
LOG2E = 1.4426950408889634
DTYPES = (torch.float16, torch.bfloat16)
#: Grid axes 1 and 2 (heads, batch) hold at most this many programs.
MAX_GRID_YZ = 65535
#: Programs of a persistent plan in the CPU interpreter: few, so that each
#: walks several tiles.
INTERPRETED_PROGRAMS = 3


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class FlashTiles:
    """One launch plan: query and key block sizes, pipeline stages, warps,
    a register cap and the schedule.

    ``block_m`` rows are split over the warpgroups (64 rows each on wgmma:
    128 rows on 8 warps). ``maxnreg`` caps the registers per thread (None:
    as many as needed). With ``warp_specialize`` a producer warpgroup beside
    the ``num_warps`` consumer warps issues the K and V copies
    (``sl.range(..., warp_specialize=True)``; needs ``stages >= 2`` and no
    ``maxnreg``, since setmaxnreg splits the registers between the roles);
    with ``ping_pong`` (and 8 warps) the two consumer warpgroups take turns
    issuing their matmuls, so one's softmax runs under the other's.
    ``persistent`` launches one program per SM, each walking the tiles (a
    block of ``block_m`` query rows of one head) in the kernel's order.
    With ``tma_store`` the copy engine writes O from shared memory
    (``sl.store(..., tma=True)``).
    """

    block_m: int
    block_n: int
    stages: int
    num_warps: int
    maxnreg: int | None = None
    warp_specialize: bool = False
    ping_pong: bool = False
    persistent: bool = False
    tma_store: bool = False

    def __post_init__(self) -> None:
        for name in ("block_m", "block_n"):
            size = getattr(self, name)
            if not _is_int(size) or size < 16 or size & (size - 1):
                raise ValueError(f"{name} must be a power of two >= 16, got {size!r}")
        if not _is_int(self.stages) or self.stages < 1:
            raise ValueError(f"stages must be an int >= 1, got {self.stages!r}")
        if self.num_warps not in (4, 8):
            raise ValueError(f"num_warps must be 4 or 8, got {self.num_warps!r}")
        if self.maxnreg is not None and not (_is_int(self.maxnreg) and 24 <= self.maxnreg <= 255):
            raise ValueError(f"maxnreg must be None or an int in [24, 255], got {self.maxnreg!r}")
        if not isinstance(self.warp_specialize, bool):
            raise ValueError(f"warp_specialize must be a bool, got {self.warp_specialize!r}")
        if not isinstance(self.ping_pong, bool):
            raise ValueError(f"ping_pong must be a bool, got {self.ping_pong!r}")
        if not isinstance(self.persistent, bool):
            raise ValueError(f"persistent must be a bool, got {self.persistent!r}")
        if not isinstance(self.tma_store, bool):
            raise ValueError(f"tma_store must be a bool, got {self.tma_store!r}")
        if self.ping_pong and not (self.warp_specialize and self.num_warps == 8):
            raise ValueError("ping_pong needs warp_specialize and num_warps=8 (two consumer "
                             "warpgroups take turns), got "
                             f"warp_specialize={self.warp_specialize}, "
                             f"num_warps={self.num_warps}")
        if self.warp_specialize and (self.stages < 2 or self.maxnreg is not None):
            raise ValueError("warp_specialize needs stages >= 2 and no maxnreg (the producer "
                             f"fills stages ahead; setmaxnreg splits the registers), got "
                             f"stages={self.stages}, maxnreg={self.maxnreg}")

    def constexprs(self) -> dict[str, int | bool]:
        """The kernel's block, stage and schedule constexprs."""
        return {"BLOCK_M": self.block_m, "BLOCK_N": self.block_n, "STAGES": self.stages,
                "WARP_SPECIALIZE": self.warp_specialize,
                "PING_PONG": self.ping_pong, "PERSISTENT": self.persistent,
                "TMA_STORE": self.tma_store}

    def options(self) -> dict[str, int | None]:
        """The launch options (``num_warps``, ``maxnreg``)."""
        return {"num_warps": self.num_warps, "maxnreg": self.maxnreg}

    def grid(self, n: int, heads: int, batch: int, programs: int = 0
             ) -> tuple[int, int, int]:
        """One program per block of ``block_m`` query rows of each (head,
        batch), or, ``persistent``, at most ``programs`` (the SMs)."""
        blocks = -(-n // self.block_m)
        if self.persistent:
            if programs <= 0:
                raise ValueError("a persistent plan's grid needs a program count (the SMs)")
            return (max(1, min(blocks * heads * batch, programs)), 1, 1)
        return (blocks, heads, batch)

    def as_dict(self) -> dict[str, int | bool | None]:
        """The plan's fields by name (``FlashTiles(**plan.as_dict()) == plan``)."""
        return asdict(self)


#: 128 x 128 tiles on two consumer warpgroups (64 query rows each) and a
#: producer warpgroup that issues the K and V copies two stages ahead (for
#: both loops, sharing their rings). ptxas -v at sm_90a: 168 registers at
#: launch (setmaxnreg then gives the consumers 232), no spills. On the H100
#: at B4 H32 N8K (bench/results/2026-11-26-h100-flash-*) the producer took
#: the D=128 forward from 0.65-0.74x to 0.81-0.83x cuDNN, and copying V's
#: tiles as they are (N-major wgmma B) instead of first making a Vᵀ copy
#: from 0.86x to 0.93x (causal 0.80x to 0.98x).
#: Ping-pong (``ping_pong=True``) is not the default: in three runs (each
#: beside the plan without turns) it moved D=128 by -3 to +1 % and D=64
#: causal by -7 to +4 %, and with V copied as it is -0.4 to -5 %.
#: Persistent (``persistent=True``) is the default at D=64 only: with V
#: copied as it is it moved D=64 by +2 to +5 % and D=64 causal by +1.3 %
#: (two H100 runs, 2026-11-26-h100-flash-mn-major*), D=128 by 0 to +1.5 %
#: and D=128 causal by -2.7 to -3.5 % (a static split of unequal tiles over
#: 132 programs balances worse than the hardware's scheduling of one
#: program per tile).
#: O stored by the copy engine (``tma_store=True``) is the default at D=128:
#: +2.5 % (causal +2.4 %) in one H100 run (2026-11-26-h100-flash-tma-store),
#: neutral at D=64.
TILES = {64: FlashTiles(128, 128, 2, 8, warp_specialize=True, persistent=True),
         128: FlashTiles(128, 128, 2, 8, warp_specialize=True, tma_store=True)}
#: The head dimensions the entry point takes: those with a plan.
HEAD_DIMS = tuple(TILES)


def default_tiles(head_dim: int) -> FlashTiles:
    """The default plan for head dimension ``head_dim`` (64 or 128)."""
    if head_dim not in TILES:
        raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {head_dim}")
    return TILES[head_dim]


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
           sm_scale: float | None, tiles: FlashTiles | None, return_lse: bool) -> float:
    """Raises TypeError/ValueError for unsupported arguments; returns the scale."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.dtype not in DTYPES:
            raise TypeError(f"{name} must be torch.float16 or torch.bfloat16, got {x.dtype}")
        if x.dim() != 4:
            raise ValueError(f"{name} must be 4-D (batch, heads, seq, head_dim), got shape "
                             f"{tuple(x.shape)}")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"q, k and v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not q.device == k.device == v.device:
        raise ValueError(f"q, k and v must be on one device, got {q.device}, {k.device}, "
                         f"{v.device}")
    if q.device.type not in ("cuda", "cpu"):
        raise ValueError(f"q, k and v must be CUDA tensors (or CPU tensors, interpreted), "
                         f"got {q.device}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have one shape, got {tuple(k.shape)} and "
                         f"{tuple(v.shape)}")
    batch, heads, _, d = q.shape
    if k.shape[0] != batch or k.shape[3] != d:
        raise ValueError(f"k must be (batch={batch}, kv_heads, seq_kv, head_dim={d}), got "
                         f"{tuple(k.shape)}")
    if d not in HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {d}")
    if k.shape[1] == 0 or heads % k.shape[1]:
        raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({k.shape[1]})")
    if k.shape[2] == 0:
        raise ValueError("k and v must hold at least one key (seq_kv = 0)")
    if heads > MAX_GRID_YZ or batch > MAX_GRID_YZ:
        raise ValueError(f"batch ({batch}) and heads ({heads}) must each be at most "
                         f"{MAX_GRID_YZ} (grid axes)")
    for name, flag in (("causal", causal), ("return_lse", return_lse)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool, got {type(flag).__name__}")
    if tiles is not None and not isinstance(tiles, FlashTiles):
        raise TypeError(f"tiles must be a FlashTiles, got {type(tiles).__name__}")
    if sm_scale is None:
        return 1.0 / math.sqrt(d)
    if isinstance(sm_scale, bool) or not isinstance(sm_scale, numbers.Real):
        raise TypeError(f"sm_scale must be a real number or None, got "
                        f"{type(sm_scale).__name__}")
    if not math.isfinite(sm_scale):
        raise ValueError(f"sm_scale must be finite, got {sm_scale}")
    return float(sm_scale)


def _unit_last_stride(x: torch.Tensor) -> torch.Tensor:
    """``x`` itself when its last dimension has stride 1 (read in place), else a copy."""
    return x if x.stride(-1) == 1 else x.contiguous()


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    sm_scale: float | None = None, tiles: FlashTiles | None = None,
                    return_lse: bool = False
                    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Attention forward, ``softmax(q kᵀ · sm_scale) v``, by the sage FlashAttention kernel.

    Args:
        q: (B, H, N, D); k, v: (B, Hkv, Nkv, D) with H a multiple of Hkv
            (GQA/MQA). float16 or bfloat16, all one dtype and one device, D 64
            or 128, Nkv >= 1. Any strides with a unit last stride are read in
            place (torch SDPA's (B, H, N, D) layout, or (B, N, H, D) memory
            seen through ``transpose(1, 2)``); other tensors are copied first.
        causal: mask aligned top-left, as ``scaled_dot_product_attention(...,
            is_causal=True)``: query i sees keys j <= i.
        sm_scale: the softmax scale, a finite real number (default 1/sqrt(D)).
        tiles: the launch plan (default :func:`default_tiles` of D).
        return_lse: also return the row log-sum-exp.

    Returns:
        O (B, H, N, D), contiguous, in q's dtype; with ``return_lse`` also LSE
        (B, H, N) float32, natural log: ``ln sum_j exp(sm_scale q_i . k_j)``
        over the keys row i sees.

    Raises:
        TypeError: an argument of the wrong type (not a tensor, a dtype other
            than f16/bf16 or mixed dtypes, a non-bool ``causal`` or ``return_lse``, a
            non-number ``sm_scale``, ``tiles`` not a :class:`FlashTiles`).
        ValueError: shapes that do not fit, several devices or one neither CUDA
            nor CPU, D not 64/128, Nkv = 0, H or B above 65535, a non-finite
            ``sm_scale``.
    """
    scale = _check(q, k, v, causal, sm_scale, tiles, return_lse)
    batch, heads, n, d = q.shape
    kv_heads, n_kv = k.shape[1], k.shape[2]
    plan = tiles or default_tiles(d)
    o = torch.empty((batch, heads, n, d), dtype=q.dtype, device=q.device)
    lse = torch.empty((batch, heads, n) if return_lse else (1,), dtype=torch.float32,
                      device=q.device)
    if n == 0 or batch == 0 or heads == 0:  # nothing to compute (and no empty grid)
        return (o, lse) if return_lse else o
    q, k, v = (_unit_last_stride(x) for x in (q, k, v))
    args = (q, k, v, o, lse, scale * LOG2E, n, n_kv, batch, heads,
            *(x.stride(i) for x in (q, k, v, o) for i in range(3)))
    # A positive scale (the usual case) lets the kernel take each row max on
    # the raw logits and fuse the scaling into the exponent's FFMA.
    constexprs = dict(D=d, **plan.constexprs(), CAUSAL=causal, GROUP=heads // kv_heads,
                      STORE_LSE=return_lse, POSITIVE_SCALE=scale > 0)
    cuda = q.device.type == "cuda"
    grid = plan.grid(n, heads, batch, sm_count(q.device.index) if cuda else INTERPRETED_PROGRAMS)
    if cuda:
        FLASH[grid](*args, **constexprs, **plan.options())
    else:
        FLASH.interpret(grid, *args, **constexprs, **plan.options())
    return (o, lse) if return_lse else o
