"""The explanations' registry and the decompositions against oracles: the written-out forward pass against the model's
own logits, DecompX against an explicit propagation of one vector per token (biases and positions kept as parts of
their own, written here apart), its completeness on trained models of both poolings and both norm placements, value
zeroing against zeroing the values inside the model itself, ALTI against a loop over token pairs, AttnLRP's rules,
and a method registered by a test reaching the faithfulness table and the page."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from transformer_attention.analysis import decompx
from transformer_attention.analysis.attributions import attribute
from transformer_attention.analysis.faithfulness import faithfulness
from transformer_attention.analysis.methods import (
    Explanation,
    Method,
    _forward,
    alti,
    names,
    register,
    unregister,
    value_zeroing,
)
from transformer_attention.analysis.methods._forward import Rules, halved, run
from transformer_attention.analysis.settings import check_analysis_settings, known_methods
from transformer_attention.errors import ConfigError
from transformer_attention.model.classifier import TransformerClassifier
from transformer_attention.model.config import ACTIVATIONS, POOLINGS, POSITIONALS

# every choice the model's settings offer, each with every other: a new choice is tested without a word here
CHOICES = {
    "pooling": POOLINGS,
    "positional": POSITIONALS,
    "activation": ACTIVATIONS,
    "norm_first": (False, True),
    "ngram_buckets": (0, 50),
}
SHAPES = {
    ", ".join(f"{k}={v}" for k, v in zip(CHOICES, values, strict=True)): dict(zip(CHOICES, values, strict=True))
    for values in itertools.product(*CHOICES.values())
}


def model(seed: int = 0, **settings) -> TransformerClassifier:
    torch.manual_seed(seed)
    base = {"d_model": 16, "num_heads": 4, "dim_feedforward": 32, "num_layers": 2, "max_len": 32, "ngram_max": 3}
    net = TransformerClassifier(vocab_size=40, num_classes=3, **{**base, **settings}).eval()
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(std=0.3)  # far from the initial identity-like norms: every part matters
    return net


def batch(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 40, (4, 9), generator=g)
    ids[:, 0] = 2  # [CLS]
    ids[1, 6:] = 0  # padding
    ids[2, 3:] = 0
    return ids, ids != 0


@pytest.mark.parametrize("shape", SHAPES)
def test_the_written_out_forward_is_the_model(shape: str):
    net = model(**SHAPES[shape])
    ids, mask = batch()
    with torch.no_grad():
        expected = net.double()(ids, mask).logits
    for rules in (Rules(), Rules(True, True, True, True)):  # the rules change gradients, never values
        torch.testing.assert_close(run(net, ids, mask, rules).logits.detach(), expected, rtol=0, atol=1e-10)


def test_a_row_that_sees_no_key_is_the_models_in_the_written_out_forward():
    """An all-False mask row: the model zeroes its attention, and so does the written-out pass."""
    net = model(pooling="mean")
    ids, mask = batch()
    mask[3] = False
    with torch.no_grad():
        expected = net.double()(ids, mask).logits
    torch.testing.assert_close(run(net, ids, mask).logits.detach(), expected, rtol=0, atol=1e-10)


def propagated(net: TransformerClassifier, ids: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """DecompX's propagation with biases and positions apart: a (B, T, K, D) tensor, one vector per token and per
    other part (positions, n-grams, biases: K = T + 3) in each position's representation, carried forward layer by
    layer (attention with its weights as they are, LayerNorm with the actual scale, the activation by its secant
    slope), then pooled and read by the head; everything summed over the parts is the model's own representation at
    each step."""
    with torch.no_grad():
        scale = math.sqrt(net.config.d_model)
        words, grams = net.double().embedding.parts(ids)
        words, grams = words * scale, [g * scale for g in grams]
        positions = net.pos_encoder.positions(ids.shape[1]).double().expand_as(words)
    B, T, D = words.shape
    X = torch.zeros(B, T, T + 3, D, dtype=torch.float64)
    X[:, range(T), range(T)] = words
    X[:, :, T] = positions
    X[:, :, T + 1] = sum(grams, torch.zeros_like(words))
    BIAS = T + 2
    keys = mask[:, None, None, :]

    def lin(Z, layer, bias=True):  # a linear layer, its bias added to the bias part only
        out = Z @ layer.weight.double().T
        if bias and layer.bias is not None:
            out[:, :, BIAS] += layer.bias.double()
        return out

    def ln(Z, layer):
        actual = Z.sum(dim=2, keepdim=True)
        std = (actual.var(dim=-1, unbiased=False, keepdim=True) + layer.eps).sqrt()
        out = (Z - Z.mean(dim=-1, keepdim=True)) / std * layer.weight.double()
        out[:, :, BIAS] += layer.bias.double()
        return out

    def attend(Z, mha):
        actual = Z.sum(dim=2)  # (B, T, D)
        q = mha.split_heads(actual @ mha.w_q.weight.double().T + mha.w_q.bias.double())
        k = mha.split_heads(actual @ mha.w_k.weight.double().T + mha.w_k.bias.double())
        scores = (q @ k.transpose(-2, -1) / math.sqrt(mha.d_k)).masked_fill(~keys, -1e300)
        alpha = scores.softmax(dim=-1)  # (B, H, T, T)
        V = lin(Z, mha.w_v).view(B, T, T + 3, mha.num_heads, mha.d_k)  # (B, T, K, H, Dk)
        mixed = torch.einsum("bhij,bjkhd->bikhd", alpha, V).reshape(B, T, T + 3, D)
        return lin(mixed, mha.w_o)

    def ffn(Z, layer):
        U = lin(Z, layer.linear1)
        u = U.sum(dim=2, keepdim=True)
        assert (u != 0).all()  # the secant act(u) / u of any activation
        return lin(U * layer.activation(u) / u, layer.linear2)

    for layer in net.encoder.layers:
        if layer.norm_first:
            X = X + attend(ln(X, layer.norm1), layer.self_attn)
            X = X + ffn(ln(X, layer.norm2), layer)
        else:
            X = ln(X + attend(X, layer.self_attn), layer.norm1)
            X = ln(X + ffn(X, layer), layer.norm2)
    if net.encoder.norm is not None:
        X = ln(X, net.encoder.norm)
    weights = mask.double() / mask.sum(dim=1, keepdim=True)  # (B, T): mean pooling reads each real row alike
    if net.config.pooling == "cls":
        weights = torch.zeros_like(weights).index_fill(1, torch.tensor([0]), 1.0)  # the [CLS] row alone
    logits = lin(torch.einsum("bt,btkd->bkd", weights, X)[:, None], net.head)[:, 0]  # (B, K, C)
    return {"tokens": logits[:, :T], "positions": logits[:, T], "ngrams": logits[:, T + 1], "bias": logits[:, BIAS]}


@pytest.mark.parametrize("shape", SHAPES)
def test_decompx_is_the_propagation_with_biases_apart_and_adds_up_to_the_logits(shape: str):
    net = model(**SHAPES[shape])
    ids, mask = batch()
    found = decompx(net, ids, mask)
    ref = propagated(net, ids, mask)
    torch.testing.assert_close(found.tokens, ref["tokens"], rtol=0, atol=1e-10)
    torch.testing.assert_close(found.ngrams.sum(dim=1), ref["ngrams"], rtol=0, atol=1e-10)
    torch.testing.assert_close(found.positions, ref["positions"], rtol=0, atol=1e-10)
    torch.testing.assert_close(found.bias, ref["bias"], rtol=0, atol=1e-10)
    with torch.no_grad():
        logits = net.double()(ids, mask).logits
    torch.testing.assert_close(found.tokens.sum(dim=1) + found.rest, logits, rtol=0, atol=1e-6)
    assert found.tokens[~mask].abs().max() == 0  # padding adds nothing
    assert (found.ngrams.abs().sum() > 0) == (SHAPES[shape]["ngram_buckets"] > 0)


def trained(seed: int, **settings) -> TransformerClassifier:
    """A model trained for 30 steps on a rule (class = whether token 5 appears), with dropout on while it trains."""
    torch.manual_seed(seed)
    sizes = {"d_model": 16, "num_heads": 2, "dim_feedforward": 32, "max_len": 16, "dropout": 0.1}
    net = TransformerClassifier(vocab_size=20, num_classes=2, **sizes, **settings)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(30):
        ids = torch.randint(3, 20, (32, 10))
        ids[:, 0] = 2
        labels = (ids == 5).any(dim=1).long()
        loss = F.cross_entropy(net(ids).logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return net.eval()


@pytest.mark.parametrize("pooling", ["cls", "mean"])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("layers", [1, 3])
def test_decompx_is_complete_on_trained_models(pooling: str, norm_first: bool, layers: int):
    net = trained(layers, pooling=pooling, norm_first=norm_first, num_layers=layers)
    ids, mask = batch(seed=layers)
    ids = ids.clamp(max=19)
    found = decompx(net, ids, mask)
    with torch.no_grad():
        logits = net.double()(ids, mask).logits
    torch.testing.assert_close(found.tokens.sum(dim=1) + found.rest, logits, rtol=0, atol=1e-6)
    assert net.training is False and all(not m.training for m in net.modules())  # modes left as they were


def test_decompx_gives_an_ngram_an_equal_share_to_its_words():
    net = model(ngram_buckets=50, ngram_max=3, pooling="mean")
    ids, mask = batch()
    (batch_scores,) = [attribute(net, [ids[0].tolist()], [1], mask_id=None, methods=["decompx"])[0][0]["decompx"]]
    found = decompx(net, ids[:1], mask[:1])
    assert batch_scores.sum() == pytest.approx(float(found.tokens[0, :, 1].sum() + found.ngrams[0, :, 1].sum()))
    assert not np.allclose(batch_scores, found.tokens[0, :, 1].numpy())  # the n-grams are shared out


def test_value_zeroing_is_zeroing_the_values_inside_the_model():
    """Each (i, j) of value_zeroing's first-layer map, unscaled: 1 - cos between the layer's output at i and its
    output with token j's value vector set to zero by a hook on the model's own w_v."""
    net = model(num_layers=1).double()
    ids, mask = batch()
    ids, mask = ids[1:2, :6], mask[1:2, :6]
    layer = net.encoder.layers[0]
    with torch.no_grad():
        x = _forward.run(net, ids, mask).layers[0].x
        y, _ = layer(x, mask=mask)
        expected = torch.zeros(6, 6, dtype=torch.float64)
        for j in range(6):
            zero_j = lambda m, a, out, j=j: out.index_fill(1, torch.tensor([j]), 0)  # noqa: E731
            hook = layer.self_attn.w_v.register_forward_hook(zero_j)
            zeroed, _ = layer(x, mask=mask)
            hook.remove()
            expected[:, j] = 1 - F.cosine_similarity(zeroed[0], y[0], dim=-1)
        found = value_zeroing.layer_map(_forward.run(net, ids, mask).layers[0], layer, mask)
    expected = expected.clamp(min=0)
    torch.testing.assert_close(found[0], expected / expected.sum(dim=-1, keepdim=True), rtol=0, atol=1e-10)


@torch.no_grad()
def test_alti_is_the_loop_over_token_pairs():
    net = model(num_layers=1)
    ids, mask = batch()
    ids, mask = ids[:1, :5], mask[:1, :5]
    layer, mha = net.encoder.layers[0], net.encoder.layers[0].self_attn
    trace = _forward.run(net, ids, mask)
    x, alpha = trace.layers[0].x[0], trace.layers[0].weights[0]  # (T, D), (H, T, T)
    w_v, w_o = mha.w_v.weight.double(), mha.w_o.weight.double()
    mixed = torch.einsum("hij,jhd->ihd", alpha, (x @ w_v.T).view(5, 4, 4)).reshape(5, 16)
    actual = x + F.linear(mixed, w_o, mha.w_o.bias.double()) + (w_o @ mha.w_v.bias.double())
    expected = torch.zeros(5, 5, dtype=torch.float64)
    for i in range(5):
        std = (actual[i].var(unbiased=False) + layer.norm1.eps).sqrt()
        parts = []
        for j in range(5):
            moved = sum(alpha[h, i, j] * w_o[:, 4 * h : 4 * h + 4] @ (w_v[4 * h : 4 * h + 4] @ x[j]) for h in range(4))
            t = moved + (x[j] if i == j else 0)
            parts.append((t - t.mean()) / std * layer.norm1.weight.double())
        y = sum(parts)
        for j in range(5):
            expected[i, j] = max(0.0, float(y.abs().sum() - (y - parts[j]).abs().sum()))
    found = alti.layer_map(trace.layers[0], layer, mask)[0].detach()
    torch.testing.assert_close(found, expected / expected.sum(dim=-1, keepdim=True), rtol=0, atol=1e-10)


def test_attnlrps_rules_change_gradients_not_values():
    x = torch.randn(5, requires_grad=True)
    (grad,) = torch.autograd.grad(halved(x * 3).sum(), x)
    assert torch.equal(halved(x * 3), x * 3) and torch.allclose(grad, torch.full((5,), 1.5))
    u = torch.randn(50, dtype=torch.float64, requires_grad=True)
    for act in (F.relu, F.gelu):
        held = _forward.activation(u, act, Rules(secant=True))
        torch.testing.assert_close(held, act(u))
        (slope,) = torch.autograd.grad(held.sum(), u)
        torch.testing.assert_close(slope, (act(u) / u).detach())  # the secant: linear in u


def test_gradient_x_input_through_the_written_out_forward_is_captums():
    """With no rule on, gradient x embedding of the written-out pass is captum's gradient x input: the engine
    AttnLRP changes only by its rules."""
    net = model(ngram_buckets=50, pooling="mean")
    ids, mask = batch()
    target = torch.tensor([0, 1, 2, 0])
    with torch.enable_grad():
        trace = run(net, ids, mask)
        (grad,) = torch.autograd.grad(trace.logits.gather(1, target[:, None]).sum(), trace.x0)
    ours = (grad * (trace.words + sum(trace.ngrams))).sum(-1)
    rows = [ids[b, : int(mask[b].sum())].tolist() for b in range(4)]
    found, _ = attribute(net, rows, target.tolist(), mask_id=None, methods=["grad_x_input"])
    for b, row in enumerate(found):
        np.testing.assert_allclose(row["grad_x_input"], ours[b, : len(rows[b])].detach().numpy(), atol=1e-5)


def test_a_registered_method_reaches_the_table_the_settings_and_the_page(tmp_path):
    from transformer_attention.plotting import attention_html
    from transformer_attention.plotting.html import read_attention_data

    def first_word(net, ids, mask, target, options) -> Explanation:
        scores = torch.zeros(ids.shape, dtype=torch.float64)
        scores[:, 1] = 1.0
        return Explanation(scores)

    register(Method("first_word", "the first word", signed=False, explain=first_word))
    try:
        assert "first_word" in names() and "first_word" in known_methods()
        check_analysis_settings({"methods": ["first_word", "decompx"]})
        net = model()
        ids, mask = batch()
        rows = [ids[b, : int(mask[b].sum())].tolist() for b in range(4)]
        report = faithfulness(net, rows, tokens=[[str(t) for t in r] for r in rows], split="test", mask_id=None,
                              k=[50], methods=["first_word", "random"])  # fmt: skip
        assert "| first_word |" in "\n".join(report.table()) and report.scores["first_word"]["seconds_per_text"] >= 0
        found, _ = attribute(net, rows[:1], [0], mask_id=None, methods=["first_word"])
        page = attention_html([str(t) for t in rows[0]], [torch.rand(4, len(rows[0]), len(rows[0]))],
                              attributions={"first_word": found[0]["first_word"]},
                              method_labels={"first_word": "the first word"})  # fmt: skip
        data = read_attention_data(page)
        assert data["attributions"]["first_word"][1] == 1.0 and data["names"]["methods"]["first_word"]
    finally:
        unregister("first_word")
    with pytest.raises(ConfigError, match="'first_word' is not an explanation method"):
        check_analysis_settings({"methods": ["first_word"]})


def test_every_method_file_is_named_as_its_method():
    """The settings check reads the methods' names from their files without importing torch: they must agree."""
    assert set(names()) == set(known_methods())
    with pytest.raises(ConfigError, match="did you mean decompx"):
        check_analysis_settings({"methods": ["decompz"]})


def test_the_page_text_tab_opens_on_the_signed_decomposition():
    """A page given every method's scores opens its text tab on TEXT_METHOD, signed; an unsigned method's series
    says so (the page then shades it by size, not as for / against)."""
    from transformer_attention.analysis.methods import TEXT_METHOD, labels, signed
    from transformer_attention.plotting import attention_html
    from transformer_attention.plotting.html import read_attention_data

    net = model()
    ids, mask = batch()
    row = ids[0].tolist()
    found, _ = attribute(net, [row], [1], mask_id=None)
    page = attention_html([f"w{t}" for t in row], [torch.rand(4, len(row), len(row))], attributions=found[0],
                          method_labels=labels(), method_signed=signed(), text_method=TEXT_METHOD)  # fmt: skip
    text = read_attention_data(page)["text"]
    assert text["default"] == f"method-{TEXT_METHOD}" == "method-decompx"
    by_id = {s["id"]: s for s in text["series"]}
    assert by_id["method-decompx"]["signed"] and not by_id["method-attention"]["signed"]
    assert min(by_id["method-decompx"]["values"]) < 0 < max(by_id["method-decompx"]["values"])
    plain = attention_html([f"w{t}" for t in row], [torch.rand(4, len(row), len(row))])
    assert read_attention_data(plain)["text"]["default"] == "layer-0"  # no attributions: the last layer's mean


def test_the_tensorboard_text_view_opens_on_the_signed_decomposition():
    """The text image's first paragraph is DecompX of the predicted class: blue words add to it, orange ones take
    from it, as `decompx` says; the attention paragraphs follow; null leaves attention alone."""
    from transformer_attention.callbacks.text_view import check_text_method, text_rows
    from transformer_attention.plotting.text import AGAINST, FOR, ReviewText

    net = model(num_layers=1, pooling="mean")
    ids, mask = batch()
    row = ids[0].tolist()
    with torch.no_grad():
        layers = [a[0].numpy() for a in net(ids[:1], mask[:1], need_weights=True).attentions]
    shares = np.full(len(row), 1 / len(row))
    rows, labels, scored = text_rows(net, row, layers, pooling="mean", heads=0, shares=shares, method="decompx",
                                     predicted=1, class_name="positive")  # fmt: skip
    assert scored == 1 and labels[0] == "DecompX: blue for positive, orange against" and labels[1].startswith("layer 0")
    contributions = decompx(net, ids[:1], mask[:1]).tokens[0, :, 1].numpy()
    tokens = [f"w{t}" for t in row]  # one piece a word
    view = ReviewText(tokens, len(rows), "t", pooling="mean", signed=scored)
    _, values = view.word_colours(rows)
    assert np.array_equal(np.sign(values[0]), np.sign(contributions)) and np.abs(values[0]).max() == 1.0
    pixels = view.render(rows, labels)
    assert pixels.shape[1] == 350  # TensorBoard's card: shown at its own size
    from transformer_attention.plotting.text import signed_colours

    strongest = signed_colours(np.array([1.0, -1.0]))
    assert np.array_equal(strongest, np.stack([FOR, AGAINST]).astype(np.uint8))
    plain, plain_labels, none = text_rows(net, row, layers, pooling="mean", heads=0, shares=shares, method=None,
                                          predicted=1, class_name="positive")  # fmt: skip
    assert none == 0 and plain_labels == labels[1:] and np.array_equal(plain, rows[1:])
    with pytest.raises(ValueError, match="text_method='decompz' is not an explanation method"):
        check_text_method("decompz")


def test_a_model_on_a_device_without_float64_is_explained_on_a_cpu_copy(monkeypatch: pytest.MonkeyPatch):
    """MPS has no float64: a model there (a mocked device) is explained on a copy on the CPU, with the scores the
    CPU gives, and the model itself is left where it is."""
    from transformer_attention.analysis import attributions

    net = model(num_layers=1)
    ids, mask = batch()
    rows = [ids[b, : int(mask[b].sum())].tolist() for b in range(4)]
    expected, _ = attribute(net, rows, [0, 1, 2, 0], mask_id=None, methods=["decompx", "alti"])
    seen = []

    def probe(explained, ids, mask, target, options):
        seen.append(explained)
        return Explanation(torch.zeros(ids.shape, dtype=torch.float64))

    register(Method("probe", "probe", signed=False, explain=probe))
    monkeypatch.setattr(attributions, "device_of", lambda n: torch.device("mps" if n is net else "cpu"))
    try:
        found, _ = attribute(net, rows, [0, 1, 2, 0], mask_id=None, methods=["decompx", "alti", "probe"])
    finally:
        unregister("probe")
    assert seen and all(n is not net and next(n.parameters()).device.type == "cpu" for n in seen)
    for got, want in zip(found, expected, strict=True):
        for method in ("decompx", "alti"):
            np.testing.assert_allclose(got[method], want[method], rtol=0, atol=1e-12)
