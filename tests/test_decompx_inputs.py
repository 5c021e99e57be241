"""DecompX on any input a user can give: n-gram shares right for texts of any length (against a brute-force loop
over every n-gram), rows that see no key decomposed as the model computes them, and every bad argument refused in
one line that names it and the fix."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer_attention.analysis import decompx
from transformer_attention.analysis.methods import Options, methods
from transformer_attention.analysis.methods.decompx import Decomposition, word_shares
from transformer_attention.model.classifier import TransformerClassifier
from transformer_attention.module import ClassifierModule

SIZES = {"d_model": 16, "num_heads": 4, "dim_feedforward": 32, "num_layers": 2, "max_len": 16}


def model(seed: int = 0, **settings) -> TransformerClassifier:
    torch.manual_seed(seed)
    net = TransformerClassifier(vocab_size=40, num_classes=3, **{**SIZES, **settings}).eval()
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(std=0.3)
    return net


def brute_force_shares(found: Decomposition) -> torch.Tensor:
    """Every n-gram ending at t handed out to its words one by one: equal shares to the real words among
    t - n + 1 .. t (the stand-ins before position 0 take none)."""
    out = found.tokens.clone()
    B, T, C = out.shape
    for n, part in enumerate(found.ngrams_by_n, start=2):
        for t in range(T):
            words = [w for w in range(t - n + 1, t + 1) if w >= 0]
            for w in words:
                out[:, w] += part[:, t] / len(words)
    return out


@pytest.mark.parametrize("ngram_max", [2, 3, 4, 8])
def test_word_shares_of_ngrams_are_the_brute_force_loops_for_any_length(ngram_max: int):
    g = torch.Generator().manual_seed(ngram_max)
    for T in range(1, ngram_max + 3):
        tokens = torch.randn(2, T, 3, generator=g, dtype=torch.float64)
        by_n = [torch.randn(2, T, 3, generator=g, dtype=torch.float64) for _ in range(2, ngram_max + 1)]
        found = Decomposition(logits=tokens.sum(1), tokens=tokens, positions=tokens[:, 0], bias=tokens[:, 0])
        found.ngrams_by_n = by_n
        shares = word_shares(found)
        torch.testing.assert_close(shares, brute_force_shares(found), rtol=0, atol=1e-12)
        torch.testing.assert_close(shares.sum(1), tokens.sum(1) + sum(b.sum(1) for b in by_n), rtol=0, atol=1e-12)


@pytest.mark.parametrize("ngram_max", [4, 8])
def test_decompx_explains_texts_shorter_than_its_ngrams(ngram_max: int):
    """A one-word text on an ngram_max=8 model: what train.py's sanity check and predict.py text=a run."""
    net = model(ngram_buckets=50, ngram_max=ngram_max)
    for T in (1, 2, ngram_max - 2, ngram_max + 1):
        ids = torch.randint(3, 40, (1, T))
        ids[:, 0] = 2
        mask = ids != 0
        found = decompx(net, ids, mask)
        explained = methods()["decompx"].explain(net, ids, mask, torch.tensor([1]), Options())
        torch.testing.assert_close(explained.scores, brute_force_shares(found)[:, :, 1], rtol=0, atol=1e-12)


@pytest.mark.parametrize("pooling", ["cls", "mean"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_decompx_is_the_models_logits_on_rows_that_see_no_key(pooling: str, norm_first: bool):
    """Full, padded and all-padding rows in one batch, and an all-False mask: the model zeroes a keyless row's
    attention, and DecompX's logits and parts are the model's own."""
    net = model(pooling=pooling, norm_first=norm_first, ngram_buckets=50, ngram_max=3)
    ids = torch.randint(3, 40, (4, 7), generator=torch.Generator().manual_seed(3))
    ids[:, 0] = 2
    ids[1, 4:] = 0  # padded
    ids[2] = 0  # all padding
    for mask in (None, ids != 0, torch.zeros(ids.shape, dtype=torch.bool)):
        found = decompx(net, ids, mask)
        with torch.no_grad():
            expected = net.double()(ids, mask).logits
        torch.testing.assert_close(found.logits, expected, rtol=0, atol=1e-6)
        torch.testing.assert_close(found.tokens.sum(dim=1) + found.rest, expected, rtol=0, atol=1e-6)


def ids_of(*rows: list[int]) -> torch.Tensor:
    return torch.tensor(rows)


@pytest.mark.parametrize(
    "ids, match",
    [
        (ids_of([2, 5, 40]), r"input_ids holds 40, outside the model's vocabulary 0\.\.39: encode"),
        (ids_of([2, -1, 5]), r"input_ids holds -1, outside the model's vocabulary 0\.\.39"),
        (torch.tensor([2, 5, 6]), r"input_ids of shape \(3,\): expected \(B, T\), input_ids\[None\] for one text"),
        (torch.zeros(1, 0, dtype=torch.long), r"input_ids of shape \(1, 0\) holds no tokens: give every row"),
        (torch.full((1, 17), 5), r"input_ids of 17 tokens a row: longer than the model's max_len=16; cut the rows"),
    ],
    ids=["id-equal-to-vocab-size", "negative-id", "one-dimensional", "zero-length", "longer-than-max-len"],
)
def test_decompx_refuses_ids_the_model_cannot_read(ids: torch.Tensor, match: str):
    with pytest.raises(ValueError, match=match):
        decompx(model(), ids)


def test_decompx_refuses_float_ids_and_a_mask_of_another_shape():
    with pytest.raises(TypeError, match=r"input_ids of torch.float32: expected token ids .* ids.long\(\)"):
        decompx(model(), torch.ones(1, 3))
    with pytest.raises(ValueError, match=r"attention_mask of shape \(1, 2\): expected input_ids' \(1, 3\)"):
        decompx(model(), ids_of([2, 5, 6]), torch.ones(1, 2, dtype=torch.bool))


def test_decompx_asks_for_the_classifier_inside_a_classifier_module():
    module = ClassifierModule(vocab_size=40, num_classes=2, **SIZES)
    with pytest.raises(TypeError, match=r"net=ClassifierModule: .*pass module\.net"):
        decompx(module, ids_of([2, 5, 6]))
    assert decompx(module.net, ids_of([2, 5, 6])).logits.shape == (1, 2)


def test_decompx_refuses_a_linear_layer():
    with pytest.raises(TypeError, match=r"net=Linear: expected a TransformerClassifier \(a ClassifierModule's \.net\)"):
        decompx(nn.Linear(4, 2), ids_of([2, 5, 6]))


def test_decompx_refuses_a_masked_language_model():
    from transformer_attention.pretraining.mlm import MaskedLMModule

    with pytest.raises(ValueError, match=r"net=MaskedLMModule is a masked language model's encoder: .*fine-tune"):
        decompx(MaskedLMModule(vocab_size=40, **SIZES), ids_of([2, 5, 6]))


def test_decompx_refuses_a_masked_language_models_encoder():
    from transformer_attention.pretraining.mlm import MaskedLMModule

    with pytest.raises(ValueError, match=r"net=TransformerClassifier is a masked language model's encoder"):
        decompx(MaskedLMModule(vocab_size=40, **SIZES).net, ids_of([2, 5, 6]))
