"""Small torch models whose attention can run through SageBwd (:func:`sage.attention`).

:mod:`sage.nn.llama` is a decoder-only LLaMA-style language model (RMSNorm,
RoPE, SwiGLU, optional QK-norm) used by the training-parity harness
(``bench/training``); :mod:`sage.nn.attention` holds its attention backends
(SDPA, SageBwd on the GPU, SageBwd in the CPU interpreter or the float64
emulation). Importing this package imports torch.
"""

from sage.nn.attention import BACKENDS, AttentionOptions, attend
from sage.nn.llama import Llama, LlamaConfig

__all__ = ["BACKENDS", "AttentionOptions", "Llama", "LlamaConfig", "attend"]
