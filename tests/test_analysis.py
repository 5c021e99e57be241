"""Which heads and which words matter (analysis/): head masking, the gradient score and the ERASER scores against a
NumPy oracle of a hand-built 1-layer model; the settings' checks; and, on the toy set, where known words decide the
label, that Integrated Gradients and leave-one-out find them and every method beats the random floor, through the
end-of-fit callback (TensorBoard's analysis/ tags, <run>/analysis/) and `evaluate.py analyses=...`; and that the
cost estimate's pass counts are the passes the analyses make."""

from __future__ import annotations

import itertools
import json
import math
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import lightning as L
import numpy as np
import pytest
import torch
from conftest import ROOT, run_warm
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from test_callbacks import events
from test_refusals import refused

from transformer_attention.analysis import AnalysisConfig, check_analyses, check_analysis_settings
from transformer_attention.analysis.agreement import agreement, agreement_over_texts, aopc_bounds
from transformer_attention.analysis.faithfulness import (
    CURVE,
    Faithfulness,
    eraser_scores,
    explain_texts,
    faithfulness,
    ranked,
    top_count,
)
from transformer_attention.analysis.faithfulness import passes as faithfulness_passes
from transformer_attention.analysis.heads import head_importance
from transformer_attention.analysis.heads import passes as heads_passes
from transformer_attention.analysis.methods import _forward, default_names, value_zeroing
from transformer_attention.analysis.methods import names as method_names
from transformer_attention.analysis.plan import plan
from transformer_attention.analysis.removal import keeping, removal_kind, without
from transformer_attention.analysis.run import target_classes
from transformer_attention.callbacks import ModelAnalysis
from transformer_attention.callbacks import analysis as analysis_callback
from transformer_attention.callbacks.analysis import FIT_END_METHODS
from transformer_attention.data import EncodedDataset, toy
from transformer_attention.data.toy import deciding_words as toy_deciding_words
from transformer_attention.data.toy import make_toy_splits
from transformer_attention.errors import ConfigError
from transformer_attention.model import TransformerClassifier
from transformer_attention.training.builders import (
    TrainerBuilder,
    build_data,
    build_loggers,
    build_model,
    instantiate_group,
)

MASK_ID = 3


# ---- a hand-built model and its NumPy oracle ------------------------------------------------------------
def hand_model() -> TransformerClassifier:
    """1 layer, 2 heads, d_model 4, mean pooling, no dropout, in float64; weights drawn once from a fixed seed
    and scaled so that the classes are not saturated."""
    net = TransformerClassifier(
        vocab_size=8, num_classes=2, d_model=4, num_heads=2, num_layers=1, dim_feedforward=6, dropout=0.0,
        pooling="mean", max_len=16, attention_impl="math",
    ).double().eval()  # fmt: skip
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, p in net.named_parameters():
            if "norm" not in name:
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.5)
        net.embedding.weight[0].zero_()  # [PAD]
    return net


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w + b


def oracle(net: TransformerClassifier, ids: list[int], gates: np.ndarray | None = None) -> np.ndarray:
    """p(class | ids), (C,), by the formulas in NumPy: embedding x sqrt(D) + sinusoids, one post-norm layer whose
    head h's output is multiplied by gates[h] before w_o, mean pooling, the head."""
    P = {k: v.detach().numpy() for k, v in net.state_dict().items()}
    D, H = 4, 2
    dk, T = D // H, len(ids)
    pos, i = np.arange(T)[:, None], np.arange(0, D, 2)[None, :]
    pe = np.zeros((T, D))
    pe[:, 0::2], pe[:, 1::2] = np.sin(pos / 10000 ** (i / D)), np.cos(pos / 10000 ** (i / D))
    x = P["embedding.weight"][ids] * math.sqrt(D) + pe  # (T, D)
    a = "encoder.layers.0.self_attn."

    def linear(name: str, v: np.ndarray) -> np.ndarray:
        return v @ P[f"{name}.weight"].T + P[f"{name}.bias"]

    q, k, v = (linear(a + w, x).reshape(T, H, dk).transpose(1, 0, 2) for w in ("w_q", "w_k", "w_v"))  # (H, T, dk)
    s = q @ k.transpose(0, 2, 1) / math.sqrt(dk)
    w = np.exp(s - s.max(-1, keepdims=True))
    heads = (w / w.sum(-1, keepdims=True)) @ v  # (H, T, dk)
    if gates is not None:
        heads = heads * np.asarray(gates, dtype=np.float64)[:, None, None]
    x = layer_norm(x + linear(a + "w_o", heads.transpose(1, 0, 2).reshape(T, D)), P["encoder.layers.0.norm1.weight"],
                   P["encoder.layers.0.norm1.bias"])  # fmt: skip
    ff = linear("encoder.layers.0.linear2", np.maximum(linear("encoder.layers.0.linear1", x), 0))
    x = layer_norm(x + ff, P["encoder.layers.0.norm2.weight"], P["encoder.layers.0.norm2.bias"])
    logits = linear("head", x.mean(0))
    e = np.exp(logits - logits.max())
    return e / e.sum()


ROWS = [[2, 4, 5, 6, 7], [2, 5, 4], [2, 7, 7, 4, 5, 6], [2, 6], [2, 4, 6, 5]]
LABELS = [1, 0, 1, 0, 0]


def test_the_oracle_is_the_model():
    net = hand_model()
    for row in ROWS:
        with torch.no_grad():
            p = net(torch.tensor([row])).logits.softmax(-1)[0].numpy()
        np.testing.assert_allclose(p, oracle(net, row), rtol=0, atol=1e-6)
        assert p.max() < 0.99  # not saturated: the scores below are not all zero


def test_head_masking_and_the_gradient_score_match_the_oracle():
    net = hand_model()
    result = head_importance(net, ROWS, LABELS, batch_size=2)
    losses = {}
    for gates in ([1, 1], [0, 1], [1, 0], [0, 0]):
        probs = [oracle(net, row, np.array(gates, dtype=np.float64)) for row in ROWS]
        acc = np.mean([p.argmax() == y for p, y in zip(probs, LABELS, strict=True)])
        losses[tuple(gates)] = loss = -np.mean([math.log(p[y]) for p, y in zip(probs, LABELS, strict=True)])
        if gates == [1, 1]:
            assert result.accuracy == acc and result.loss == pytest.approx(loss, abs=1e-7)
        elif sum(gates) == 1:
            h = gates.index(0)
            assert result.masked_accuracy[0, h] == acc
            assert result.masked_loss[0, h] == pytest.approx(loss, abs=1e-7)
    np.testing.assert_allclose(
        result.loss_increase[0], [losses[(0, 1)] - losses[(1, 1)], losses[(1, 0)] - losses[(1, 1)]], atol=1e-7
    )
    # E_x |dL(x)/d xi_h| by central differences of the oracle, row by row
    eps, expected = 1e-5, np.zeros(2)
    for row, y in zip(ROWS, LABELS, strict=True):
        for h in range(2):
            up, down = np.ones(2), np.ones(2)
            up[h], down[h] = 1 + eps, 1 - eps
            expected[h] += abs(math.log(oracle(net, row, down)[y]) - math.log(oracle(net, row, up)[y])) / (2 * eps)
    np.testing.assert_allclose(result.gradient[0], expected / len(ROWS), rtol=1e-5)
    # pruning: the masking order masks the smaller loss increase first; the last point masks both heads
    first = int(np.argmin(result.loss_increase[0]))
    assert result.pruning["masking"]["order"][0] == [0, first]
    assert result.pruning["masking"]["loss"] == pytest.approx(
        [losses[(1, 1)], losses[(0, 1) if first == 0 else (1, 0)], losses[(0, 0)]], abs=1e-7
    )


def test_ranking_and_top_k_counts():
    assert ranked(np.array([9.0, 0.1, 0.9, 0.5, 0.9])) == [2, 4, 3, 1]  # [CLS] never ranked; ties: earlier first
    assert [top_count(k, 4) for k in (10, 25, 26, 50, 100)] == [1, 1, 2, 2, 4]
    assert [top_count(k, 7) for k in (10, 20, 50)] == [1, 2, 4]
    assert without([2, 4, 5, 6], {1, 3}, MASK_ID) == [2, 3, 5, 3] and without([2, 4, 5, 6], {1, 3}, None) == [2, 5]
    assert keeping([2, 4, 5, 6], {2}, MASK_ID) == [2, 3, 5, 3] and keeping([2, 4, 5, 6], {2}, None) == [2, 5]


@pytest.mark.parametrize("mask_id", [MASK_ID, None])
def test_eraser_scores_match_hand_computed_values(mask_id: int | None):
    """Text [CLS] a b c d (ids 2 4 5 6 7) with attribution 0.1, 0.9, 0.5, 0.3 to a, b, c, d: the order is b, c, d,
    a; top 25% = {b}, top 50% = {b, c}. Every perturbed text is written out by hand and scored by the oracle."""
    net = hand_model()
    row = [2, 4, 5, 6, 7]
    p = oracle(net, row)
    y = int(p.argmax())
    M = mask_id

    def prob(ids: list[int]) -> float:
        return oracle(net, [t for t in ids if t is not None])[y]

    if M is not None:
        drop_b, drop_bc, keep_b, keep_bc = [2, 4, M, 6, 7], [2, 4, M, M, 7], [2, M, 5, M, M], [2, M, 5, 6, M]
        # the deletion curve: j% of 4 words -> ceil(j * 4 / 100) removed, in the order b, c, d, a
        removed = {0: row, 1: drop_b, 2: drop_bc, 3: [2, 4, M, M, M], 4: [2, M, M, M, M]}
    else:
        drop_b, drop_bc, keep_b, keep_bc = [2, 4, 6, 7], [2, 4, 7], [2, 5], [2, 5, 6]
        removed = {0: row, 1: drop_b, 2: drop_bc, 3: [2, 4], 4: [2]}
    attribution = np.array([5.0, 0.1, 0.9, 0.5, 0.3])
    (scores,) = eraser_scores(net, [row], [y], [{"hand": attribution}], k=[25, 50], mask_id=M, batch_size=3)
    s = scores["hand"]
    assert s["comprehensiveness@25"] == pytest.approx(p[y] - prob(drop_b), abs=1e-7)
    assert s["comprehensiveness@50"] == pytest.approx(p[y] - prob(drop_bc), abs=1e-7)
    assert s["sufficiency@25"] == pytest.approx(p[y] - prob(keep_b), abs=1e-7)
    assert s["sufficiency@50"] == pytest.approx(p[y] - prob(keep_bc), abs=1e-7)
    assert s["comprehensiveness"] == pytest.approx((s["comprehensiveness@25"] + s["comprehensiveness@50"]) / 2)
    counts = [math.ceil(j * 4 / 100) for j in CURVE]
    curve = [p[y] - prob(removed[c]) for c in counts]
    assert s["curve"] == pytest.approx(curve, abs=1e-7) and s["aopc"] == pytest.approx(np.mean(curve), abs=1e-7)
    assert s["curve"][0] == 0.0 and len(curve) == 11


def test_leave_one_out_and_the_gradient_methods_on_the_oracle():
    net = hand_model()
    row = ROWS[0]
    p = oracle(net, row)
    y = int(p.argmax())
    (explained,), ig_error = explain_texts(net, [row], k=[50], mask_id=MASK_ID, ig_steps=200)
    assert explained.predicted == y and explained.probability == pytest.approx(p[y], abs=1e-7)
    loo = [0.0] + [p[y] - oracle(net, row[:i] + [MASK_ID] + row[i + 1 :])[y] for i in range(1, len(row))]
    np.testing.assert_allclose(explained.attributions["leave_one_out"], loo, atol=1e-7)
    # Integrated Gradients is complete: its attributions add up to logit(text) - logit(baseline of [PAD] words)
    with torch.no_grad():
        logit = net(torch.tensor([row])).logits[0, y].item()
        mask = torch.ones(1, len(row), dtype=torch.bool)
        base = net(torch.tensor([[row[0]] + [0] * (len(row) - 1)]), mask).logits[0, y].item()
    assert explained.attributions["integrated_gradients"].sum() == pytest.approx(logit - base, rel=1e-3)
    assert ig_error < 1e-3
    np.testing.assert_allclose(explained.attributions["attention"].sum(), 1.0, atol=1e-6)  # a weight row
    assert sorted(explained.attributions) == sorted(default_names())  # null: all but those run only when named


def test_norm_weighted_attention_on_the_oracle():
    """attention_norm: the mean-pooled rows of the head mean of alpha_ij ||f_h(x_j)||, f_h from w_v and head h's
    slice of w_o in NumPy; its rollout, on one layer, is the residual half plus half the row-scaled map."""
    net = hand_model()
    row = ROWS[2]
    (explained,), _ = explain_texts(net, [row], k=[50], mask_id=MASK_ID, ig_steps=4)
    P = {k: v.detach().numpy() for k, v in net.state_dict().items()}
    ids = torch.tensor([row])
    with torch.no_grad():
        x = net.pos_encoder(net.embedding(ids) * 2.0)[0].numpy()  # (T, D): sqrt(4) = 2
        alpha = net(ids, need_weights=True).attentions[0][0].numpy()  # (H, T, T)
    v = x @ P["encoder.layers.0.self_attn.w_v.weight"].T + P["encoder.layers.0.self_attn.w_v.bias"]  # (T, D)
    w_o = P["encoder.layers.0.self_attn.w_o.weight"]
    moved = np.stack([np.linalg.norm(v[:, h * 2 : h * 2 + 2] @ w_o[:, h * 2 : h * 2 + 2].T, axis=-1) for h in (0, 1)])
    maps = (alpha * moved[:, None, :]).mean(axis=0)  # (T, T): the head mean of alpha_ij ||f_h(x_j)||
    np.testing.assert_allclose(explained.attributions["attention_norm"], maps.mean(axis=0), rtol=1e-9)
    shares = maps / maps.sum(axis=-1, keepdims=True)
    expected = (0.5 * np.eye(len(row)) + 0.5 * shares).mean(axis=0)
    np.testing.assert_allclose(explained.attributions["attention_norm_rollout"], expected, rtol=1e-5)
    assert not np.allclose(shares.mean(axis=0), explained.attributions["attention"], atol=1e-3)  # it differs


def test_any_class_is_explained_and_a_missing_one_named():
    """targets: leave-one-out and the ERASER scores read the class asked for, not the predicted one."""
    net = hand_model()
    row = ROWS[0]
    p = oracle(net, row)
    other = 1 - int(p.argmax())
    (e,), _ = explain_texts(net, [row], k=[50], mask_id=MASK_ID, ig_steps=4, targets=[other])
    assert e.predicted == int(p.argmax()) and e.target == other and e.probability == pytest.approx(p[other])
    loo = [0.0] + [p[other] - oracle(net, row[:i] + [MASK_ID] + row[i + 1 :])[other] for i in range(1, len(row))]
    np.testing.assert_allclose(e.attributions["leave_one_out"], loo, atol=1e-7)
    assert target_classes("predicted", [0, 1], None, 2, 2) is None
    assert target_classes("true", [0, 1], None, 2, 2) == [0, 1]
    assert target_classes("positive", None, ["negative", "positive"], 2, 3) == [1, 1, 1]
    with pytest.raises(ConfigError, match=r"analysis.target='postive' is not a class: .* negative, positive$"):
        target_classes("postive", None, ["negative", "positive"], 2, 3)
    with pytest.raises(ConfigError, match="analysis.target=true: these texts have no labels"):
        target_classes("true", None, None, 2, 3)
    with pytest.raises(ConfigError, match=r"analysis.target=3 must be predicted, true or a class name"):
        check_analysis_settings({"target": 3})


def test_the_toy_sets_deciding_words_follow_its_templates():
    cases = {
        "the plot is very clever": "clever",
        "the plot is not at all clever": "not clever",  # "not at all" puts "not" first
        "the cast is dull but the story is truly brilliant": "brilliant",
        "although the cast is dull , the story is brilliant": "brilliant",
        "the plot is not bad but the ending is dull": "dull",
        "i did not enjoy the script": "not enjoy",
        "i loved this movie": "loved",
        "the cast is funny and clever": "funny clever",
    }
    for text, deciding in cases.items():
        words = text.split()
        assert " ".join(w for w, d in zip(words, toy_deciding_words(text), strict=True) if d) == deciding, text
    for text in make_toy_splits(num_examples=300)["test"]["text"]:  # as the tests' own reading of the templates
        found = {i for i, d in enumerate(toy_deciding_words(text)) if d}
        assert found and found == deciding_words(text.split()), text


def test_tau_b_counts_ties_as_the_definition_does():
    """Tau-b counts ties as the definition does (a hand count), a constant text is NaN (AUPRC against scikit-learn:
    test_plausibility.py)."""
    from transformer_attention.analysis.agreement import kendall_tau_b

    # pairs (0,1): tied in x; (0,2), (1,2): concordant. tau-b = (2 - 0) / sqrt(2 untied in x * 3 untied in y)
    assert kendall_tau_b(np.array([1.0, 1.0, 2.0]), np.array([1.0, 2.0, 3.0])) == pytest.approx(2 / math.sqrt(6))
    assert math.isnan(kendall_tau_b(np.ones(4), np.arange(4.0)))


def test_agreement_is_kendalls_tau_with_the_references_words_only():
    loo = np.array([9.0, 0.1, 0.5, 0.3, 0.2])  # [CLS] first: never ranked
    scores = {"leave_one_out": loo, "same": loo * 3 + 1, "reversed": -loo, "flat": np.ones(5)}
    tau = agreement(scores)
    assert tau["same"] == {"tau_leave_one_out": 1.0} and tau["reversed"]["tau_leave_one_out"] == -1.0
    assert math.isnan(tau["flat"]["tau_leave_one_out"])  # no ranking: no agreement
    swapped = agreement({"leave_one_out": loo, "one_swap": np.array([0.0, 0.1, 0.5, 0.2, 0.3])})
    assert swapped["one_swap"]["tau_leave_one_out"] == pytest.approx(4 / 6)  # 5 of 6 pairs concordant
    base = {"comprehensiveness@50": 0.5, "comprehensiveness": 0.5, "sufficiency@50": 0.1, "sufficiency": 0.1}
    report = Faithfulness(split="test", texts=3, removal="mask", k=[50.0], ig_error=0.0)
    report.scores = {"a": {**base, "aopc": 0.3, "naopc": 0.6, "tau_leave_one_out": 1.0},
                     "b": {**base, "aopc": 0.2, "naopc": 0.4, "tau_leave_one_out": 0.25}}  # fmt: skip
    report.sem = {"a": {"tau_leave_one_out": 3e-18}, "b": {"tau_leave_one_out": 0.125}}
    head, _, a, b = report.table()
    assert head.endswith("| AOPC | nAOPC | tau LOO | s / text |")
    assert a.endswith("| 0.300 | 0.600 ± 0.000 | 1 (identical) | - |")  # no time measured: "-"
    assert b.endswith("| 0.200 | 0.400 ± 0.000 | 0.250 ± 0.125 | - |")


def test_normalized_aopc_lies_between_greedy_bounds_inside_the_exhaustive_ones():
    """On a 4-word text: the greedy bounds inside the best and worst AOPC of all 24 removal orders, and each
    method's nAOPC (AOPC - lower) / (upper - lower), the bounds widened by the methods' own orders."""
    net = hand_model()
    row = ROWS[0]
    (explained,), _ = explain_texts(net, [row], k=[50], mask_id=MASK_ID, ig_steps=8)
    y = explained.predicted
    aopcs = []
    for order in itertools.permutations(range(1, len(row))):
        drops = [explained.probability - oracle(net, without(row, set(order[: top_count(j, 4)]), MASK_ID))[y]
                 for j in CURVE]  # fmt: skip
        aopcs.append(np.mean(drops))
    best, worst = max(aopcs), min(aopcs)
    ((lower, upper),) = aopc_bounds(
        net, [row], [y], [explained.probability], mask_id=MASK_ID, curve=CURVE, count=top_count
    )
    assert worst - 1e-7 <= lower < upper <= best + 1e-7  # the oracle and the model agree to ~1e-8
    found = [s["aopc"] for s in explained.scores.values()]
    lower, upper = min(lower, *found), max(upper, *found)  # widened by any method's order that beats the search
    for s in explained.scores.values():
        assert worst - 1e-7 <= s["aopc"] <= best + 1e-7
        assert s["naopc"] == pytest.approx((s["aopc"] - lower) / (upper - lower))
        assert 0.0 <= s["naopc"] <= 1.0
    assert explained.scores["leave_one_out"]["tau_leave_one_out"] == 1.0
    assert explained.scores["integrated_gradients"]["tau_integrated_gradients"] == 1.0


# ---- the cost estimate: each analysis says how many passes it makes -------------------------------------
def counting(net: torch.nn.Module, monkeypatch: pytest.MonkeyPatch | None = None) -> dict[str, int]:
    """The rows `net` runs forward, and the rows a gradient flows back through its logits, as they happen; with
    `monkeypatch`, the rows the explanations' own forward pass runs (methods/_forward.py) too, and value zeroing's
    (each of a row's T tokens zeroed in turn: a pass of the layer's rows per token, on this one-layer model)."""
    made = {"forward": 0, "backward": 0}

    def backward(grad: torch.Tensor) -> None:
        made["backward"] += grad.shape[0]

    def seen(module, args, out) -> None:
        made["forward"] += args[0].shape[0]
        if out.logits.requires_grad:
            out.logits.register_hook(backward)

    net.register_forward_hook(seen)
    if monkeypatch is not None:
        run, layer_map = _forward.run, value_zeroing.layer_map

        def written_out(net, ids, mask, *args, **kwargs):
            trace = run(net, ids, mask, *args, **kwargs)
            made["forward"] += ids.shape[0]
            if trace.logits.requires_grad:
                trace.logits.register_hook(backward)
            return trace

        def zeroed(traced, layer, mask):
            made["forward"] += int(mask.sum())
            return layer_map(traced, layer, mask)

        names = ("_maps", "decompx", "decompx_paper", "attnlrp")
        users = [sys.modules[f"transformer_attention.analysis.methods.{m}"] for m in names]
        for module in (_forward, *users):
            monkeypatch.setattr(module, "run", written_out)
        paper, propagate = users[2], users[2].propagate

        def propagated(net, trace, mask):  # T + 1 vectors per token of a row of T: T forward passes of the row
            made["forward"] += trace.x0.shape[0] * trace.x0.shape[1]
            return propagate(net, trace, mask)

        monkeypatch.setattr(paper, "propagate", propagated)
        monkeypatch.setattr(value_zeroing, "layer_map", zeroed)
    return made


def test_head_importance_makes_the_passes_it_says():
    net = hand_model()
    made = counting(net)
    head_importance(net, ROWS, LABELS, batch_size=2)
    said = heads_passes(len(ROWS), num_layers=1, num_heads=2)
    assert made == {"forward": said.forward, "backward": said.backward}
    assert said.cost == len(ROWS) * (1 + 3 * 1 * 2 + 3)  # all heads, 3 x L x H masked, a backward as two forwards


@pytest.mark.parametrize("method", method_names())
def test_faithfulness_makes_the_passes_it_says(method: str, monkeypatch: pytest.MonkeyPatch):
    """One method at a time, on texts of different lengths with words masked: no two removals coincide, so the
    count is exact; with every method together it is what the model is spared when two of them agree."""
    net = hand_model()
    made = counting(net, monkeypatch)
    rows = [*ROWS, [2]]  # a text with no word: not scored
    tokens = [[str(t) for t in row] for row in rows]
    options = {"k": [25, 50], "ig_steps": 8}
    faithfulness(net, rows, tokens=tokens, split="validation", mask_id=MASK_ID, methods=[method], **options)
    said = faithfulness_passes(rows, methods=[method], **options)
    assert made == {"forward": said.forward, "backward": said.backward}
    made.update(forward=0, backward=0)  # without nAOPC: no bounds searched, none counted, none reported
    found = faithfulness(
        net, rows, tokens=tokens, split="validation", mask_id=MASK_ID, methods=[method], normalized=False, **options
    )
    said = faithfulness_passes(rows, methods=[method], normalized=False, **options)
    assert made == {"forward": said.forward, "backward": said.backward}
    assert math.isnan(found.scores[method]["naopc"]) and "nAOPC" not in found.table()[0]
    made.update(forward=0, backward=0)
    faithfulness(net, rows, tokens=tokens, split="validation", mask_id=MASK_ID, methods=None, **options)
    said = faithfulness_passes(rows, methods=None, **options)
    assert made["backward"] == said.backward and made["forward"] <= said.forward


def test_the_cost_estimate_sums_the_passes_the_analyses_say(monkeypatch):
    """ModelAnalysis.estimate: the seconds per token of one timed pass over the validation rows (after a warm-up of
    a few), times the passes each analysis says it makes on the rows it will read, each as long as their mean."""
    net = hand_model()
    callback = ModelAnalysis(settings={"samples": 3, "ig_steps": 8, "k": [25, 50]})
    splits = {"validation": EncodedDataset(ROWS, LABELS), "train": EncodedDataset(ROWS, LABELS)}
    callback.plan = plan(callback.names, callback.settings, {"validation": 5}, split="validation")
    clock = iter([10.0, 10.5])  # the timed pass takes 0.5 s
    monkeypatch.setattr(analysis_callback.time, "perf_counter", lambda: next(clock))
    passes, run = [], analysis_callback.probabilities
    monkeypatch.setattr(
        analysis_callback, "probabilities", lambda n, rows, **kw: passes.append(len(rows)) or run(n, rows, **kw)
    )
    per_token = 0.5 / sum(len(r) for r in ROWS)
    heads_rows, _ = callback.plan.rows("heads", splits)
    texts, _ = callback.plan.rows("faithfulness", splits)
    assert len(heads_rows) == 5 and len(texts) == 3
    tokens = heads_passes(5, num_layers=1, num_heads=2).cost * np.mean([len(r) for r in heads_rows])
    said = faithfulness_passes(texts, k=[25, 50], methods=FIT_END_METHODS, ig_steps=8, normalized=False)
    tokens += said.cost * np.mean([len(r) for r in texts])  # the end of fit leaves nAOPC's bounds out
    assert callback.estimate(net, splits) == pytest.approx(tokens * per_token)
    assert passes == [min(len(ROWS), analysis_callback.WARM_ROWS), len(ROWS)]  # a warm-up, then the timed pass


# ---- the settings, checked before any work -----------------------------------------------------------
def test_the_settings_are_checked_with_one_line_each():
    assert check_analyses("heads") == ["heads"] and check_analyses(["faithfulness", "heads"]) == [
        "faithfulness",
        "heads",
    ]
    with pytest.raises(ConfigError, match=r"analyses='head' is not an analysis: did you mean analyses=heads\?"):
        check_analyses(["head"])
    cases = {
        "k": ([0, 50], r"analysis.k=\[0, 50\]: 0 is not a percentage in \(0, 100\)"),
        "samples": (0, r"analysis.samples=0 must be a whole number >= 1"),
        "removal": ("drop", r"analysis.removal='drop' must be one of auto, mask, delete"),
        "ig_steps": (1, r"analysis.ig_steps=1 must be a whole number >= 2"),
        "split": ("train", r"analysis.split='train' must be validation or test"),
    }
    for key, (value, message) in cases.items():
        with pytest.raises(ConfigError, match=message):
            check_analysis_settings({key: value})
    check_analysis_settings(vars(AnalysisConfig()))  # the defaults pass
    sizes = {"train": 50, "validation": 10, "test": 12}
    chosen = plan(["heads", "faithfulness"], {}, sizes, split="test")
    assert (chosen.samples, chosen.heads_samples, chosen.splits) == (12, 10, {"test", "validation"})
    with pytest.raises(ConfigError, match=r"analysis.samples=13 is more than the 12 texts of the test split"):
        plan(["faithfulness"], {"samples": 13}, sizes, split="test")
    with pytest.raises(ConfigError, match=r"analysis.heads_samples=11 is more than the 10 texts of the validation"):
        plan(["heads"], {"heads_samples": 11}, sizes, split="test")
    assert removal_kind("auto", {"[MASK]": 3}) == "mask" and removal_kind("auto", {"[PAD]": 0}) == "delete"


def test_max_words_samples_only_the_texts_short_enough():
    """analysis.max_words draws the faithfulness sample from the texts of at most that many words ([CLS] apart), the
    same rows on a rerun; more than the short texts hold, or none short enough, is one line with the fix."""
    lengths = [3, 70, 5, 64, 65, 2, 100, 64]  # words; ids are [CLS] + that many
    split = SimpleNamespace(ids=[[1] * (n + 1) for n in lengths], labels=[0] * len(lengths))
    sizes = {"test": len(lengths)}
    chosen = plan(["faithfulness"], {"max_words": 64}, sizes, split="test")
    rows, _ = chosen.rows("faithfulness", {"test": split})
    assert sorted(len(r) - 1 for r in rows) == [2, 3, 5, 64, 64]  # all of the short ones: samples was null
    chosen = plan(["faithfulness"], {"max_words": 64, "samples": 3, "seed": 1}, sizes, split="test")
    picked = [len(r) - 1 for r in chosen.rows("faithfulness", {"test": split})[0]]
    assert (
        len(picked) == 3
        and max(picked) <= 64
        and picked == [len(r) - 1 for r in chosen.rows("faithfulness", {"test": split})[0]]
    )
    with pytest.raises(ConfigError, match=r"analysis.samples=6 is more than the 5 texts of the test \(texts of <= 64"):
        plan(["faithfulness"], {"max_words": 64, "samples": 6}, sizes, split="test").rows(
            "faithfulness", {"test": split}
        )
    with pytest.raises(ConfigError, match=r"analysis.max_words=1: none of the 8 test texts has 1 words or fewer"):
        plan(["faithfulness"], {"max_words": 1}, sizes, split="test").rows("faithfulness", {"test": split})
    with pytest.raises(ConfigError, match=r"analysis.max_words=0 must be a whole number >= 1"):
        check_analysis_settings({"max_words": 0})


# ---- on the toy set: known words decide the label ------------------------------------------------------
SENTIMENT = set(
    toy.POSITIVE + toy.NEGATIVE + toy.LOVE + toy.HATE + ["love", "enjoy", "like", "hate", "dislike", "regret"]
)


def deciding_words(words: list[str]) -> set[int]:
    """The positions of the words that decide a toy review's label (toy.py's templates): the sentiment word after
    "but" or after the comma of "although ..., ...", else every sentiment word and negation."""
    if "but" in words or words[0] == "although":
        start = words.index("but" if "but" in words else ",")
        return {i for i in range(start + 1, len(words)) if words[i] in SENTIMENT}
    return {i for i, w in enumerate(words) if w in SENTIMENT or w in ("not", "never", "hardly")}


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """The default toy run for 3 epochs, the end-of-fit analysis always on (max_cost null)."""
    tmp = tmp_path_factory.mktemp("toy")
    overrides = [
        "trainer.max_epochs=3",
        f"paths.output_dir={tmp}",
        "trainer.enable_progress_bar=false",
        "callbacks.attention_maps=null",
        "callbacks.model_analysis.max_cost=null",
    ]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    L.seed_everything(cfg.seed)
    callbacks = instantiate_group(cfg.callbacks)
    trainers = TrainerBuilder(cfg.trainer, callbacks, build_loggers(cfg.logger))
    dm = build_data(cfg.data, output_dir=str(tmp))
    dm.setup("fit")
    module = build_model(instantiate(cfg.model, _partial_=True), dm)
    trainer = trainers.for_model(module, dm)
    trainer.fit(module, datamodule=dm)
    (analysis,) = [c for c in callbacks if isinstance(c, ModelAnalysis)]
    return tmp, trainer, module, dm, analysis


@pytest.mark.slow
def test_the_end_of_fit_analysis_reaches_tensorboard_and_the_run_folder(toy_run):
    tmp, trainer, module, dm, analysis = toy_run
    assert trainer.callback_metrics["val/acc"] > 0.9  # it learned the task
    result = analysis.result
    assert result.heads.rows == 400 and result.faithfulness.texts == 100 and result.faithfulness.removal == "mask"
    assert result.faithfulness.plausible > 50  # the toy set's deciding words are known: plausibility per method
    for s in result.faithfulness.scores.values():  # plausibility per word, ERASER's reruns included
        assert 0.0 <= s["auprc"] <= 1.0 and 0.0 <= s["token_f1"] <= 1.0 and "eraser_sufficiency" in s
    best = trainer.checkpoint_callback  # the analysis is of the kept model, the one the test runs on
    assert result.settings["weights"] == f"the best checkpoint {Path(best.best_model_path).name}"
    assert result.heads.accuracy == pytest.approx(float(best.best_model_score), abs=1e-6)
    assert all(analysis.cost[k] > 0 for k in ("seconds", "estimated_seconds", "fit_seconds"))  # what it cost, kept
    files = {p.name for p in (tmp / "analysis").iterdir()}
    assert files == {f"{n}.{e}" for n in ("heads", "pruning", "faithfulness") for e in ("png",)} | {
        "heads.json", "faithfulness.json", "faithfulness.md"
    }  # fmt: skip
    saved = json.loads((tmp / "analysis" / "faithfulness.json").read_text())
    assert saved["scores"]["integrated_gradients"]["aopc"] == pytest.approx(
        result.faithfulness.scores["integrated_gradients"]["aopc"]
    )
    heads = json.loads((tmp / "analysis" / "heads.json").read_text())
    assert np.array(heads["masked_accuracy"]).shape == (2, 4) and len(heads["pruning"]["masking"]["accuracy"]) == 9
    acc = events(tmp)
    for tag in ("~model_analysis/heads", "~model_analysis/pruning", "~model_analysis/faithfulness"):
        assert [e.step for e in acc.Images(tag)] == [trainer.global_step]
    texts = acc.Tags()["tensors"]
    assert "~model_analysis/faithfulness/text_summary" in texts and "~model_analysis/summary/text_summary" in texts


@pytest.mark.slow
def test_every_method_beats_the_random_floor_and_ig_and_loo_find_the_deciding_words(toy_run):
    _, _, module, dm, analysis = toy_run
    scores = analysis.result.faithfulness.scores
    for method in scores:
        if method != "random":
            assert scores[method]["comprehensiveness"] > scores["random"]["comprehensiveness"] + 0.1, method
            assert scores[method]["aopc"] > scores["random"]["aopc"], method
    val = dm.splits["validation"]
    rows = [list(map(int, r)) for r in val.ids[:200]]
    explained, _ = explain_texts(
        module.net, rows, mask_id=MASK_ID, methods=["integrated_gradients", "leave_one_out", "random"]
    )
    for method, (top_one, all_first) in {"integrated_gradients": (0.75, 0.5), "leave_one_out": (0.75, 0.5),
                                         "random": (None, None)}.items():  # fmt: skip
        hits = firsts = 0
        for row, e in zip(rows, explained, strict=True):
            words = [dm.tokenizer.id_to_token(t) for t in row]
            deciding = {i + 1 for i in deciding_words(words[1:])}
            assert deciding, words
            order = ranked(e.attributions[method])
            hits += order[0] in deciding
            firsts += set(order[: len(deciding)]) == deciding
        if top_one is None:  # the check can fail: a random ranking rarely puts them first
            assert firsts / len(rows) < 0.3
        else:
            assert hits / len(rows) >= top_one and firsts / len(rows) > all_first, (method, hits, firsts)


@pytest.mark.slow
def test_evaluate_runs_both_analyses_on_a_checkpoint_and_refuses_bad_inputs(toy_run, tmp_path: Path):
    tmp, *_ = toy_run
    ckpt = tmp / "checkpoints" / "last.ckpt"
    start = time.monotonic()
    analyses = ["analyses=[heads,faithfulness]", f"paths.log_dir={tmp_path}"]
    proc = run_warm("evaluate.py", f"ckpt_path={ckpt}", *analyses)
    assert time.monotonic() - start < 60
    assert "head importance (masking each head" in proc.stdout and "faithfulness (ERASER; 100 test texts" in proc.stdout
    (run,) = (tmp_path / "evaluate" / "runs").iterdir()
    assert {"heads.png", "pruning.png", "faithfulness.png", "heads.json", "faithfulness.json"} <= {
        p.name for p in (run / "analysis").iterdir()
    }
    assert json.loads((run / "analysis" / "faithfulness.json").read_text())["split"] == "test"
    line = refused("evaluate.py", f"ckpt_path={ckpt}", "analyses=[heads,faithfulnes]", f"paths.log_dir={tmp_path}")
    assert "analyses='faithfulnes' is not an analysis: did you mean analyses=faithfulness?" in line
    line = refused("evaluate.py", f"ckpt_path={ckpt}", "analyses=faithfulness", "analysis.samples=401",
                   f"paths.log_dir={tmp_path}")  # fmt: skip
    assert "analysis.samples=401 is more than the 400 texts of the test split: use analysis.samples=400" in line
    line = refused(
        "evaluate.py", f"ckpt_path={ckpt}", "analyses=heads", "analysis.k=[10,100]", f"paths.log_dir={tmp_path}"
    )
    assert "analysis.k=[10, 100]: 100 is not a percentage in (0, 100)" in line
    assert len(list((tmp_path / "evaluate" / "runs").iterdir())) == 1  # the refused runs left no folder


@pytest.mark.slow
def test_an_analysis_that_would_cost_too_much_is_skipped_with_the_command_that_runs_it(tmp_path: Path, tiny_overrides):
    proc = run_warm("train.py", *tiny_overrides, "callbacks.model_analysis.max_cost=0.0001")
    log = next((tmp_path / "outputs" / "train" / "runs").glob("*/train.log")).read_text()
    lines = log.splitlines()
    (at,) = [i for i, line in enumerate(lines) if "model analysis skipped" in line]
    line, command = lines[at], lines[at + 1]  # the command on lines of its own, to copy
    while lines[at + 1].endswith(" \\"):  # continued: the overrides on lines under 120 characters
        at += 1
        assert len(lines[at + 1]) < 120 and lines[at + 1].startswith("      "), lines[at : at + 2]
        command = command.removesuffix("\\") + lines[at + 1].strip()
    assert "callbacks.model_analysis.max_cost=0.0001" in line and command.startswith("  python evaluate.py ")
    line += command
    assert (
        "python evaluate.py ckpt_path=" in line and "'analyses=[heads,faithfulness]' analysis.split=validation" in line
    )
    assert "data." not in command  # the checkpoint records its data: evaluate.py reads the same splits without them
    assert not list((tmp_path / "outputs").rglob("analysis")) and proc.returncode == 0
    line = refused("train.py", *tiny_overrides, "callbacks.model_analysis.max_cost=0")
    assert "callbacks.model_analysis.max_cost=0 must be a positive share of the fit's time" in line


def test_the_heads_rank_correlation_is_scipys_spearman_ties_included():
    from scipy.stats import spearmanr

    from transformer_attention.analysis.heads import _spearman

    rng = np.random.default_rng(0)
    for _ in range(5):
        a, b = rng.integers(0, 4, (2, 4)).astype(float), rng.normal(size=(2, 4))  # (L, H) tables, ties in a
        assert _spearman(a, b) == pytest.approx(spearmanr(a.ravel(), b.ravel()).statistic, abs=1e-5)
    assert np.isnan(_spearman(np.ones((2, 2)), rng.normal(size=(2, 2))))  # a constant table: no ranking


def test_agreement_over_texts_is_the_mean_and_standard_error_and_says_identical():
    """Hand numbers: taus 1, 0.5, 0 -> mean 0.5, SE 0.5 / sqrt(3) (std 0.5); a text with no tau counts for none."""
    nan = float("nan")
    scores = [
        {"attention": {"tau_leave_one_out": 1.0, "aopc": 0.3}, "leave_one_out": {"tau_leave_one_out": 1.0}},
        {"attention": {"tau_leave_one_out": 0.5, "aopc": 0.1}, "leave_one_out": {"tau_leave_one_out": 1.0}},
        {"attention": {"tau_leave_one_out": 0.0, "aopc": 0.2}, "leave_one_out": {"tau_leave_one_out": 1.0}},
        {"attention": {"tau_leave_one_out": nan, "aopc": 0.2}, "leave_one_out": {"tau_leave_one_out": nan}},
    ]
    over = agreement_over_texts(scores)
    att = over["attention"]["tau_leave_one_out"]
    assert att["mean"] == pytest.approx(0.5) and att["sem"] == pytest.approx(0.5 / math.sqrt(3))
    assert att["texts"] == 3 and not att["identical"]
    assert over["leave_one_out"]["tau_leave_one_out"] == {"mean": 1.0, "sem": 0.0, "texts": 3, "identical": True}
    assert "tau_integrated_gradients" not in over["attention"]  # no reference there, no entry
    assert agreement_over_texts([]) == {}
