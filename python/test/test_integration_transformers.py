"""``attn_implementation="sage"`` in Hugging Face transformers, on the CPU (the
kernels run in the interpreter): tiny random-weight Llama and Qwen3 (QK-norm)
models against their SDPA twins (same weights, same data), training steps,
``generate`` (decoding has fewer queries than keys), and the named errors for
what sage does not support."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from sage.integrations import transformers as sage_hf  # noqa: E402


@pytest.fixture(autouse=True)
def _interpret(monkeypatch):
    monkeypatch.setenv("SAGE_INTERPRET", "1")
    sage_hf.register()


def _config(kind: str, **overrides):
    common = dict(vocab_size=97, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                  max_position_embeddings=128, initializer_range=0.2, attention_dropout=0.0)
    common.update(overrides)
    if kind == "llama":
        return transformers.LlamaConfig(**common)
    return transformers.Qwen3Config(**common)


def _twins(kind: str, **overrides):
    """The same random weights under "sage" and "sdpa" (each its own config:
    from_config records the implementation on it)."""
    torch.manual_seed(0)
    sage_model = transformers.AutoModelForCausalLM.from_config(
        _config(kind, **overrides), attn_implementation="sage")
    sdpa_model = transformers.AutoModelForCausalLM.from_config(
        _config(kind, **overrides), attn_implementation="sdpa")
    sdpa_model.load_state_dict(sage_model.state_dict())
    return sage_model, sdpa_model


def _batch(n=24, batch=2, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, 97, (batch, n), generator=gen)


def _cosine(a, b):
    return torch.nn.functional.cosine_similarity(a.flatten().double(), b.flatten().double(),
                                                 dim=0).item()


@pytest.mark.parametrize("kind", ["llama", "qwen3"])
def test_training_steps_track_the_sdpa_twin(kind):
    sage_model, sdpa_model = _twins(kind)
    losses = {}
    for name, model in (("sage", sage_model), ("sdpa", sdpa_model)):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        losses[name] = []
        for step in range(3):
            ids = _batch(seed=step)
            loss = model(input_ids=ids, labels=ids).loss
            optimizer.zero_grad()
            loss.backward()
            if step == 0:
                losses[name + "_grad"] = torch.cat([p.grad.flatten()
                                                    for p in model.parameters()])
            optimizer.step()
            losses[name].append(loss.item())
    assert all(abs(a - b) < 0.01 * b for a, b in zip(losses["sage"], losses["sdpa"])), losses
    assert _cosine(losses["sage_grad"], losses["sdpa_grad"]) > 0.99


@pytest.mark.parametrize("kind", ["llama", "qwen3"])
def test_generate_follows_the_sdpa_twin_where_logits_are_not_tied(kind):
    """Greedy decoding with a KV cache (one query, many keys: bottom-right causal;
    top-left alignment would let the new token see only the first key). Each
    step's logits are close to SDPA's, and the tokens agree at every step
    until one is a near tie: some other token's logit is within the two
    tokens' errors of the top one."""
    sage_model, sdpa_model = _twins(kind)
    prompt = _batch(n=12, batch=1, seed=7)
    outs = [model.generate(prompt, max_new_tokens=5, do_sample=False, output_logits=True,
                           return_dict_in_generate=True, pad_token_id=0)
            for model in (sage_model, sdpa_model)]
    compared = 0
    for got_logits, want_logits, got, want in zip(outs[0].logits, outs[1].logits,
                                                  outs[0].sequences[0, 12:],
                                                  outs[1].sequences[0, 12:]):
        error = (got_logits - want_logits)[0].abs()
        assert error.max() < 0.06 * want_logits.abs().max()
        best = want_logits[0].argmax()
        margin = want_logits[0, best] - want_logits[0]
        margin[best] = float("inf")
        if compared == len(outs[0].logits) or bool((margin <= error + error[best]).any()):
            break
        assert got.item() == want.item()
        compared += 1
    assert compared >= 1, "the first token's logits were tied: nothing was compared"


def test_padding_mask_is_rejected_by_name():
    sage_model, _ = _twins("llama")
    ids = _batch(n=8)
    mask = torch.ones_like(ids)
    mask[0, :3] = 0
    with pytest.raises(sage_hf.UnsupportedAttentionOption,
                       match=r"does not support attention_mask: a padding or custom mask"):
        sage_model(input_ids=ids, attention_mask=mask)
    # An all-ones mask is no padding: it runs.
    assert sage_model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits.shape == \
        (2, 8, 97)


def test_dropout_is_rejected_by_name():
    sage_model, _ = _twins("llama", attention_dropout=0.1)
    sage_model.train()
    with pytest.raises(sage_hf.UnsupportedAttentionOption,
                       match=r"does not support dropout: dropout must be 0, got 0.1"):
        sage_model(input_ids=_batch(n=8))


def test_sliding_window_is_rejected_by_name():
    sage_model, _ = _twins("qwen3", use_sliding_window=True, sliding_window=4,
                           max_window_layers=0, layer_types=["sliding_attention"] * 2)
    with pytest.raises(sage_hf.UnsupportedAttentionOption,
                       match=r"does not support sliding_window: sliding-window attention"):
        sage_model(input_ids=_batch(n=8))


@pytest.mark.parametrize("option, value, pattern", [
    ("softcap", 30.0, r"does not support softcap: attention logit softcapping"),
    ("s_aux", "sinks", r"does not support s_aux: attention sinks"),
    ("cu_seq_lens_q", "lens", r"does not support cu_seq_lens_q: packed \(varlen\) sequences"),
    ("output_attentions", True, r"does not support output_attentions: returning attention"),
])
def test_other_unsupported_options_are_rejected_by_name(option, value, pattern):
    q = torch.zeros(1, 2, 4, 64, dtype=torch.bfloat16)
    with pytest.raises(sage_hf.UnsupportedAttentionOption, match=pattern):
        sage_hf.sage_attention_forward(torch.nn.Module(), q, q, q, None, **{option: value})


def test_output_layout_and_dtype():
    """(B, N, H, D) contiguous in the query's dtype (float32 models compute in bf16)."""
    q = torch.randn(1, 4, 10, 64)
    k = torch.randn(1, 2, 10, 64)
    out, weights = sage_hf.sage_attention_forward(torch.nn.Module(), q, k, k, None,
                                                  is_causal=True)
    assert weights is None and out.shape == (1, 10, 4, 64) and out.dtype == torch.float32
    assert out.is_contiguous()
