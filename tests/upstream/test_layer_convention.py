"""Layer convention block-io-v1, per family: layer 0 = input to the first block, layer l = output of
block l as emitted, no final LayerNorm. Checked against a by-hand run of the encoder, block by
block, with every LayerNorm given non-trivial parameters so that a stray final LayerNorm shows.

Also pins what transformers' own ``output_hidden_states`` holds in the tested release, which is why
HFUpstream records blocks with hooks instead of trusting it.
"""

from __future__ import annotations

import pytest
import torch
from transformers import WhisperFeatureExtractor

from speechbias.upstream.block_states import BlockStateRecorder
from speechbias.upstream.families.wav2vec2_like import zero_mean_unit_variance
from upstream.tiny_models import VARIANT_IDS, VARIANTS, build_tiny, perturb_layer_norms, random_wavs

W2V_VARIANTS = [v for v in VARIANTS if v[0] != "whisper"]
W2V_IDS = [i for v, i in zip(VARIANTS, VARIANT_IDS) if v[0] != "whisper"]


def _block_output(block, hidden, family, index, position_bias):
    if family == "wavlm":
        return block(hidden, attention_mask=None, position_bias=position_bias, index=index)
    out = block(hidden, attention_mask=None)
    return (out[0] if isinstance(out, tuple) else out), None


def manual_wav2vec2_family_states(up, wav: torch.Tensor) -> list[torch.Tensor]:
    """Single clip, no padding: conv encoder -> projection -> positional conv (+ LayerNorm before
    the blocks for post-LN encoders) -> each block called by hand."""
    model, config = up.model, up.config
    x = wav[None, :]
    if up.normalize:
        x = zero_mean_unit_variance(x, torch.tensor([wav.shape[0]]))
    features = model.feature_extractor(x).transpose(1, 2)
    projected = model.feature_projection(features)
    hidden = projected[0] if isinstance(projected, tuple) else projected  # HuBERT returns a tensor
    encoder = model.encoder
    hidden = hidden + encoder.pos_conv_embed(hidden)
    if not config.do_stable_layer_norm:
        hidden = encoder.layer_norm(hidden)
    states = [hidden]
    position_bias = None
    for index, block in enumerate(encoder.layers):
        hidden, position_bias = _block_output(block, hidden, up.family, index, position_bias)
        states.append(hidden)
    return states


@pytest.mark.parametrize(("family", "stable"), W2V_VARIANTS, ids=W2V_IDS)
def test_wav2vec2_family_layers_are_block_inputs_and_outputs(family, stable):
    up = build_tiny(family, stable, seed=2)
    perturb_layer_norms(up.model)
    wavs, lengths = random_wavs([6_400], seed=4)
    states, _ = up(wavs, lengths)
    with torch.no_grad():
        manual = manual_wav2vec2_family_states(up, wavs[0])
        final_ln = up.model.encoder.layer_norm(manual[-1])
        hf_out = up.model(zero_mean_unit_variance(wavs, lengths) if up.normalize else wavs, output_hidden_states=True)
    assert len(states) == len(manual) == up.config.num_hidden_layers + 1
    for layer, (ours, ref) in enumerate(zip(states, manual)):
        torch.testing.assert_close(ours[0], ref[0], atol=1e-5, rtol=1e-5, msg=f"layer {layer}")
    # the last layer is the last block's own output, not the LayerNorm'd encoder output
    assert (states[-1][0] - final_ln[0]).abs().max() > 1e-2
    if stable:  # pre-LN encoders apply their LayerNorm after the blocks
        torch.testing.assert_close(hf_out.last_hidden_state, final_ln, atol=1e-5, rtol=1e-5)
    # transformers 5.x (capture_outputs(tie_last_hidden_states=False)): hidden_states hold block
    # inputs/outputs, the last one without the final LayerNorm, for post-LN and pre-LN alike
    assert len(hf_out.hidden_states) == len(states)
    for ours, theirs in zip(states, hf_out.hidden_states):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_whisper_layers_are_block_inputs_and_outputs():
    up = build_tiny("whisper", seed=2)
    perturb_layer_norms(up.model)
    n = 12_345
    wavs, lengths = random_wavs([n], seed=6)
    states, frame_lengths = up(wavs, lengths)
    kept = frame_lengths.item()
    # independent front end: transformers' own feature extractor (numpy padding to 30 s)
    extractor = WhisperFeatureExtractor(feature_size=80)
    mel = torch.from_numpy(extractor(wavs[0].numpy(), sampling_rate=16_000, return_tensors="np").input_features)
    encoder = up.model
    with torch.no_grad():
        hidden = torch.nn.functional.gelu(encoder.conv1(mel))
        hidden = torch.nn.functional.gelu(encoder.conv2(hidden)).permute(0, 2, 1)
        hidden = hidden + encoder.embed_positions.weight
        manual = [hidden]
        for block in encoder.layers:
            out = block(hidden, None)
            hidden = out[0] if isinstance(out, tuple) else out
            manual.append(hidden)
        hf_out = encoder(mel, output_hidden_states=True)
    assert len(states) == len(manual) == 3
    for layer, (ours, ref) in enumerate(zip(states, manual)):
        torch.testing.assert_close(ours[0], ref[0, :kept], atol=1e-4, rtol=1e-4, msg=f"layer {layer}")
    final_ln = encoder.layer_norm(manual[-1])
    assert (states[-1][0] - final_ln[0, :kept]).abs().max() > 1e-2
    # transformers 5.x ties Whisper's last hidden_states entry to last_hidden_state: the final
    # LayerNorm IS applied there, unlike the wav2vec2 family
    torch.testing.assert_close(hf_out.hidden_states[-1], final_ln, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(hf_out.hidden_states[-1], hf_out.last_hidden_state)
    for ours, theirs in zip(states[:-1], hf_out.hidden_states[:-1]):
        torch.testing.assert_close(ours[0], theirs[0, :kept], atol=1e-4, rtol=1e-4)


def test_recorder_rejects_a_skipped_block():
    up = build_tiny("hubert", seed=0)
    recorder = BlockStateRecorder(up.model.encoder.layers)
    with pytest.raises(RuntimeError, match="recorded 2 block states, expected 3"):
        with recorder.recording() as states:
            states.append(torch.zeros(1))
            states.append(torch.zeros(1))
    recorder.remove()
