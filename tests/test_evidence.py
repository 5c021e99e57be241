"""The naive-Bayes n-gram term of the logits (model/evidence.py) against loops written here: its ratios are the
counts of the training texts, each n-gram counted once per text; its logits are the sum over the text's distinct
n-grams; padding changes nothing; and every decomposition of the logits still adds up with it."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
from test_explanations import batch

from transformer_attention.analysis.methods import Options, methods
from transformer_attention.analysis.methods.decompx import decompx, evidence_shares
from transformer_attention.analysis.methods.decompx_paper import decompx_paper
from transformer_attention.model.classifier import TransformerClassifier
from transformer_attention.model.embedding import ngram_ids
from transformer_attention.model.evidence import NgramEvidence, first_seen, share_of_margin

V, BUCKETS = 40, 10_007  # few words, many rows: the texts' n-grams do not collide


def grams(row: list[int], n_max: int) -> list[tuple[int, int]]:
    """(position, bucket) of every n-gram ending at each position of `row`, n = 1 .. n_max, one at a time."""
    ids = torch.tensor([row])
    return [(t, int(ngram_ids(ids, n, V, BUCKETS)[0, t])) for n in range(1, n_max + 1) for t in range(len(row))]


def texts(seed: int = 0, count: int = 30) -> tuple[list[list[int]], list[int]]:
    rng = np.random.default_rng(seed)
    rows = [rng.integers(1, 8, rng.integers(1, 12)).tolist() for _ in range(count)]  # few words: many repeats
    return rows, rng.integers(0, 3, count).tolist()


def test_first_seen_is_the_loop():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 5, (6, 11), generator=g)
    real = torch.rand(6, 11, generator=g) > 0.2
    expected = torch.zeros_like(real)
    for b in range(6):
        seen = set()
        for t in range(11):
            if real[b, t] and int(ids[b, t]) not in seen:
                seen.add(int(ids[b, t]))
                expected[b, t] = True
    assert torch.equal(first_seen(ids, real), expected)


@pytest.mark.parametrize("n_max", [1, 3])
def test_the_ratios_are_each_class_against_the_rest_of_the_texts_holding_each_ngram(n_max: int):
    rows, labels = texts()
    evidence = NgramEvidence(V, 3, BUCKETS, n_max)
    evidence.fit(rows, labels, batch_size=7)  # batches of texts of several lengths
    held = [Counter() for _ in range(3)]
    for row, label in zip(rows, labels, strict=True):
        held[label].update({bucket for _, bucket in grams(row, n_max)})
    for c in range(3):
        own = np.array([held[c][b] for b in range(BUCKETS)], float) + 1
        rest = np.array([sum(held[k][b] for k in range(3) if k != c) for b in range(BUCKETS)], float) + 1
        expected = np.log(own / own.sum()) - np.log(rest / rest.sum())
        np.testing.assert_allclose(evidence.ratio[:, c].numpy(), expected, rtol=1e-5, atol=1e-5)
    assert bool(evidence.fitted)


def test_the_term_is_the_sum_over_the_texts_distinct_ngrams_and_padding_changes_nothing():
    rows, labels = texts(1, count=6)
    evidence = NgramEvidence(V, 3, BUCKETS, 3)
    evidence.fit(rows, labels)
    torch.nn.init.normal_(evidence.weight)
    table = (evidence.ratio * evidence.weight).detach()
    T = max(map(len, rows)) + 3  # padding after every row
    ids = torch.zeros(len(rows), T, dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
    got = evidence(ids, ids != 0).detach()
    for i, row in enumerate(rows):
        distinct = {bucket for _, bucket in grams(row, 3)}
        torch.testing.assert_close(got[i], table[sorted(distinct)].sum(0))
        alone = torch.tensor([row])
        torch.testing.assert_close(evidence(alone, alone != 0)[0].detach(), got[i])


def model(n_max: int = 3, **settings) -> TransformerClassifier:
    torch.manual_seed(0)
    net = TransformerClassifier(
        vocab_size=V, num_classes=3, d_model=12, num_heads=2, num_layers=2, dim_feedforward=16, max_len=16,
        nb_ngram_max=n_max, nb_buckets=BUCKETS, **settings,
    )  # fmt: skip
    rows, labels = texts(2)
    net.evidence.fit(rows, labels)
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(std=0.3)
    return net.eval().double()


@pytest.mark.parametrize("settings", [dict(pooling="cls"), dict(pooling="mean", ngram_buckets=30, ngram_max=2)])
def test_decompx_shares_the_term_by_word_and_both_variants_add_up_to_the_logits(settings: dict):
    net = model(**settings)
    ids, mask = batch()
    logits = net(ids, mask).logits
    found = decompx(net, ids, mask)
    torch.testing.assert_close(found.logits, logits, atol=1e-10, rtol=0)
    torch.testing.assert_close(found.tokens.sum(1) + found.rest, logits, atol=1e-10, rtol=0)
    assert found.evidence.abs().sum() > 0
    torch.testing.assert_close(found.evidence.sum(1), net.evidence(ids, mask), atol=1e-10, rtol=0)
    paper = decompx_paper(net, ids, mask)
    torch.testing.assert_close(paper.tokens.sum(1) + paper.unshared, logits, atol=1e-10, rtol=0)
    target = logits.argmax(-1)
    shares = evidence_shares(net, ids, mask, target)  # by word, each n-gram's split equally among its words
    torch.testing.assert_close(shares.sum(1), net.evidence(ids, mask).gather(1, target[:, None])[:, 0])


def test_gradient_methods_count_the_term_and_integrated_gradients_stays_complete():
    net = model(pooling="mean")
    ids, mask = batch()
    target = net(ids, mask).logits.argmax(-1)
    options = Options(ig_steps=64, batch_size=64)
    ig = methods()["integrated_gradients"].explain(net, ids, mask, target, options)
    assert float(ig.extra["completeness_error"].max()) < 1e-3
    without = TransformerClassifier(**{**net_settings(net), "nb_ngram_max": 0}).double().eval()
    without.load_state_dict({k: v for k, v in net.state_dict().items() if not k.startswith("evidence.")})
    for name in ("grad_x_input", "integrated_gradients", "attnlrp"):
        got = methods()[name].explain(net, ids, mask, target, options).scores
        base = methods()[name].explain(without, ids, mask, target, options).scores
        moved = evidence_shares(net, ids, mask, target)
        if name == "integrated_gradients":
            baseline = ids.masked_fill(mask, 0)
            baseline[:, 0] = ids[:, 0]
            moved = moved - evidence_shares(net, baseline, mask, target)
        torch.testing.assert_close(got - base, moved, atol=1e-6, rtol=1e-4)


def net_settings(net: TransformerClassifier) -> dict:
    from dataclasses import asdict

    return {**asdict(net.config), "vocab_size": V, "num_classes": 3}


def test_an_untrained_term_adds_nothing():
    net = TransformerClassifier(vocab_size=V, num_classes=3, nb_ngram_max=2, nb_buckets=BUCKETS).eval()
    net.evidence.fit(*texts())
    ids, mask = batch()
    assert torch.equal(net.evidence(ids, mask), torch.zeros(len(ids), 3))
    assert net.evidence.ratio.abs().sum() > 0  # counted, but not yet weighed


def test_a_fit_counts_the_training_split_alone_and_the_checkpoint_carries_the_term(tmp_path):
    import lightning as L

    from transformer_attention.data.datamodule import ReviewDataModule
    from transformer_attention.module import ClassifierModule
    from transformer_attention.training.checkpoint import load_module

    data = ReviewDataModule(toy_size=200, max_length=32, vocab_size=200, batch_size=16)
    data.setup("fit")
    tokenizer = data.tokenizer.to_str()
    settings = dict(d_model=16, num_heads=2, num_layers=1, dim_feedforward=16, nb_ngram_max=2, nb_buckets=997)
    module = ClassifierModule(vocab_size=200, num_classes=2, tokenizer=tokenizer, nb_part_loss=1.0, **settings)
    trainer = L.Trainer(max_epochs=1, limit_train_batches=3, limit_val_batches=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)  # fmt: skip
    trainer.fit(module, datamodule=data)
    assert 0 < float(trainer.callback_metrics["val/nb_share"]) < 1
    alone = NgramEvidence(200, 2, 997, 2)
    alone.fit(data.splits["train"].ids, data.splits["train"].labels)
    assert torch.equal(module.net.evidence.ratio, alone.ratio)  # the training split's counts, and only them
    assert module.net.evidence.weight.abs().sum() > 0  # and its weight trained
    path = tmp_path / "model.ckpt"
    trainer.save_checkpoint(path)
    loaded = load_module(path)
    ids = torch.as_tensor(np.asarray(data.splits["validation"].ids[0]))[None]
    assert torch.equal(loaded.net.evidence.ratio, module.net.evidence.ratio)
    torch.testing.assert_close(loaded(ids).logits, module.eval()(ids).logits)


def test_the_share_of_the_margin_is_the_terms_part_of_the_explained_class_against_the_mean_of_the_rest():
    encoder = torch.tensor([[1.0, 0.0], [0.0, 2.0], [2.0, -1.0]])
    evidence = torch.tensor([[3.0, 0.0], [0.0, -2.0], [0.0, 0.0]])
    got = share_of_margin(encoder, evidence, torch.tensor([0, 1, 0]))
    torch.testing.assert_close(got, torch.tensor([0.75, 0.5, 0.0]))
    three = share_of_margin(torch.tensor([[3.0, 0.0, 0.0]]), torch.tensor([[0.0, 2.0, -2.0]]), torch.tensor([2]))
    # class 2: the encoder's margin 0 - (3 + 0) / 2 = -1.5, the term's -2 - (0 + 2) / 2 = -3: a share of 3 / 4.5
    torch.testing.assert_close(three, torch.tensor([3 / 4.5]))


def test_a_page_says_how_much_of_its_texts_margin_the_term_carries():
    from transformer_attention.analysis.pages import evidence_note, quick_words

    net = model(pooling="mean").float()
    ids, mask = batch()
    row = ids[0][mask[0]].tolist()
    encoder, evidence, _ = net.logit_parts(ids[:1])
    share = float(share_of_margin(encoder, evidence, torch.tensor([1]))[0])
    note = evidence_note(net, row, 1, {0: "a", 1: "b", 2: "c"})
    assert f"carries {share:.0%} of this text's margin for b, the encoder {1 - share:.0%}" in note
    (page,) = quick_words(net, [row], [1], {0: "a", 1: "b", 2: "c"})
    assert note in page["words_note"]
    plain = TransformerClassifier(vocab_size=V, num_classes=3).eval()
    assert evidence_note(plain, row, 1, {0: "a", 1: "b", 2: "c"}) == ""
