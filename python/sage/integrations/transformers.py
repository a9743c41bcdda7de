"""Hugging Face transformers: ``attn_implementation="sage"``.

    import sage.integrations.transformers
    sage.integrations.transformers.register()
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sage")

:func:`register` adds the attention function :func:`sage_attention_forward`
under the name ``"sage"`` to ``transformers.AttentionInterface``, with
transformers' own FlashAttention mask function (None unless some token is
padding). Models that go through the attention interface (Llama, Qwen3, and
the others written the same way) then run SageBwd attention in training and
in ``generate``: decoding has fewer queries than keys, and sage's causal
masking is aligned bottom-right, as FlashAttention's.

What sage does not support raises :class:`UnsupportedAttentionOption`
naming the option, never a silent fallback: a padding or custom mask,
dropout > 0, sliding windows, logit softcapping, attention sinks, packed
(varlen) sequences, returning attention weights.
"""

from __future__ import annotations

from typing import Any

import torch

import sage

#: The name models select with ``attn_implementation=``.
NAME = "sage"


class UnsupportedAttentionOption(ValueError):
    """A transformers attention option sage does not implement; the message names it."""


def _reject(option: str, detail: str) -> UnsupportedAttentionOption:
    return UnsupportedAttentionOption(
        f"sage attention (attn_implementation='sage') does not support {option}: {detail}")


# Keyword arguments of the attention interface that ask for something sage
# does not do, when set (not None / not False).
_UNSUPPORTED_KWARGS = {
    "sliding_window": "sliding-window attention (a layer with sliding_window set)",
    "softcap": "attention logit softcapping",
    "s_aux": "attention sinks",
    "cu_seq_lens_q": "packed (varlen) sequences",
    "cu_seq_lens_k": "packed (varlen) sequences",
    "output_attentions": "returning attention weights",
}


def _compute_dtype(x: torch.Tensor) -> torch.dtype:
    """The 16-bit dtype sage computes in: the input's, else the autocast
    dtype of its device, else bfloat16 (float32 models, as transformers'
    FlashAttention path does)."""
    if x.dtype in (torch.float16, torch.bfloat16):
        return x.dtype
    if torch.is_autocast_enabled(x.device.type):
        dtype = torch.get_autocast_dtype(x.device.type)
        if dtype in (torch.float16, torch.bfloat16):
            return dtype
    return torch.bfloat16


def sage_attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                           value: torch.Tensor, attention_mask: torch.Tensor | None,
                           dropout: float = 0.0, scaling: float | None = None,
                           is_causal: bool | None = None, **kwargs: Any
                           ) -> tuple[torch.Tensor, None]:
    """The transformers attention interface over :func:`sage.attention`.

    Args:
        module: the attention layer (its ``is_causal`` is the default for
            ``is_causal``).
        query: (B, H, N, D); key, value: (B, Hkv, Nkv, D) (GQA as they come,
            not repeated).
        attention_mask: must be None (transformers passes None when no token
            is padding).
        dropout: must be 0.
        scaling: the softmax scale (default 1/sqrt(D)).
        is_causal: causal masking, aligned bottom-right when N < Nkv.

    Returns:
        (attention output (B, N, H, D) in query's dtype, None).

    Raises:
        UnsupportedAttentionOption: naming the option (see the module doc).
        sage.attention_checks.AttentionArgumentError: for shapes sage does not
            take (head_dim other than 64 or 128, for example).
    """
    if attention_mask is not None:
        raise _reject("attention_mask", "a padding or custom mask (pass batches without "
                                        "padding, or use attn_implementation='sdpa')")
    if dropout:
        raise _reject("dropout", f"dropout must be 0, got {dropout} (set the config's "
                                 "attention_dropout to 0)")
    for option, what in _UNSUPPORTED_KWARGS.items():
        if kwargs.get(option) not in (None, False):
            raise _reject(option, what)
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    dtype = _compute_dtype(query)
    # transformers hands (B, H, N, D) transposes of (B, N, H, D) projections:
    # their bshd views are read in place, and O comes back contiguous (B, N, H, D).
    q, k, v = (x.to(dtype).transpose(1, 2) for x in (query, key, value))
    out = sage.attention(q, k, v, causal=bool(causal), sm_scale=scaling, layout="bshd")
    return out.to(query.dtype), None


def register() -> None:
    """Registers ``attn_implementation="sage"`` with transformers (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    AttentionInterface.register(NAME, sage_attention_forward)
    # FlashAttention's mask function: None unless a token is padding, which
    # sage_attention_forward then rejects by name.
    AttentionMaskInterface.register(NAME, ALL_MASK_ATTENTION_FUNCTIONS["flash_attention_2"])


__all__ = ["NAME", "UnsupportedAttentionOption", "register", "sage_attention_forward"]
