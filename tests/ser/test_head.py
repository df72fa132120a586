"""The valence head: cached-mean path == full-sequence path; layer weights are trained parameters."""

from __future__ import annotations

import hydra
import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from omegaconf import OmegaConf

from core.audio_fixtures import tone
from core.toy_upstream import ToyUpstream
from ser.helpers import CONF_DIR
from speechbias.features.statistics import temporal_statistics
from speechbias.ser.datamodule import LayerMeansDataModule
from speechbias.ser.head import ValenceHead, predict_with_heads
from speechbias.ser.module import ValenceRegressor


def reference_prediction(head: ValenceHead, states: list[torch.Tensor], lengths: torch.Tensor) -> torch.Tensor:
    """The SUPERB head written frame by frame from its definition, in float64."""
    w = torch.softmax(head.layer_logits.double(), 0)
    W1, b1 = head.project.weight.double(), head.project.bias.double()
    W2, b2 = head.output.weight.double(), head.output.bias.double()
    out = []
    for b in range(states[0].shape[0]):
        frames = []
        for t in range(int(lengths[b])):
            x_t = sum(w[layer] * states[layer][b, t].double() for layer in range(len(states)))  # layer-weighted sum
            frames.append(W1 @ x_t + b1)  # Linear(D, 256)
        pooled = torch.stack(frames).mean(dim=0)  # mean over frames
        out.append((W2 @ pooled + b2)[0])  # Linear(256, 1)
    return torch.stack(out)


def _grads(head: ValenceHead, pred: torch.Tensor, target: torch.Tensor) -> dict[str, np.ndarray]:
    head.zero_grad()
    torch.mean((pred - target) ** 2).backward()
    return {n: p.grad.detach().double().numpy().copy() for n, p in head.named_parameters()}


def _padded_batch(upstream, seconds=(0.35, 0.6, 0.9)):
    wavs = [torch.from_numpy(tone(s, freq=140 + 90 * k, seed=k)) for k, s in enumerate(seconds)]
    lengths = torch.tensor([w.shape[0] for w in wavs])
    padded = torch.nn.utils.rnn.pad_sequence(wavs, batch_first=True)
    with torch.no_grad():
        states, frame_lengths = upstream(padded, lengths)
    return [h.float() for h in states], frame_lengths


def _check_equivalence(upstream):
    torch.manual_seed(0)
    states, frame_lengths = _padded_batch(upstream)
    assert int(frame_lengths.min()) < states[0].shape[1]  # some clips really are padded
    head = ValenceHead(len(states), states[0].shape[-1], hidden_size=256)
    with torch.no_grad():
        head.layer_logits.copy_(torch.randn(len(states)))  # unequal weights so the mixing matters
    target = torch.tensor([0.2, 0.5, 0.9])
    means = temporal_statistics(states, frame_lengths)["mean"]  # what the feature cache stores
    ref = reference_prediction(head, states, frame_lengths)
    g_ref = _grads(head, ref, target.double())
    cached = head(means)
    g_cached = _grads(head, cached, target)
    full = head.forward_frames(states, frame_lengths)
    g_full = _grads(head, full, target)
    np.testing.assert_allclose(cached.detach().double().numpy(), ref.detach().numpy(), rtol=0, atol=1e-5)
    np.testing.assert_allclose(full.detach().double().numpy(), ref.detach().numpy(), rtol=0, atol=1e-5)
    for name in g_ref:
        np.testing.assert_allclose(g_cached[name], g_ref[name], rtol=0, atol=1e-5, err_msg=name)
        np.testing.assert_allclose(g_full[name], g_ref[name], rtol=0, atol=1e-5, err_msg=name)
    assert any(np.abs(g).max() > 1e-3 for g in g_ref.values())  # the gradients are not trivially zero


def test_cached_means_match_full_sequences_on_tiny_random_wav2vec2():
    node = OmegaConf.load(CONF_DIR / "upstream" / "tiny_wav2vec2.yaml")
    _check_equivalence(hydra.utils.instantiate(node))


def test_cached_means_match_full_sequences_on_toy_upstream():
    _check_equivalence(ToyUpstream())


def test_layer_weights_start_equal_and_are_registered():
    head = ValenceHead(5, 8)
    np.testing.assert_allclose(head.layer_weights().detach().numpy(), np.full(5, 0.2), rtol=1e-7)
    assert "layer_logits" in dict(head.named_parameters())
    module = ValenceRegressor(5, 8)
    assert any(p is module.head.layer_logits for p in module.configure_optimizers().param_groups[0]["params"])


def test_layer_weights_change_after_a_few_steps():
    rng = np.random.default_rng(0)
    n, layers, dim = 64, 4, 6
    features = rng.standard_normal((n, layers, dim)).astype(np.float32)
    target = (0.5 + 0.1 * features[:, 2, 0]).astype(np.float32)  # only layer 2 carries the signal
    dev = np.zeros(n, bool)
    dev[:8] = True
    module = ValenceRegressor(layers, dim, hidden_size=16, lr=1e-2)
    before = module.head.layer_weights().detach().clone()
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        max_steps=5,
        num_sanity_val_steps=0,
        limit_val_batches=0,
    )
    trainer.fit(module, datamodule=LayerMeansDataModule(features, target, dev, batch_size=32, seed=0))
    after = module.head.layer_weights().detach()
    assert trainer.global_step == 5
    assert float((after - before).abs().max()) > 1e-4
    np.testing.assert_allclose(float(after.sum()), 1.0, rtol=1e-6)


def test_wrong_feature_shape_is_a_clear_error():
    with pytest.raises(ValueError, match="3 layers of width 4"):
        ValenceHead(3, 4)(torch.zeros(2, 2, 4))


def test_predict_with_heads_equals_each_head_in_the_textbook_order():
    """Several heads in one pass == each head evaluated as Linear(Linear(sum_l w_l x_l)), with the
    same gradients; also for a non-contiguous (B, L, D) view."""
    torch.manual_seed(0)
    heads = [ValenceHead(7, 12, hidden_size=8) for _ in range(3)]
    for h in heads:
        with torch.no_grad():
            h.layer_logits.copy_(torch.randn(7))
    x = torch.randn(12, 7, 5).transpose(1, 2).transpose(1, 2).permute(2, 1, 0)  # (5, 7, 12), not contiguous
    assert not x.is_contiguous()
    target = torch.rand(5)

    def textbook(h):
        mixed = (h.layer_weights()[None, :, None] * x).sum(dim=1)
        return h.output(h.project(mixed)).squeeze(-1)

    together = predict_with_heads(heads, x)
    assert together.shape == (3, 5)
    loss_together = ((together - target) ** 2).mean(dim=1).sum()
    grads_together = torch.autograd.grad(loss_together, [p for h in heads for p in h.parameters()])
    for k, h in enumerate(heads):
        ref = textbook(h)
        torch.testing.assert_close(together[k], ref, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(h(x), ref, rtol=1e-5, atol=1e-6)
        grads_ref = torch.autograd.grad(((ref - target) ** 2).mean(), list(h.parameters()))
        for a, b in zip(grads_together[5 * k : 5 * k + 5], grads_ref):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_predict_with_heads_rejects_bad_shapes():
    with pytest.raises(ValueError, match="B, L, D"):
        predict_with_heads([ValenceHead(3, 4)], torch.zeros(3, 4))
    with pytest.raises(ValueError, match="at least one head"):
        predict_with_heads([], torch.zeros(2, 3, 4))
