"""TokenEmbedding: the word vector alone by default, and with `ngram_buckets` the vectors of the word pairs
(and triples) each token ends: hashed ids against a Python reference, locality, a zero start (padding
invariance with n-grams: tests/test_classifier.py)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer_attention.data import PAD_ID
from transformer_attention.model import EncoderConfig
from transformer_attention.model.embedding import TokenEmbedding, ngram_ids


def reference_bucket(gram: tuple[int, ...], vocab: int, buckets: int) -> int:
    """The n-gram's id in base `vocab` after a leading n - 2, exact in Python's integers, then Carter-Wegman."""
    index = len(gram) - 2
    for token in gram:
        index = index * vocab + token
    return ((index * 1_540_483_477 + 97) % (2**31 - 1)) % buckets


@pytest.mark.parametrize("n", [2, 3])
def test_ngram_ids_match_a_python_reference(n: int):
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(1, 30, (4, 9), generator=g)
    ids = ngram_ids(tokens, n, vocab_size=30, buckets=101, pad_id=PAD_ID)
    assert ids.shape == tokens.shape and int(ids.min()) >= 0 and int(ids.max()) < 101
    grams = {}
    for r, row in enumerate(tokens.tolist()):
        padded = [PAD_ID] * (n - 1) + row
        for t in range(len(row)):
            gram = tuple(padded[t : t + n])
            assert int(ids[r, t]) == reference_bucket(gram, 30, 101)
            grams.setdefault(gram, set()).add(int(ids[r, t]))
    assert all(len(buckets) == 1 for buckets in grams.values())  # one bucket per n-gram, wherever it is


@pytest.mark.parametrize("length", [1, 2, 3])
def test_ngrams_longer_than_the_text_match_the_reference(length: int):
    """n > T (ngram_max=8 on a one-word text): each position's n-gram is pads then the text, as the reference."""
    tokens = torch.tensor([[7, 11, 13][:length], [5, 3, 2][:length]])
    for n in (4, 8, 50):
        ids = ngram_ids(tokens, n, vocab_size=30, buckets=101, pad_id=PAD_ID)
        for r, row in enumerate(tokens.tolist()):
            padded = [PAD_ID] * (n - 1) + row
            assert ids[r].tolist() == [reference_bucket(tuple(padded[t : t + n]), 30, 101) for t in range(length)]
    embed = TokenEmbedding(30, 8, padding_idx=PAD_ID, ngram_buckets=101, ngram_max=50)
    assert embed(tokens).shape == (2, length, 8)


def test_large_vocabularies_do_not_overflow():
    tokens = torch.tensor([[49_999, 49_998, 49_997, 12]])
    for n in (2, 3):
        ids = ngram_ids(tokens, n, vocab_size=50_000, buckets=1_000_003)
        padded = [PAD_ID] * (n - 1) + tokens[0].tolist()
        expected = [reference_bucket(tuple(padded[t : t + n]), 50_000, 1_000_003) for t in range(4)]
        assert ids[0].tolist() == expected


def test_distinct_pairs_spread_over_the_buckets():
    # a vocabulary of 4096 and 4096 buckets: the pair id mod the buckets would be the token alone, every
    # previous word in one bucket with every other
    vocab, buckets = 4096, 4096
    prev, token = torch.meshgrid(torch.arange(1, 301), torch.arange(1, 301), indexing="ij")
    ids = ngram_ids(torch.stack([prev.flatten(), token.flatten()], dim=1), 2, vocab, buckets)[:, 1]
    per_token = ids.view(300, 300).T  # (token, previous word)
    assert all(len(set(row.tolist())) > 250 for row in per_token)  # one word after 300 others: spread
    counts = torch.bincount(ids, minlength=buckets).float()  # 90k pairs: about 22 a bucket, Poisson-like
    assert int((counts == 0).sum()) == 0
    assert counts.std() < 1.5 * counts.mean().sqrt()


def test_without_buckets_it_is_an_nn_embedding():
    torch.manual_seed(0)
    ours = TokenEmbedding(40, 8, padding_idx=PAD_ID)
    theirs = nn.Embedding(40, 8, padding_idx=PAD_ID)
    theirs.load_state_dict(ours.state_dict())
    tokens = torch.randint(0, 40, (3, 6))
    assert ours.ngrams is None and list(ours.state_dict()) == ["weight"]
    assert torch.equal(ours(tokens), theirs(tokens))


def test_ngram_table_starts_at_zero_and_learns():
    torch.manual_seed(0)
    emb = TokenEmbedding(40, 8, padding_idx=PAD_ID, ngram_buckets=64)
    tokens = torch.randint(1, 40, (3, 6))
    assert torch.equal(emb(tokens), nn.functional.embedding(tokens, emb.weight, padding_idx=PAD_ID))
    emb(tokens).sum().backward()
    assert emb.ngrams.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("n", [2, 3])
def test_a_token_moves_only_the_n_grams_it_is_in(n: int):
    torch.manual_seed(0)
    emb = TokenEmbedding(40, 8, padding_idx=PAD_ID, ngram_buckets=997, ngram_max=n)
    nn.init.normal_(emb.ngrams.weight)
    tokens = torch.randint(1, 40, (2, 7))
    changed = tokens.clone()
    changed[:, 3] = torch.where(tokens[:, 3] == 5, 6, 5)
    moved = (emb(tokens) - emb(changed)).abs().sum(-1) > 0  # (B, T)
    expected = torch.zeros(2, 7, dtype=torch.bool)
    expected[:, 3 : 3 + n] = True  # the word itself, and the n-grams the next n - 1 words end
    assert torch.equal(moved, expected)


def test_settings_are_checked():
    with pytest.raises(ValueError, match=r"ngram_buckets=-1 .*>= 0.*ngram_buckets=131072"):
        EncoderConfig(ngram_buckets=-1)
    with pytest.raises(ValueError, match=r"ngram_max=1 .*>= 2.*ngram_max=2"):
        EncoderConfig(ngram_max=1)
