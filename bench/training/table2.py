"""The SageBwd paper's Table 2 on a trained checkpoint: per-tensor error of SageBwd.

Method (as the paper's): run the trained model with *full-precision*
attention (SDPA) on validation sequences, take each layer's attention inputs
q, k, v (after QK-norm and RoPE, the 16-bit values attention sees) and the
upstream gradient dO of the real loss; then, per layer, compare SageBwd on
exactly those inputs with exact attention:

* SageBwd: the float64 emulation of the kernels' quantization decisions
  (:func:`sage.reference.sagebwd.emulate_forward` / ``emulate_backward``,
  which match the GPU kernels to ~1e-4 relative L2);
* reference: :func:`sage.reference.sagebwd.attention_reference` (float64).

Tensors: delta = rowsum(dO o O), P, dP = dO V^T, dS, O, dQ, dK, dV;
metrics: cosine similarity and relative L2 of the flattened tensors. dP is a
16-bit matmul in SageBwd and dO is taken as exact, so dP equals the
reference by construction (the paper's 1.0000 / 0.0000); it is computed from
the same 16-bit dO and V on both sides. The layer reported in full is the one
with the largest mean relative L2 of dQ and dK.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from sage.nn import AttentionOptions, Llama
from sage.reference.sagebwd import (attention_reference, cosine_similarity, emulate_backward,
                                    emulate_forward, relative_l2)

TENSORS = ("delta", "p", "dp", "ds", "o", "dq", "dk", "dv")
LABELS = {"delta": "δ", "p": "P", "dp": "dP", "ds": "dS", "o": "O", "dq": "dQ", "dk": "dK",
          "dv": "dV"}
#: [SBWD] Table 2 (layer 11, QK-normed 2.1M-TPS 325M run): tensor -> (cosine, rel-L2).
PAPER_TABLE2 = {"delta": (0.9973, 0.0736), "p": (0.9917, 0.1293), "dp": (1.0, 0.0),
                "ds": (0.9789, 0.2045), "o": (0.9969, 0.0793), "dq": (0.9664, 0.2579),
                "dk": (0.9537, 0.3074), "dv": (0.9985, 0.0540)}


def capture_layers(model: Llama, tokens: torch.Tensor, targets: torch.Tensor
                   ) -> list[dict[str, np.ndarray]]:
    """Per layer, q, k, v and dO (B, H, N, D) float32 arrays of bf16 values from
    one full-precision (SDPA) forward and backward of the loss on ``tokens``.

    The model's attention options are restored afterwards; its gradients are
    cleared.
    """
    options = model.cfg.attention
    model.set_attention(AttentionOptions(backend="sdpa"))
    captures: list[list] = []
    for block in model.blocks:
        block.attn.capture = []
        captures.append(block.attn.capture)
    try:
        with torch.autocast(tokens.device.type, dtype=torch.bfloat16):
            loss = model.loss(tokens, targets)
        loss.backward()
    finally:
        for block in model.blocks:
            block.attn.capture = None
        model.set_attention(options)
        model.zero_grad(set_to_none=True)

    def arr(x: torch.Tensor) -> np.ndarray:
        return x.detach().to(torch.bfloat16).float().transpose(1, 2).contiguous().cpu().numpy()

    return [{"q": arr(q), "k": arr(k), "v": arr(v), "do": arr(o.grad)}
            for [(q, k, v, o)] in captures]


def layer_errors(q: np.ndarray, k: np.ndarray, v: np.ndarray, do: np.ndarray,
                 options: AttentionOptions, causal: bool = True) -> dict[str, Any]:
    """SageBwd (emulated) vs exact attention on one layer's inputs: per tensor
    ``{"cos", "rel_l2"}``, plus the inputs' sigma (std of q and k)."""
    cfg = options.sagebwd_config(q.shape[-1], causal, n_kv=k.shape[2])
    fwd = emulate_forward(q, k, v, cfg)
    sage = emulate_backward(fwd, do, v, cfg, "bfloat16")
    ref = attention_reference(q, k, v, do, cfg.sm_scale, causal=causal)
    do64, v64 = do.astype(np.float64), v.astype(np.float64)
    dp = do64 @ v64.transpose(0, 1, 3, 2)  # same 16-bit operands on both sides
    pairs = {"delta": (sage.delta, (do64 * ref.o).sum(axis=3)), "p": (sage.p, ref.p),
             "dp": (dp, dp), "ds": (sage.ds, ref.ds), "o": (fwd.o, ref.o),
             "dq": (sage.dq, ref.dq), "dk": (sage.dk, ref.dk), "dv": (sage.dv, ref.dv)}
    out: dict[str, Any] = {name: {"cos": cosine_similarity(x, r), "rel_l2": relative_l2(x, r)}
                           for name, (x, r) in pairs.items()}
    out["sigma_q"], out["sigma_k"] = float(q.std()), float(k.std())
    out["sigma_v"], out["rms_do"] = float(v.std()), float(np.sqrt((do.astype(np.float64) ** 2)
                                                                  .mean()))
    out["rms_ds"] = float(np.sqrt((ref.ds ** 2).mean()))
    out["rms_dp"] = float(np.sqrt((dp ** 2).mean()))
    return out


def table2(model: Llama, tokens: torch.Tensor, targets: torch.Tensor,
           options: AttentionOptions | None = None) -> dict[str, Any]:
    """The analysis on every layer of ``model`` for one batch; ``options`` are the
    SageBwd switches to emulate (default: the model's own attention options).

    Returns ``{"layers": [per-layer errors], "worst_layer": index, "batch": B,
    "seq_len": N, "options": ...}``.
    """
    options = options or model.cfg.attention
    layers = [layer_errors(c["q"], c["k"], c["v"], c["do"], options)
              for c in capture_layers(model, tokens, targets)]
    worst = max(range(len(layers)),
                key=lambda i: layers[i]["dq"]["rel_l2"] + layers[i]["dk"]["rel_l2"])
    return {"layers": layers, "worst_layer": worst, "batch": int(tokens.shape[0]),
            "seq_len": int(tokens.shape[1]),
            "options": {"smooth_k": options.smooth_k, "smooth_q": options.smooth_q,
                        "scales": options.scales}}


def ds_dominates(layer: dict[str, Any]) -> bool:
    """The paper's reading: dS is the first big drop, i.e. its rel-L2 exceeds that of
    every forward-side intermediate (delta, P, O) and of dV."""
    return all(layer["ds"]["rel_l2"] > layer[name]["rel_l2"]
               for name in ("delta", "p", "o", "dv"))


__all__ = ["LABELS", "PAPER_TABLE2", "TENSORS", "capture_layers", "ds_dominates",
           "layer_errors", "table2"]
