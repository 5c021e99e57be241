"""TransformerClassifier: built from EncoderConfig, old checkpoints' names, padding invariance (every
attention path), pooling, positions, and that it can learn."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from transformer_attention.data import CLS_ID, PAD_ID, ReviewDataModule, collate
from transformer_attention.model import (
    ATTENTION_IMPLS,
    ClassifierOutput,
    EncoderConfig,
    TransformerClassifier,
    gated_heads,
)


def make_model(**kw) -> TransformerClassifier:
    torch.manual_seed(0)
    args = dict(
        vocab_size=50, num_classes=3, d_model=16, num_heads=4, num_layers=2, dim_feedforward=32, max_len=40, dropout=0.1
    )
    args.update(kw)
    return TransformerClassifier(**args).eval()


def batch(lengths: list[int], T: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 50, (len(lengths), T), generator=g)
    ids[:, 0] = CLS_ID
    for row, n in enumerate(lengths):
        ids[row, n:] = PAD_ID
    return ids


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
@pytest.mark.parametrize("pooling", ["cls", "mean"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_padding_does_not_change_logits(pooling: str, norm_first: bool, impl: str):
    model = make_model(pooling=pooling, norm_first=norm_first, attention_impl=impl)
    ids = batch([6, 3, 8], 8)
    more = torch.cat([ids, torch.full((3, 12), PAD_ID)], dim=1)  # pad every row by 12 more
    with torch.no_grad():
        a = model(ids).logits
        b = model(more).logits
        c = model(ids[1:2, :3]).logits  # the short row alone, unpadded
    assert (a - b).abs().max() <= 1e-6
    assert (a[1] - c[0]).abs().max() <= 1e-6


@pytest.mark.parametrize("ngram_max", [2, 3])
@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_padding_does_not_change_logits_with_ngrams(pooling: str, ngram_max: int):
    model = make_model(pooling=pooling, ngram_buckets=257, ngram_max=ngram_max)
    torch.nn.init.normal_(model.embedding.ngrams.weight, std=0.3)  # a trained table: n-grams change the input
    ids = batch([6, 3, 8], 8, seed=1)
    more = torch.cat([ids, torch.full((3, 12), PAD_ID)], dim=1)
    with torch.no_grad():
        a, b, c = model(ids).logits, model(more).logits, model(ids[1:2, :3]).logits
        words_only = make_model(pooling=pooling)
        words_only.load_state_dict(model.state_dict(), strict=False)
        alone = words_only(ids).logits
    assert (a - b).abs().max() <= 1e-6
    assert (a[1] - c[0]).abs().max() <= 1e-6
    assert (alone - a).abs().max() > 1e-3  # the n-grams are read


def test_output_is_a_named_tuple_with_per_layer_weights():
    model = make_model(num_layers=3)
    ids = batch([5, 2], 5)
    logits, attns = model(ids, need_weights=True)
    out = model(ids, need_weights=True)
    assert isinstance(out, ClassifierOutput) and out.logits.shape == (2, 3)
    assert len(attns) == 3 and all(a.shape == (2, 4, 5, 5) for a in attns)
    assert all(torch.all(a[1, :, :, 2:] == 0) for a in attns)  # no weight on padding
    assert model(ids).attentions is None


def test_built_from_a_config_whose_fields_settings_override():
    config = EncoderConfig(d_model=24, num_heads=3, num_layers=1, attention_impl="math", pooling="mean")
    model = TransformerClassifier(config, vocab_size=30, num_classes=4, num_heads=2, dropout=0.2)
    assert model.config == EncoderConfig(
        d_model=24, num_heads=2, num_layers=1, attention_impl="math", pooling="mean", dropout=0.2
    )
    assert config.num_heads == 3  # the caller's config is left alone
    attn = model.encoder.layers[0].self_attn
    assert (attn.num_heads, attn.attention_impl, attn.dropout.p) == (2, "math", 0.0)
    assert len(model.encoder.layers) == 1 and model.head.out_features == 4
    assert TransformerClassifier(vocab_size=30, num_classes=2).config == EncoderConfig()  # the defaults


def test_an_unknown_or_bad_setting_is_a_clear_error():
    with pytest.raises(TypeError, match="'num_head'.*did you mean num_heads.*d_model, num_heads"):
        TransformerClassifier(vocab_size=30, num_classes=2, num_head=4)
    with pytest.raises(ValueError, match="d_model=30 is not divisible by num_heads=4"):
        TransformerClassifier(vocab_size=30, num_classes=2, d_model=30, num_heads=4)
    with pytest.raises(TypeError):
        TransformerClassifier(EncoderConfig(), 30, 2)  # vocab_size and num_classes by keyword only


def test_parameter_names_are_those_of_older_checkpoints():
    """A state_dict written before EncoderConfig loads unchanged: the very same keys."""
    model = TransformerClassifier(vocab_size=30, num_classes=2, num_layers=1, norm_first=True)
    layer = [f"encoder.layers.0.self_attn.{w}.{p}" for w in ("w_q", "w_k", "w_v", "w_o") for p in ("weight", "bias")]
    layer += [f"encoder.layers.0.{m}.{p}" for m in ("linear1", "linear2", "norm1", "norm2") for p in ("weight", "bias")]
    expected = {"embedding.weight", *layer, "encoder.norm.weight", "encoder.norm.bias", "head.weight", "head.bias"}
    assert set(model.state_dict()) == expected
    learned = TransformerClassifier(vocab_size=30, num_classes=2, num_layers=1, positional="learned")
    assert set(learned.state_dict()) - set(model.state_dict()) == {"pos_encoder.embedding.weight"}


def test_mean_pooling_ignores_padding_exactly():
    model = make_model(pooling="mean")
    ids = batch([4], 4)
    with torch.no_grad():
        padded = model(torch.cat([ids, torch.full((1, 3), PAD_ID)], 1)).logits
        assert torch.allclose(model(ids).logits, padded, atol=1e-6)


def test_positions_matter():
    model = make_model()
    ids = batch([6], 6)
    swapped = ids.clone()
    swapped[0, [2, 4]] = ids[0, [4, 2]]
    with torch.no_grad():
        assert (model(ids).logits - model(swapped).logits).abs().max() > 1e-4


def test_too_long_input_is_a_clear_error():
    model = make_model(max_len=8)
    with pytest.raises(ValueError, match="max_len=8"):
        model(batch([10], 10))


def test_sinusoidal_table_matches_formula():
    from transformer_attention.model import SinusoidalPositionalEncoding

    pe = SinusoidalPositionalEncoding(6, max_len=10, dropout=0.0).pe
    pos = 7  # dims 4 (sin) and 5 (cos) use frequency 10000^(-4/6)
    torch.testing.assert_close(pe[pos, 4], torch.tensor(pos / 10000 ** (4 / 6)).sin())
    torch.testing.assert_close(pe[pos, 5], torch.tensor(pos / 10000 ** (4 / 6)).cos())


def test_overfits_one_batch():
    dm = ReviewDataModule(name="toy", toy_size=200, batch_size=16, vocab_size=300, min_frequency=1)
    dm.setup()
    b = collate([dm.splits["train"][i] for i in range(16)])
    torch.manual_seed(0)
    model = TransformerClassifier(
        vocab_size=dm.vocab_size,
        num_classes=dm.num_classes,
        d_model=32,
        num_heads=4,
        num_layers=2,
        dim_feedforward=64,
        dropout=0.0,
    ).train()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(150):
        loss = F.cross_entropy(model(b["input_ids"], b["attention_mask"]).logits, b["labels"])
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        preds = model.eval()(b["input_ids"], b["attention_mask"]).logits.argmax(-1)
    assert torch.equal(preds, b["labels"])


# ---- head gates: what head importance (analysis/heads.py) masks heads with -------------------------------
@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_gates_of_ones_give_bit_equal_logits(impl: str, pooling: str):
    model = make_model(pooling=pooling, attention_impl=impl)
    ids = batch([6, 3, 8], 8)
    with torch.no_grad():
        plain = model(ids).logits
        for ones in (torch.ones(2, 4), torch.ones(2, 4, dtype=torch.bool), torch.ones(3, 2, 4)):
            with gated_heads(model, ones):
                assert torch.equal(model(ids).logits, plain)


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
def test_gating_a_head_off_equals_zeroing_its_slice_of_the_output_projection(impl: str):
    """Head h's output enters w_o through the input columns h*Dk..(h+1)*Dk: a zero gate must equal a model
    whose w_o has those columns at zero (the oracle), and differ from the ungated model."""
    model = make_model(attention_impl=impl, pooling="mean")
    ids = batch([6, 3, 8], 8)
    gates = torch.ones(2, 4)
    gates[1, 2] = 0
    oracle = make_model(attention_impl=impl, pooling="mean")
    with torch.no_grad():
        oracle.encoder.layers[1].self_attn.w_o.weight[:, 2 * 4 : 3 * 4] = 0
        with gated_heads(model, gates):
            masked = model(ids).logits
        expected, plain = oracle(ids).logits, model(ids).logits
    torch.testing.assert_close(masked, expected, rtol=0, atol=1e-6)
    assert (masked - plain).abs().max() > 1e-3
    # per-row gates: row 1 masked, rows 0 and 2 not
    per_row = torch.ones(3, 2, 4)
    per_row[1] = gates
    with torch.no_grad(), gated_heads(model, per_row):
        mixed = model(ids).logits
    torch.testing.assert_close(mixed[[0, 2]], plain[[0, 2]], rtol=0, atol=0)
    torch.testing.assert_close(mixed[1], expected[1], rtol=0, atol=1e-6)


def test_a_gate_carries_the_gradient_of_its_head():
    """d logit / d gate of a head = the logit's change per unit of that head's output: finite differences agree."""
    model = make_model(pooling="mean").double()
    ids = batch([6, 3, 8], 8)
    gates = torch.ones(2, 4, dtype=torch.float64, requires_grad=True)
    with gated_heads(model, gates):
        (grad,) = torch.autograd.grad(model(ids).logits[:, 1].sum(), gates)
    step = torch.zeros(2, 4, dtype=torch.float64)
    step[0, 3] = 1e-6
    with torch.no_grad():
        with gated_heads(model, torch.ones(2, 4, dtype=torch.float64) + step):
            up = model(ids).logits[:, 1].sum()
        with gated_heads(model, torch.ones(2, 4, dtype=torch.float64) - step):
            down = model(ids).logits[:, 1].sum()
    torch.testing.assert_close(grad[0, 3], (up - down) / 2e-6, rtol=1e-5, atol=1e-8)


def test_gates_of_the_wrong_shape_name_the_shapes():
    model = make_model()
    with pytest.raises(ValueError, match=r"head gates of shape \(3, 4\) do not fit 2 layers of 4 heads"):
        with gated_heads(model, torch.ones(3, 4)):
            pass
    with pytest.raises(ValueError, match=r"head gates of shape \(2, 5\) do not fit 2 layers of 4 heads"):
        with gated_heads(model, torch.ones(2, 5)):
            pass
    with pytest.raises(ValueError, match=r"head gates for 2 rows given to a batch of 1"):
        with gated_heads(model, torch.ones(2, 2, 4)):
            model(batch([4], 4))
