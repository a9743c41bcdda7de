"""A small decoder-only LLaMA-style language model with switchable attention.

RMSNorm pre-normalisation, rotary position embeddings (RoPE), SwiGLU MLPs,
causal multi-head attention through :func:`sage.nn.attention.attend`
(SDPA or SageBwd), and optional QK-norm: an RMSNorm with a learned scale
(one per channel of a head, shared by the heads) applied to each head's
query and key vector *before* RoPE (the SageBwd paper's stabiliser; spec
section 5). Parameters are float32; run the model under
``torch.autocast(..., dtype=torch.bfloat16)`` for bf16 mixed precision.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

import torch
import torch.nn.functional as F
from torch import nn

from sage.nn.attention import AttentionOptions, attend


@dataclass(frozen=True)
class LlamaConfig:
    """Model shape and switches.

    ``mlp_hidden`` 0 means ``8/3 * dim`` rounded up to a multiple of 64.
    """

    vocab_size: int = 8192
    dim: int = 384
    n_layers: int = 6
    n_heads: int = 6
    max_seq_len: int = 512
    mlp_hidden: int = 0
    qk_norm: bool = True
    norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    init_std: float = 0.02
    attention: AttentionOptions = field(default_factory=AttentionOptions)

    @property
    def head_dim(self) -> int:
        """Channels per head (``dim / n_heads``)."""
        return self.dim // self.n_heads

    @property
    def hidden(self) -> int:
        """The SwiGLU hidden width."""
        return self.mlp_hidden or 64 * math.ceil(8 * self.dim / 3 / 64)

    def __post_init__(self) -> None:
        if self.dim % self.n_heads:
            raise ValueError(f"dim ({self.dim}) must be a multiple of n_heads ({self.n_heads})")

    def to_dict(self) -> dict:
        """A JSON-ready dict (the attention options nested)."""
        return asdict(self)


class RMSNorm(nn.Module):
    """``x / rms(x) * weight`` over the last dimension, computed in float32."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight.float()).to(x.dtype)


def rope_tables(seq_len: int, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables (seq_len, head_dim / 2) of the rotary embedding, float32."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float64), inv_freq)
    return angles.cos().float(), angles.sin().float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotates channel pairs (i, i + D/2) of (B, N, H, D) ``x`` by the position's
    angles (the "rotate half" convention), in float32."""
    x32 = x.float()
    half = x32.shape[-1] // 2
    x1, x2 = x32[..., :half], x32[..., half:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).to(x.dtype)


class Attention(nn.Module):
    """Causal multi-head self-attention with optional QK-norm and RoPE."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim, bias=False)
        self.proj = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.q_norm = RMSNorm(cfg.head_dim, cfg.norm_eps) if cfg.qk_norm else None
        self.k_norm = RMSNorm(cfg.head_dim, cfg.norm_eps) if cfg.qk_norm else None
        #: When set to a list, forward appends its (q, k, v) attention inputs
        #: (B, N, H, D, after QK-norm and RoPE) and its output (with
        #: ``retain_grad`` when it requires grad, so ``o.grad`` is dO after backward).
        self.capture: list | None = None

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.cfg.n_heads, self.cfg.head_dim).unbind(2)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rope(q, cos[:n], sin[:n]), apply_rope(k, cos[:n], sin[:n])
        o = attend(q, k, v, self.cfg.attention, causal=True)
        if self.capture is not None:
            if o.requires_grad:
                o.retain_grad()
            self.capture.append((q.detach(), k.detach(), v.detach(), o))
        return self.proj(o.reshape(b, n, self.cfg.dim))


class SwiGLU(nn.Module):
    """``down(silu(gate(x)) * up(x))``."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.mlp_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.mlp = SwiGLU(cfg.dim, cfg.hidden)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class Llama(nn.Module):
    """Token embedding, ``n_layers`` blocks, final RMSNorm and an untied LM head."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.head = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        cos, sin = rope_tables(cfg.max_seq_len, cfg.head_dim, cfg.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Normal(0, init_std) weights; the residual output projections scaled
        by 1/sqrt(2 n_layers); norms at 1. Uses the global torch RNG in a
        fixed module order (seed it first for a reproducible model)."""
        residual_std = self.cfg.init_std / math.sqrt(2 * self.cfg.n_layers)
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                nn.init.ones_(p)
            elif name.endswith(("proj.weight", "down.weight")):
                nn.init.normal_(p, std=residual_std)
            else:
                nn.init.normal_(p, std=self.cfg.init_std)

    def set_attention(self, options: AttentionOptions) -> None:
        """Switches every layer's attention backend/options (same weights)."""
        self.cfg = replace(self.cfg, attention=options)
        for block in self.blocks:
            block.attn.cfg = self.cfg

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits (B, N, vocab) for int64 tokens (B, N), N <= max_seq_len."""
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, self.rope_cos, self.rope_sin)
        return self.head(self.norm(x))

    def loss(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross entropy (float32) of ``targets`` given ``tokens``."""
        logits = self(tokens)
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))

    def num_parameters(self, embeddings: bool = True) -> int:
        """Parameter count (without the embedding and head when ``embeddings`` is False)."""
        skip = () if embeddings else ("embed.weight", "head.weight")
        return sum(p.numel() for name, p in self.named_parameters() if name not in skip)


__all__ = ["Attention", "Block", "Llama", "LlamaConfig", "RMSNorm", "SwiGLU", "apply_rope",
           "rope_tables"]
