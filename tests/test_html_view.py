"""The offline attention view (plotting/html.py): nothing loaded from the network, the inlined data equal to the
model's attention, tokens kept as text, the text tab's words and pooled rows, the names shared with Python, the
ES modules joined in order, `predict.py save_attention=html`, and the page itself in a real headless Chromium
(driven over the DevTools protocol on a pipe, no dependency): hover a query or a key, check the lines, each
head's own blocks and the readout; open a head from the model view; the text tab and the colour scales; a
60-word and a 500-token IMDB review fit the page (no sideways scroll, cells of 3 px or more, the readout in
view)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from chromium import Chromium, find_chromium
from conftest import ROOT, SHARED_DATA, entry_env
from omegaconf import OmegaConf
from test_checkpoint import save_like_lightning, tiny_module

from transformer_attention.analysis.methods import default_names as method_names  # null: all but the costly
from transformer_attention.analysis.methods import descriptions, labels
from transformer_attention.analysis.run import explain_rows
from transformer_attention.data import load_tokenizer
from transformer_attention.data.tokenizer import train_tokenizer
from transformer_attention.errors import ConfigError
from transformer_attention.inference import Prediction, predict
from transformer_attention.module import ClassifierModule
from transformer_attention.plotting import POOLED_ROW, attention_rollout, join_pieces
from transformer_attention.plotting import html as html_module
from transformer_attention.plotting.html import (
    MIN_WEIGHT,
    MODULES,
    attention_html,
    read_attention_data,
    save_attention_html,
)
from transformer_attention.plotting.pack import unpacked
from transformer_attention.plotting.scales import DEFAULT_SCALE, SCALES
from transformer_attention.tasks.predict import attention_formats, main
from transformer_attention.training.checkpoint import load_module

TEXT = "the acting was not bad at all"
SVG_NS = "http://www.w3.org/2000/svg"  # the one URL-like string allowed: a namespace name, never fetched
HOSTILE = ["[CLS]", "<script>alert(1)</script>", "a&b", "</script><script>x()", "//cdn.example.com/x.js", "<!--"]


@pytest.fixture(scope="module")
def prediction() -> Prediction:
    (pred,) = predict(tiny_module(), [TEXT], need_weights=True)  # 2 layers, 2 heads
    return pred


class Scripts(HTMLParser):
    """The text of each <script> element and its attributes, as a browser's tokenizer splits them."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.scripts: list[tuple[dict, str]] = []
        self._attrs: dict | None = None
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        if tag == "script":
            self._attrs = dict(attrs)
            self.scripts.append((self._attrs, ""))

    def handle_data(self, data):
        if self._attrs is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def handle_endtag(self, tag):
        if tag == "script":
            self._attrs = None


def inlined_data(page: str, raw: bool = False) -> dict:
    """The JSON of the page's data element, found the way a browser finds it (not with the module's helper), its
    maps unpacked (pack.py) unless `raw`."""
    (data,) = [text for attrs, text in Scripts(page).scripts if attrs.get("id") == "attention-data"]
    return json.loads(data) if raw else unpacked(json.loads(data))


# ---- the file ---------------------------------------------------------------------------------------
def test_the_page_loads_nothing_from_the_network(prediction):
    page = attention_html(HOSTILE, [torch.rand(2, 6, 6).softmax(-1)], title="see http://example.com//x", caption="//")
    page += attention_html(prediction.tokens, prediction.attentions)
    rest = page.replace(SVG_NS, "")
    assert "//" not in rest, "a URL (or protocol-relative //) in the page"
    assert not re.search(r"\b(src|href)\s*=|<link\b|@import|\burl\(", rest, flags=re.IGNORECASE)  # nothing to fetch
    assert [bool(attrs.get("src")) for attrs, _ in Scripts(page).scripts] == [False] * 4  # 2 pages x 2 inline


def test_the_inlined_data_is_the_models_attention_for_every_layer_and_head(prediction):
    page = attention_html(prediction.tokens, prediction.attentions)
    data = inlined_data(page)
    assert json.loads(json.dumps(inlined_data(page, raw=True))) == read_attention_data(page, raw=True)
    np.testing.assert_array_equal(data["layers"], read_attention_data(page)["layers"])
    assert data["tokens"] == prediction.tokens
    assert len(data["layers"]) == len(prediction.attentions) == 2
    for layer, weights in zip(data["layers"], prediction.attentions, strict=True):
        assert len(layer) == weights.shape[0] == 2
        for h, head in enumerate(layer):
            np.testing.assert_allclose(np.array(head), weights[h].numpy(), atol=1e-4, rtol=0)
    np.testing.assert_allclose(np.array(data["rollout"]), attention_rollout(prediction.attentions), atol=1e-4)
    assert inlined_data(attention_html(prediction.tokens, prediction.attentions, rollout=False))["rollout"] is None


def test_tokens_title_and_caption_stay_text():
    weights = torch.rand(2, len(HOSTILE), len(HOSTILE)).softmax(-1)
    page = attention_html(HOSTILE, [weights], title="<script>alert('t')</script>", caption="<b>&</b>")
    assert page.lower().count("<script") == 2 and page.lower().count("</script") == 2  # only the page's own
    assert [attrs for attrs, _ in Scripts(page).scripts] == [{"type": "application/json", "id": "attention-data"}, {}]
    assert inlined_data(page)["tokens"] == HOSTILE  # JSON.parse gives the text back as it was
    assert "&lt;script&gt;alert(&#x27;t&#x27;)&lt;&#x2F;script&gt;" in page and "&lt;b&gt;&amp;&lt;&#x2F;b&gt;" in page
    assert "<b>" not in page


def test_long_texts_are_cut_and_bad_shapes_named():
    tokens = [f"t{i}" for i in range(10)]
    weights = torch.rand(3, 10, 10).softmax(-1)
    data = inlined_data(attention_html(tokens, [weights, weights], max_tokens=4))
    assert data["tokens"] == tokens[:4] and data["note"] == "first 4 of 10 tokens"
    np.testing.assert_allclose(np.array(data["layers"][1]), weights[:, :4, :4].numpy(), atol=1e-4)
    np.testing.assert_allclose(np.array(data["rollout"]), attention_rollout([weights, weights])[:4, :4], atol=1e-4)
    with pytest.raises(ValueError, match=r"9 tokens for a 10 x 10"):
        attention_html(tokens[:9], [weights])
    with pytest.raises(ValueError, match=r"layer 1 has 2 heads, layer 0 has 3"):
        attention_html(tokens, [weights, weights[:2]])
    with pytest.raises(ValueError, match=r"layer 0: attention of shape \(10, 10\)"):
        attention_html(tokens, [weights[0]])


# ---- predict.py save_attention=... ----------------------------------------------------------------
def test_attention_formats():
    assert attention_formats(False) == attention_formats(None) == ()
    assert attention_formats(True) == attention_formats("png") == ("png",)
    assert attention_formats("HTML") == ("html",) and attention_formats("both") == ("png", "html")
    for bad in ("svg", 1, "yes"):
        with pytest.raises(ConfigError, match=rf"save_attention={bad!r} is not a choice: use false, true"):
            attention_formats(bad)


@pytest.mark.parametrize("choice, pooling", [("html", "cls"), ("both", "mean")])
def test_predict_writes_one_page_per_text(tmp_path: Path, choice: str, pooling: str):
    tiny = tiny_module()
    module = ClassifierModule(**{**tiny.hparams, "tokenizer": tiny.tokenizer_json, "pooling": pooling})
    ckpt = save_like_lightning(module, tmp_path / "model.ckpt")
    texts = [TEXT, "a dull film"]
    cfg = OmegaConf.create(
        {"ckpt_path": str(ckpt), "texts": texts, "save_attention": choice, "batch_size": 8, "paths": {}}
    )
    cfg.paths.output_dir = str(tmp_path / "run")
    preds = main(cfg)
    records = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    pages = []
    for i, (record, pred) in enumerate(zip(records, preds, strict=True)):
        page = Path(record["attention_html"])
        assert page == tmp_path / "run" / "attention" / f"{i:04d}.html"
        data = inlined_data(page.read_text(encoding="utf-8"))
        assert data["tokens"] == pred.tokens
        np.testing.assert_allclose(np.array(data["layers"][1]), pred.attentions[1].numpy(), atol=1e-4)
        (again,) = predict(module, [texts[i]], need_norms=True)  # the "weight x norm" maps: the model's, as shares
        shares = [n / n.sum(-1, keepdim=True) for n in again.attentions]
        np.testing.assert_allclose(np.array(data["kinds"]["norm"]["layers"][1]), shares[1].numpy(), atol=1e-4)
        assert ("attention_png" in record) == (choice == "both")
        # the word attributions view: every method's value per token, and its faithfulness on this text
        assert list(data["attributions"]) == list(method_names())
        assert all(len(values) == len(pred.tokens) for values in data["attributions"].values())
        assert set(data["faithfulness"]) == set(method_names())
        assert set(data["faithfulness"]["rollout"]) == {
            "comprehensiveness", "sufficiency", "aopc", "naopc", "tau_leave_one_out", "tau_integrated_gradients"
        }  # fmt: skip
        assert "replaced by [MASK]" in data["faithfulness_note"]
        assert data["faithfulness_note"].startswith(f"for the class {pred.label};")  # analysis.target: predicted
        assert data["text"]["pooling"] == pooling and data["names"]["methods"] == labels()  # the model's pooled row
        pages.append(data)
    for method in method_names():  # every page: each method's tau over both texts, mean +- SE, beside this text's
        for key in ("tau_leave_one_out", "tau_integrated_gradients"):
            taus = [p["faithfulness"][method][key] for p in pages]
            assert pages[0]["agreement"] == pages[1]["agreement"]
            over = pages[0]["agreement"][method][key]
            assert over["texts"] == 2 and over["mean"] == pytest.approx(np.mean(taus), abs=1e-5)
            assert over["sem"] == pytest.approx(np.std(taus, ddof=1) / np.sqrt(2), abs=1e-5)
            assert over["identical"] == (min(taus) > 1 - 1e-9)
    assert pages[0]["agreement"]["leave_one_out"]["tau_leave_one_out"]["identical"]  # itself: the same ranking
    module = load_module(ckpt)
    tok = load_tokenizer(module.tokenizer_json)
    rows = [[tok.token_to_id(t) for t in p.tokens] for p in preds]
    explained, _ = explain_rows(module.net, rows, tok, {})
    data = inlined_data(Path(records[1]["attention_html"]).read_text(encoding="utf-8"))
    np.testing.assert_allclose(
        data["attributions"]["leave_one_out"], explained[1].attributions["leave_one_out"], rtol=1e-3
    )
    np.testing.assert_allclose(data["attributions"]["attention"], explained[1].attributions["attention"], rtol=1e-3)
    assert data["faithfulness"]["attention"]["aopc"] == pytest.approx(
        explained[1].scores["attention"]["aopc"], abs=1e-5
    )


def test_predict_entry_rejects_an_unknown_choice_in_one_line(tmp_path: Path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "predict.py"), "ckpt_path=none.ckpt", "text=hi", "save_attention=svg"],
        cwd=tmp_path,
        env=entry_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1].startswith("config error: save_attention='svg' is not a choice")
    assert "Traceback" not in proc.stderr


# ---- in a real browser ------------------------------------------------------------------------------
@pytest.fixture
def browser(tmp_path: Path):
    exe = find_chromium()
    if exe is None:
        pytest.skip(
            "no Chromium or Chrome on PATH (the test drives the DevTools protocol; Firefox alone is not "
            "enough): apt-get install chromium"
        )
    chrome = Chromium(exe, tmp_path / "profile")
    yield chrome
    chrome.close()


def expected_lines(rows: dict[str, torch.Tensor | np.ndarray], query: int) -> dict[tuple[str, int], float]:
    """What the page must draw for `query`: one line per series and key of weight >= MIN_WEIGHT."""
    out = {}
    for series, weights in rows.items():
        for key, w in enumerate(np.asarray(weights)[query].tolist()):
            if w >= MIN_WEIGHT:
                out[(series, key)] = w
    return out


def assert_drawn(drawn: list[dict], expected: dict[tuple[str, int], float], index: int, side: str = "query") -> None:
    """`drawn` are the lines of `expected` (series, other end) -> weight, all at `index` on `side`."""
    other = "key" if side == "query" else "query"
    assert {line[side] for line in drawn} == {index}
    got = {(line["series"], line[other]): line for line in drawn}
    near_threshold = {k for k, w in expected.items() if abs(w - MIN_WEIGHT) < 1e-4}
    assert set(got) - near_threshold == set(expected) - near_threshold
    for k, w in expected.items():
        if k in got:
            assert got[k]["weight"] == pytest.approx(w, abs=1e-4)
            assert got[k]["width"] == pytest.approx(6 * w, abs=1e-3)  # thickness = weight (MAX_WIDTH 6 px)


@pytest.mark.slow
def test_the_page_draws_the_hovered_tokens_row_in_a_browser(browser, prediction, tmp_path: Path):
    tokens, attentions = prediction.tokens, prediction.attentions
    page = save_attention_html(tmp_path / "view.html", tokens, attentions, title="<script>x</script>", scale="fixed")
    browser.open(page.as_uri() + "#layer=1&heads=1")  # the hash picks layer 1, head 1 alone

    assert browser.js("document.scripts.length") == 2
    assert browser.js("document.querySelector('h1').textContent") == "<script>x</script>"
    left = browser.js("Array.prototype.map.call(document.querySelectorAll('g.token.left'), e => e.textContent)")
    assert left == tokens

    query = tokens.index("not")
    browser.move_to(f"g.token.left[data-index='{query}'] rect")
    assert_drawn(browser.lines(), expected_lines({"head-1": attentions[1][1]}, query), query)

    browser.click("#head-0")  # a real click on head 0's toggle: both heads now, each its own colour
    browser.move_to(f"g.token.left[data-index='{query - 1}'] rect")
    rows = {"head-0": attentions[1][0], "head-1": attentions[1][1]}
    assert_drawn(browser.lines(), expected_lines(rows, query - 1), query - 1)
    colours = browser.js(
        "new Set(Array.from(document.querySelectorAll('#lines line'), l => l.getAttribute('stroke'))).size"
    )
    assert colours == 2

    browser.click("#head-mean")
    browser.move_to(f"g.token.left[data-index='{query - 1}'] rect")
    rows["mean"] = attentions[1].mean(dim=0)
    assert_drawn(browser.lines(), expected_lines(rows, query - 1), query - 1)

    browser.js("location.hash = 'layer=rollout'")  # the rollout: one series, over all layers
    browser.wait_for("document.getElementById('layer').value === 'rollout'")
    browser.move_to("g.token.left[data-index='0'] rect")
    assert_drawn(browser.lines(), expected_lines({"rollout": attention_rollout(attentions)}, 0), 0)


RAMP = [(0.0, (255, 255, 255)), (0.5, (107, 174, 214)), (1.0, (8, 48, 107))]  # page/scale.js's colour ramp
SWATCH = "getComputedStyle(document.querySelector('#label-{} .swatch')).backgroundColor"


def shared_key_attention() -> tuple[list[str], list[torch.Tensor]]:
    """2 layers x 4 heads over 6 tokens: heads 0, 1, 2 put 0.7, 0.55, 0.4 of every row on key 2, head 3 spreads."""
    torch.manual_seed(0)
    share = torch.tensor([0.7, 0.55, 0.4, 0.0]).view(1, 4, 1, 1)
    weights = (1 - share) * torch.rand(2, 4, 6, 6).softmax(-1) + share * torch.eye(6)[2]  # rows still sum to 1
    return ["[CLS]", "the", "plot", "<b>is</b>", "not", "clever"], list(weights)


def top(tokens: list[str], row: np.ndarray) -> str:
    """The readout's list: the five largest weights of `row` to 3 significant digits, ties in text order."""
    return ", ".join(f"{tokens[k]} {row[k]:#.3g}" for k in sorted(range(len(row)), key=lambda k: (-row[k], k))[:5])


def assert_beside_tokens(browser: Chromium, blocks: list[dict], side: str) -> None:
    """Each block lies in its token's row on `side` (query: left, key: right), between the token and the lines,
    and no two blocks overlap."""
    column = "left" if side == "query" else "right"
    rows = browser.js(
        f"Array.from(document.querySelectorAll('g.token.{column} rect.hit'), function (e) {{ var r = "
        "e.getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })"
    )
    for b in blocks:
        x, y, w, h = rows[b[side]]
        bx, by, bw, bh = b["box"]
        assert bw >= 8 and bh >= 12 and y <= by + bh / 2 <= y + h
        assert bx >= x + w if side == "query" else bx + bw <= x
    boxes = [b["box"] for b in blocks]
    for i, (x1, y1, w1, h1) in enumerate(boxes):
        for x2, y2, w2, h2 in boxes[i + 1 :]:
            assert x1 + w1 <= x2 or x2 + w2 <= x1 or y1 + h1 <= y2 or y2 + h2 <= y1, "two blocks overlap"


@pytest.mark.slow
def test_every_selected_head_stays_visible_in_a_browser(browser, tmp_path: Path):
    tokens, attentions = shared_key_attention()
    page = save_attention_html(tmp_path / "view.html", tokens, attentions, scale="fixed")
    layer = np.array(read_attention_data(page.read_text(encoding="utf-8"))["layers"][0])  # (H, T, T), as inlined
    heads = {f"head-{h}": layer[h] for h in range(4)}
    browser.open(page.as_uri() + "#layer=0")  # all four heads: the default
    legend = {s: browser.js(SWATCH.format(s)) for s in heads}
    assert len(set(legend.values())) == 4

    query, key = 3, 2  # heads 0, 1, 2 all put most of the row on key 2
    browser.move_to(f"g.token.left[data-index='{query}'] rect")
    lines = browser.lines()
    assert_drawn(lines, expected_lines(heads, query), query)
    assert {line["stroke"] for line in lines} == set(legend.values())  # opaque lines: no colour outside the legend
    assert all(line["opacity"][:2] == [1, 1] and line["blend"] == "normal" for line in lines)
    assert [line["width"] for line in lines] == sorted((line["width"] for line in lines), reverse=True)  # thin on top

    blocks = browser.lines("#blocks rect")  # one block per head and key, beside the keys
    assert sorted((b["series"], b["key"]) for b in blocks) == [(s, k) for s in heads for k in range(6)]
    assert {b["query"] for b in blocks} == {query}
    for b in blocks:
        assert b["weight"] == pytest.approx(heads[b["series"]][query, b["key"]], abs=1e-7)  # the page's float32
        assert b["opacity"] == pytest.approx([1, 1, b["weight"]], abs=1e-4)  # fill opacity = weight
        assert b["fill"] == legend[b["series"]]
    assert_beside_tokens(browser, blocks, "key")
    on_key = [b for b in blocks if b["key"] == key]
    assert [b["series"] for b in on_key] == list(heads)
    assert all(b["weight"] > share for b, share in zip(on_key, [0.7, 0.55, 0.4, 0.0], strict=True))  # all large
    on_top = browser.js(  # every mark hit-testable for the check (lines ignore the mouse): what is painted on top?
        "(function () { var s = document.createElement('style'); s.textContent = '#view * { pointer-events: all "
        f"!important; }}'; document.head.appendChild(s); var out = Array.from(document.querySelectorAll('#blocks "
        f'rect[data-key="{key}"]\'), function (b) {{ var r = b.getBoundingClientRect(); return document.'
        "elementFromPoint(r.x + r.width / 2, r.y + r.height / 2) === b; }); s.remove(); return out; })()"
    )
    assert on_top == [True] * 4  # nothing drawn over any head's block

    readout = "Array.from(document.querySelectorAll('#readout .readline'), e => [e.dataset.series, e.textContent])"
    assert (
        browser.js("document.querySelector('#readout .readtitle').textContent")
        == "\u201c<b>is</b>\u201d (query) reads most:"
    )
    assert browser.js(readout) == [[s, f"{s.replace('-', ' ')}: {top(tokens, w[query])}"] for s, w in heads.items()]

    browser.click("#head-1")  # head 1 off, the mean on: both follow in lines, blocks and readout
    browser.click("#head-mean")
    browser.move_to(f"g.token.left[data-index='{query}'] rect")
    del heads["head-1"]
    heads["mean"] = layer.mean(axis=0)
    assert_drawn(browser.lines(), expected_lines(heads, query), query)
    assert {b["series"] for b in browser.lines("#blocks rect")} == set(heads)
    assert browser.js(readout) == [[s, f"{s.replace('-', ' ')}: {top(tokens, w[query])}"] for s, w in heads.items()]

    browser.move_to(f"g.token.right[data-index='{key}'] rect")  # a key: who reads it, from every query
    columns = {s: w.T for s, w in heads.items()}  # columns[s][key] = the weights every query gives to key
    assert_drawn(browser.lines(), expected_lines(columns, key), key, side="key")
    blocks = browser.lines("#blocks rect")
    assert sorted((b["series"], b["query"]) for b in blocks) == sorted((s, q) for s in heads for q in range(6))
    assert all(b["key"] == key and b["weight"] == pytest.approx(heads[b["series"]][b["query"], key]) for b in blocks)
    assert_beside_tokens(browser, blocks, "query")
    assert (
        browser.js("document.querySelector('#readout .readtitle').textContent")
        == "\u201cplot\u201d (key) is read most by:"
    )
    assert browser.js(readout) == [[s, f"{s.replace('-', ' ')}: {top(tokens, w[key])}"] for s, w in columns.items()]


def ramp(weights: np.ndarray) -> np.ndarray:
    """The colour (R, G, B) of each weight on the page's scale."""
    stops, colours = [s for s, _ in RAMP], np.array([c for _, c in RAMP], dtype=float)
    return np.stack([np.interp(weights, stops, colours[:, c]) for c in range(3)], axis=-1)


@pytest.mark.slow
def test_the_model_view_shows_every_head_and_opens_the_one_clicked(browser, tmp_path: Path):
    tokens, attentions = shared_key_attention()
    page = save_attention_html(tmp_path / "view.html", tokens, attentions, scale="fixed")
    data = read_attention_data(page.read_text(encoding="utf-8"))
    browser.open(page.as_uri() + "#layer=0&token=3")
    shown = "[document.getElementById('head-view').hidden, document.getElementById('model-view').hidden]"
    assert browser.js(shown) == [False, True]
    browser.click("#mode-model")
    assert browser.js(shown) == [True, False]

    maps = {(str(i), str(h)): np.array(data["layers"][i][h]) for i in range(2) for h in range(4)}
    maps["rollout", "rollout"] = np.array(data["rollout"])
    cells = browser.js("Array.from(document.querySelectorAll('canvas.map'), c => [c.dataset.layer, c.dataset.head])")
    assert [tuple(c) for c in cells] == list(maps)
    for (layer, head), weights in maps.items():  # every cell: each (query, key) square on the one 0-1 scale
        pixels = browser.js(
            f'(function () {{ var c = document.querySelector(\'canvas.map[data-layer="{layer}"][data-head="{head}"]\''
            "), n = c.width / 6, g = c.getContext('2d'), out = [], q, k; for (q = 0; q < 6; q++) { for (k = 0; k < 6; "
            "k++) { out.push(Array.from(g.getImageData(Math.floor((k + 0.5) * n), Math.floor((q + 0.5) * n), 1, 1)"
            ".data).slice(0, 3)); } } return out; })()"
        )
        np.testing.assert_allclose(np.array(pixels).reshape(6, 6, 3), ramp(weights), atol=1.01)

    browser.click("canvas.map[data-layer='1'][data-head='2']")  # opens layer 1 with head 2 alone
    assert browser.js(shown) == [False, True]
    assert browser.js("document.getElementById('layer').value") == "1"
    checked = browser.js("Array.from(document.querySelectorAll('#heads input'), b => b.checked ? b.id : '')")
    assert [c for c in checked if c] == ["head-2"]
    browser.move_to("g.token.left[data-index='4'] rect")
    assert_drawn(browser.lines(), expected_lines({"head-2": maps["1", "2"]}, 4), 4)
    assert {b["series"] for b in browser.lines("#blocks rect")} == {"head-2"}
    assert browser.js("Array.from(document.querySelectorAll('#readout .readline'), e => e.dataset.series)") == [
        "head-2"
    ]

    browser.js("location.hash = 'view=model'")  # the hash opens the model view too; its rollout cell the rollout
    browser.wait_for("!document.getElementById('model-view').hidden")
    browser.click("canvas.map[data-layer='rollout']")
    assert browser.js("document.getElementById('layer').value") == "rollout"
    browser.move_to("g.token.left[data-index='0'] rect")
    assert_drawn(browser.lines(), expected_lines({"rollout": maps["rollout", "rollout"]}, 0), 0)


@pytest.mark.slow
def test_the_word_attributions_view_colours_each_word_by_the_method_picked(browser, tmp_path: Path):
    tokens = ["[CLS]", "not", "<b>bad</b>", "at", "all"]
    attentions = [torch.rand(2, 5, 5).softmax(-1)]
    attributions = {
        "attention": [0.2, 0.1, 0.4, 0.05, 0.25],
        "integrated_gradients": [0.0, 1.5, -3.0, 0.3, 0.0],
        "leave_one_out": [0.0, 0.02, 0.5, -0.01, 0.0],
    }
    scores = {
        m: {
            "comprehensiveness": 0.5 + i / 10,
            "sufficiency": 0.1,
            "aopc": 0.4,
            "tau_leave_one_out": 1.0 if i == 0 else 0.25,
        }
        for i, m in enumerate(attributions)
    }  # the first method ranks the words as leave-one-out does
    page = save_attention_html(
        tmp_path / "view.html", tokens, attentions, attributions=attributions, faithfulness=scores,
        faithfulness_note="words replaced by [MASK]", method_labels=labels(), text_method="integrated_gradients",
        method_notes=descriptions(),
    )  # fmt: skip
    browser.open(page.as_uri())
    assert browser.js("document.getElementById('mode-words').hidden") is False
    browser.click("#mode-words")
    assert browser.js(
        "[document.getElementById('head-view').hidden, document.getElementById('words-view').hidden]"
    ) == [
        True,
        False,
    ]
    words = (
        "Array.from(document.querySelectorAll('#words span.word'), e => [e.textContent, e.dataset.method, "
        "Number(e.dataset.value), getComputedStyle(e).backgroundColor])"
    )

    def rgba(colour: str) -> list[float]:
        return [float(v) for v in colour[colour.index("(") + 1 : -1].split(",")] + ([1.0] if colour[3] != "a" else [])

    shown = browser.js(words)  # the method the text tab opens on; [CLS] is no word of the review
    assert [w[0] for w in shown] == tokens[1:] and {w[1] for w in shown} == {"integrated_gradients"}
    assert [w[2] for w in shown] == attributions["integrated_gradients"][1:]
    colours = [rgba(w[3]) for w in shown]
    assert colours[1][:3] == [255, 127, 14] and colours[1][3] == pytest.approx(1.0)  # the strongest: against, full
    assert colours[0][:3] == [31, 119, 180] and colours[0][3] == pytest.approx(0.5, abs=1e-3)  # 1.5 / 3, towards
    rows = (
        "Array.from(document.querySelectorAll('#faithfulness tr[data-method]'), r => [r.dataset.method, r.className])"
    )
    assert browser.js(rows) == [[m, "current" if m == "integrated_gradients" else ""] for m in attributions]
    cells = browser.js(
        "Array.from(document.querySelectorAll('#faithfulness tr[data-method=attention] td'), c => c.textContent)"
    )
    assert cells == ["attention (last layer)", "0.500", "0.100", "0.400", "1 (identical)"]
    heads = browser.js("Array.from(document.querySelectorAll('#faithfulness th'), c => c.textContent)")
    assert heads == ["method", "comprehensiveness", "sufficiency", "AOPC", "tau LOO"]  # the measures given

    browser.click("#method-leave_one_out")
    shown = browser.js(words)
    assert {w[1] for w in shown} == {"leave_one_out"} and [w[2] for w in shown] == attributions["leave_one_out"][1:]
    assert rgba(shown[1][3])[3] == pytest.approx(1.0) and rgba(shown[0][3])[3] == pytest.approx(0.04, abs=1e-3)
    browser.move_to("#words span.word[data-index='2']")  # a signed value, whom it counts for, its size
    assert (
        browser.js("document.getElementById('word-readout').textContent")
        == "leave-one-out: \u201c<b>bad</b>\u201d +0.500, towards the class explained "
        "(100% of this text\u2019s largest)"
    )
    assert browser.js("document.getElementById('method-note').textContent") == (
        f"leave-one-out: {descriptions()['leave_one_out']}."
    )  # the registry's line of the method picked

    browser.js("location.hash = 'view=words&method=attention'")  # the hash picks the view and the method
    browser.wait_for("document.querySelector('#words span.word').dataset.method === 'attention'")
    assert [w[2] for w in browser.js(words)] == attributions["attention"][1:]

    over = {  # each method's tau over 3 texts (agreement_over_texts): columns beside this text's
        "attention": {"tau_leave_one_out": {"mean": 1.0, "sem": 0.0, "texts": 3, "identical": True}},
        "integrated_gradients": {"tau_leave_one_out": {"mean": 0.4, "sem": 0.125, "texts": 3, "identical": False}},
    }
    several = save_attention_html(
        tmp_path / "several.html", tokens, attentions, attributions=attributions, faithfulness=scores,
        method_labels=labels(), agreement=over,
    )  # fmt: skip
    browser.open(several.as_uri() + "#view=words")
    heads = browser.js("Array.from(document.querySelectorAll('#faithfulness th'), c => c.textContent)")
    assert heads == ["method", "comprehensiveness", "sufficiency", "AOPC", "tau LOO", "tau LOO, 3 texts"]
    across = "Array.from(document.querySelectorAll('#faithfulness tr[data-method] td.across'), c => c.textContent)"
    assert browser.js(across) == ["1 (identical)", "0.400 \u00b1 0.125", "-"]  # leave-one-out: none given

    plain = save_attention_html(tmp_path / "plain.html", tokens, attentions)  # no attributions: no tab
    browser.open(plain.as_uri())
    assert browser.js("document.getElementById('mode-words').hidden") is True


# ---- the text tab, the colour scales, names from Python ------------------------------------------------
PIECES = ["[CLS]", "the", "fi", "##lm", "was", "not", "dull"]  # "film" in two pieces
WORDS = ["the", "film", "was", "not", "dull"]


def by_words(row: np.ndarray) -> list[float]:
    """A (7,) row of PIECES as the (6,) words of PIECES ([CLS] first), each the mean of its pieces: an oracle of
    its own."""
    return [row[0], row[1], (row[2] + row[3]) / 2, row[4], row[5], row[6]]


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_the_text_tab_shades_each_word_by_the_mean_of_its_pieces(pooling: str):
    torch.manual_seed(1)
    attentions = [torch.rand(3, 7, 7).softmax(-1) for _ in range(2)]
    attributions = {"leave_one_out": [0.0, 0.1, 0.2, -0.05, 0.0, 0.4, -0.3]}
    page = attention_html(PIECES, attentions, pooling=pooling, attributions=attributions)
    text = inlined_data(page)["text"]
    pooled = (lambda a: a[0]) if pooling == "cls" else (lambda a: a.mean(axis=0))  # the row the classifier reads
    assert text["words"] == ["[CLS]", *WORDS] and text["first"] == 1
    assert text["pieces"] == [["[CLS]"], ["the"], ["fi", "##lm"], ["was"], ["not"], ["dull"]]
    assert text["pooled"] == POOLED_ROW[pooling] and text["pooling"] == pooling
    series = {s["id"]: s for s in text["series"]}
    for layer, weights in enumerate(attentions):
        w = weights.numpy()
        np.testing.assert_allclose(series[f"layer-{layer}"]["values"], by_words(pooled(w.mean(axis=0))), rtol=1e-3)
        for h in range(3):
            np.testing.assert_allclose(series[f"layer-{layer}-head-{h}"]["values"], by_words(pooled(w[h])), rtol=1e-3)
    np.testing.assert_allclose(series["rollout"]["values"], by_words(pooled(attention_rollout(attentions))), rtol=1e-3)
    assert series["method-leave_one_out"]["signed"] and series["method-leave_one_out"]["values"] == pytest.approx(
        [0.0, 0.1, 0.075, 0.0, 0.4, -0.3]
    )  # an attribution alike: "film" the mean of its pieces 0.2 and -0.05
    pieces = [len(p) for p in text["pieces"]]  # a word's mean times its pieces: the row still sums to 1
    assert np.dot(series["layer-1"]["values"], pieces) == pytest.approx(1.0, abs=1e-3)
    assert text["default"] == "layer-1"


def test_the_page_carries_the_names_it_shares_with_python_and_refuses_bad_ones():
    weights = [torch.rand(2, 7, 7).softmax(-1)]
    page = attention_html(PIECES, weights, scale="row", method_labels=labels(), method_notes=descriptions())
    names = inlined_data(page)["names"]
    assert names == {
        "scales": SCALES,
        "scale": "row",
        "methods": labels(),
        "notes": descriptions(),
        "file": "attention",
    }
    assert inlined_data(attention_html(PIECES, weights))["names"]["scale"] == DEFAULT_SCALE
    with pytest.raises(ValueError, match=r"scale='log': expected one of fixed, row, uniform"):
        attention_html(PIECES, weights, scale="log")
    with pytest.raises(ValueError, match=r"pooling='max': expected one of 'cls', 'mean'"):
        attention_html(PIECES, weights, pooling="max")


def test_the_pages_modules_join_into_one_script_in_the_order_they_import():
    folder = Path(html_module.__file__).parent / "page"
    assert sorted(p.stem for p in folder.glob("*.js")) == sorted(MODULES)
    declared: dict[str, str] = {}
    sources = {name: (folder / f"{name}.js").read_text(encoding="utf-8") for name in MODULES}
    imported = set(re.findall(r"\w+", " ".join(re.findall(r"^import \{([^}]*)\}", "\n".join(sources.values()), re.M))))
    for i, name in enumerate(MODULES):
        source = sources[name]
        imports = re.findall(r'^import \{([^}]*)\} from "\./(\w+)\.js";$', source, flags=re.MULTILINE)
        exported = re.findall(r"^export (?:const|let|function|class) (\w+)", source, flags=re.MULTILINE)
        assert set(exported) <= imported, f"page/{name}.js exports what no module imports"
        assert len(imports) == len(re.findall(r"^import\b", source, flags=re.MULTILINE))  # one line each
        assert all(module in MODULES[:i] for _, module in imports), name  # what it imports comes first
        for what in re.findall(r"^(?:export )?(?:const|let|function|class) (\w+)", source, flags=re.MULTILINE):
            assert what not in declared, f"{what} is declared in page/{declared[what]}.js and page/{name}.js"
            declared[what] = name
        assert len(source.splitlines()) <= 250
    script = html_module._assets()[2]
    assert "import " not in script and "\nexport " not in script and script.count('"use strict"') == 1


# ---- in a real browser: the text tab, the scales, long texts -----------------------------------------------
def colour(css: str) -> list[float]:
    """An rgb()/rgba() CSS colour as [r, g, b, a]."""
    values = [float(v) for v in css[css.index("(") + 1 : -1].split(",")]
    return values + [1.0] * (4 - len(values))


def scaled(row: np.ndarray, scale: str) -> np.ndarray:
    """The page's colour value of each weight of `row`: the oracle of scales.py's three scales."""
    row = np.asarray(row, dtype=float)
    if scale == "row":
        return row / row.max()
    if scale == "uniform":
        return row * len(row) / (row * len(row) + 1)
    return np.clip(row, 0, 1)


TEXT_SPANS = "Array.from(document.querySelectorAll('#text span.word'), e => [e.textContent, Number(e.dataset.value), " \
    "getComputedStyle(e).backgroundColor, e.dataset.series])"  # fmt: skip


@pytest.mark.slow
def test_the_text_tab_and_the_scale_switch_in_a_browser(browser, tmp_path: Path):
    torch.manual_seed(2)
    attentions = [torch.rand(3, 7, 7).softmax(-1) for _ in range(2)]
    attributions = {"integrated_gradients": [0.0, 0.1, 0.2, -0.05, 0.0, 0.4, -0.3]}
    page = save_attention_html(
        tmp_path / "mean.html", PIECES, attentions, pooling="mean", scale="fixed", attributions=attributions,
        method_labels=labels(),
    )  # fmt: skip
    series = {s["id"]: s["values"] for s in read_attention_data(page.read_text(encoding="utf-8"))["text"]["series"]}
    browser.open(page.as_uri())
    browser.click("#mode-text")
    help_text = browser.js("document.querySelector('#text-view .help').textContent")
    assert "the mean of the rows" in help_text and "pooling=mean" in help_text and "[CLS] row" not in help_text
    for scale in ("fixed", "row", "uniform"):
        browser.js(f"location.hash = 'view=text&scale={scale}'")
        browser.wait_for(f"document.getElementById('scale').value === '{scale}'")
        shown = browser.js(TEXT_SPANS)
        assert [w[0] for w in shown] == WORDS and {w[3] for w in shown} == {"layer-1"}  # the last layer first
        assert [w[1] for w in shown] == series["layer-1"][1:]
        expected = ramp(scaled(np.array(series["layer-1"][1:]), scale))  # [CLS] is no word of the review
        np.testing.assert_allclose([colour(w[2])[:3] for w in shown], expected, atol=1.01)
        assert SCALES[scale] in browser.js("document.querySelector('#text-legend').textContent")
    assert "[CLS] itself takes" in browser.js("document.getElementById('text-note').textContent")

    browser.js("var s = document.getElementById('text-series'); s.value = 'layer-0-head-2'; "
               "s.dispatchEvent(new Event('change'))")  # fmt: skip
    shown = browser.js(TEXT_SPANS)
    assert [w[1] for w in shown] == series["layer-0-head-2"][1:] and {w[3] for w in shown} == {"layer-0-head-2"}
    browser.js("location.hash = 'view=text&series=method-integrated_gradients'")  # signed: blue for, orange against
    browser.wait_for("document.querySelector('#text span.word').dataset.series === 'method-integrated_gradients'")
    shown = [colour(w[2]) for w in browser.js(TEXT_SPANS)]
    assert shown[3][:3] == [31, 119, 180] and shown[3][3] == pytest.approx(1.0)  # "not" 0.4: the largest
    assert shown[4][:3] == [255, 127, 14] and shown[4][3] == pytest.approx(0.75, abs=1e-3)  # "dull" -0.3
    assert browser.js("document.getElementById('text-legend').hidden") is True

    browser.click("#mode-model")  # the model view follows the scale: each map's rows on the row scale
    layer = np.array(read_attention_data(page.read_text(encoding="utf-8"))["layers"][1][2])
    pixels = browser.js(
        '(function () { var c = document.querySelector(\'canvas.map[data-layer="1"][data-head="2"]\'); '
        "return Array.from(c.getContext('2d').getImageData(0, 0, c.width, c.height).data); })()"
    )
    assert browser.js("document.getElementById('scale').value") == "uniform"
    np.testing.assert_allclose(np.array(pixels).reshape(7, 7, 4)[..., :3], ramp(scaled_rows(layer, "uniform")),
                               atol=1.01)  # fmt: skip
    browser.js("var s = document.getElementById('scale'); s.value = 'row'; s.dispatchEvent(new Event('change'))")
    pixels = browser.js(
        '(function () { var c = document.querySelector(\'canvas.map[data-layer="1"][data-head="2"]\'); '
        "return Array.from(c.getContext('2d').getImageData(0, 0, c.width, c.height).data); })()"
    )
    np.testing.assert_allclose(np.array(pixels).reshape(7, 7, 4)[..., :3], ramp(scaled_rows(layer, "row")), atol=1.01)
    assert (
        browser.js("document.querySelector('#model-view .legend .what').textContent") == "row scale: " + SCALES["row"]
    )

    browser.click("#mode-head")  # the head view too: thickness and opacity = the scaled weight
    browser.move_to("g.token.left[data-index='0'] rect")
    rows = np.array(read_attention_data(page.read_text(encoding="utf-8"))["layers"][0])  # (3, 7, 7)
    drawn = browser.lines()
    for line in drawn:
        v = scaled_rows(rows[int(line["series"][-1])], "row")[line["query"], line["key"]]
        assert line["width"] == pytest.approx(6 * v, abs=1e-3)
    blocks = browser.lines("#blocks rect")
    assert max(b["opacity"][2] for b in blocks) == pytest.approx(1.0)  # each row's largest fully coloured

    cls_page = save_attention_html(tmp_path / "cls.html", PIECES, attentions, pooling="cls")
    browser.open(cls_page.as_uri() + "#view=text")
    help_text = browser.js("document.querySelector('#text-view .help').textContent")
    assert "the [CLS] row" in help_text and "pooling=cls" in help_text and "mean of the rows" not in help_text


def scaled_rows(rows: np.ndarray, scale: str) -> np.ndarray:
    return np.stack([scaled(row, scale) for row in rows])


# ---- long reviews in a browser: 60 words and 500 tokens -------------------------------------------------
@pytest.fixture(scope="module")
def imdb_reviews() -> dict[str, list[str]]:
    """Two IMDB test reviews as a tokenizer trained on 1,000 others cuts them: one of 60 words, and the first
    of 500 tokens or more (cut to 500); skipped without ../shared/data/imdb."""
    path = SHARED_DATA / "imdb" / "test.parquet"
    if not path.is_file():
        pytest.skip(f"IMDB reviews not found at {path}: the long-page test reads two of them")
    texts = pq.read_table(path, columns=["text"]).column("text").to_pylist()
    tok = train_tokenizer(texts[:1000], vocab_size=3000)  # small: many words in pieces
    sixty = next(t for t in texts if len(t.split()) == 60)
    long = next(t for t in texts if len(tok.encode(t).tokens) >= 500)
    return {"60 words": tok.encode(sixty).tokens, "500 tokens": tok.encode(long).tokens[:500]}


def random_attention(n: int, layers: int = 2, heads: int = 4, seed: int = 0) -> list[np.ndarray]:
    """Diffuse maps like a trained model's on a long text: each row a Dirichlet(0.3) draw."""
    rng = np.random.default_rng(seed)
    return [rng.dirichlet(np.full(n, 0.3), size=(heads, n)) for _ in range(layers)]


@pytest.mark.slow
@pytest.mark.parametrize("review", ["60 words", "500 tokens"])
def test_a_long_review_fits_the_page_in_a_browser(browser, imdb_reviews, tmp_path: Path, review: str):
    tokens = imdb_reviews[review]
    n, attentions = len(tokens), random_attention(len(tokens))
    attributions = {"integrated_gradients": np.random.default_rng(1).normal(size=n).tolist()}
    page = save_attention_html(tmp_path / "long.html", tokens, attentions, pooling="mean", attributions=attributions)
    browser.open(page.as_uri(), timeout=60)
    no_sideways = (
        "[document.documentElement.scrollWidth <= document.documentElement.clientWidth, "
        "document.getElementById('view-box').scrollWidth <= document.getElementById('view-box').clientWidth]"
    )
    for tab in ("head", "model", "text", "words"):
        browser.click(f"#mode-{tab}")
        assert browser.js(no_sideways) == [True, True], f"the {tab} tab scrolls sideways"

    browser.click("#mode-model")  # a layer's 4 maps side by side in the page: cells of 3 px where that fits
    maps = browser.js(
        "Array.from(document.querySelectorAll('canvas.map'), c => [c.clientWidth / c.width, c.dataset.layer, "
        "c.getBoundingClientRect().right, c.getBoundingClientRect().top])"
    )
    width = browser.js("document.documentElement.clientWidth")
    assert len(maps) == 2 * 4 + 1 and all(right <= width for _, _, right, _ in maps)
    assert {layer: len({top for _, one, _, top in maps if one == layer}) for _, layer, _, _ in maps} == {
        "0": 1, "1": 1, "rollout": 1
    }  # fmt: skip
    assert min(cell for cell, *_ in maps) >= min(3, ((width - 170) / 4 - 10) / n)  # model.js's margins, a scrollbar

    browser.click("#mode-head")  # the readout stays on screen beside the last token
    browser.move_to(f"g.token.left[data-index='{n - 1}'] rect")
    box = browser.js(
        "(function () { var r = document.getElementById('readout').getBoundingClientRect(); return [r.top, r.bottom, "
        "innerHeight, document.querySelector('#readout .readtitle').textContent]; })()"
    )
    assert 0 <= box[0] < box[1] <= box[2] and box[3] == f"\u201c{tokens[-1]}\u201d (query) reads most:"
    browser.js("location.hash = 'scale=uniform'")  # low weights stay visible: an even spread (1/n) draws 3 px
    browser.wait_for("document.getElementById('scale').value === 'uniform'")
    browser.move_to(f"g.token.left[data-index='{n - 2}'] rect")
    drawn = {(line["series"], line["key"]): line["width"] for line in browser.lines()}
    row = np.array(read_attention_data(page.read_text(encoding="utf-8"))["layers"][0])[:, n - 2]  # (4, n), layer 0
    for h in range(4):
        for k in np.flatnonzero(row[h] >= 1 / n):
            assert drawn.get((f"head-{h}", k), 0) >= 3 - 1e-3

    browser.click("#mode-text")  # every word of the review, on lines that wrap inside the page
    words = browser.js(
        "Array.from(document.querySelectorAll('#text span.word'), e => { var r = e.getBoundingClientRect(); "
        "return [e.textContent, r.width > 0 && r.right <= document.documentElement.clientWidth, r.top]; })"
    )
    assert [w[0] for w in words] == [w.text for w in join_pieces(tokens)][1:]
    assert all(w[1] for w in words) and len({w[2] for w in words}) > 1


@pytest.mark.slow
def test_the_export_button_saves_the_view_on_screen_as_an_svg_picture(browser, tmp_path: Path):
    tokens, attentions = shared_key_attention()
    page = save_attention_html(tmp_path / "view.html", tokens, attentions, title="a review")
    browser.open(page.as_uri() + "#token=3")
    saved = (  # the download the button starts, caught at the link's click, and the file it holds
        "(function () { var got = null, click = HTMLAnchorElement.prototype.click; HTMLAnchorElement.prototype.click ="
        " function () { got = [this.getAttribute('download'), this.getAttribute('href')]; }; document.getElementById("
        "'export').click(); HTMLAnchorElement.prototype.click = click; var x = new XMLHttpRequest(); x.open('GET', "
        "got[1], false); x.send(); return [got[0], x.responseText]; })()"
    )
    for view, marks in (("head", "{*}line"), ("model", "{*}img"), ("text", "{*}span")):
        browser.click(f"#mode-{view}")
        name, svg = browser.js(saved)
        assert name == f"a review - {view} view.svg"
        root = ElementTree.fromstring(svg)  # well-formed XML: an SVG with the view's markup inside
        assert root.tag == f"{{{SVG_NS}}}svg" and int(root.get("width")) > 0 and int(root.get("height")) > 0
        found = root.findall(f".//{marks}")
        if view == "head":  # the lines of the token pinned, and every token's text
            assert len([m for m in found if m.get("data-query") == "3"]) == len(browser.lines())
            assert all(t in "".join(root.itertext()) for t in tokens)
        if view == "model":  # every map, as a picture of its cells
            assert len([m for m in found if m.get("src", "").startswith("data:image/png")]) == 2 * 4 + 1
        if view == "text":
            assert [m.text for m in found if m.get("class") == "word"] == tokens[1:]


# ---- weight | weight x norm ----------------------------------------------------------------------------------
def norm_maps(attentions: list[torch.Tensor]) -> list[torch.Tensor]:
    """Norm-weighted maps as the model gives them: each key's weight times a length of its own per head."""
    lengths = torch.arange(1.0, 7.0).flip(0) * torch.tensor([1.0, 3.0, 0.5, 2.0]).view(4, 1)  # (H, T)
    return [w * lengths[:, None, :] for w in attentions]


def test_the_page_carries_the_norm_maps_as_shares_and_their_rollout():
    tokens, attentions = shared_key_attention()
    norms = norm_maps(attentions)
    page = attention_html(tokens, attentions, norms=norms)
    data = inlined_data(page)
    shares = [(n / n.sum(-1, keepdim=True)).numpy() for n in norms]
    assert data["kinds"]["weight"]["layers"] is data["layers"]
    stored = inlined_data(page, raw=True)["kinds"]["norm"]  # weight x length: the lengths alone, (L, H, n)
    assert set(stored) == {"lengths", "rollout", "series"} and np.shape(stored["lengths"]) == (2, 4, 6)
    np.testing.assert_allclose(np.array(data["kinds"]["norm"]["layers"]), np.stack(shares), atol=3e-5)
    np.testing.assert_allclose(np.array(data["kinds"]["norm"]["rollout"]), attention_rollout(shares), atol=3e-5)
    other = [n + 0.01 * torch.rand_like(n) for n in norms]  # not weight x length: the shares themselves, packed
    raw = inlined_data(attention_html(tokens, attentions, norms=other), raw=True)["kinds"]["norm"]
    assert "lengths" not in raw and raw["layers"]["shape"] == [2, 4, 6, 6]
    np.testing.assert_allclose(
        inlined_data(attention_html(tokens, attentions, norms=other))["kinds"]["norm"]["layers"],
        np.stack([(n / n.sum(-1, keepdim=True)).numpy() for n in other]), atol=3e-5,
    )  # fmt: skip
    assert not np.allclose(shares[0], attentions[0].numpy(), atol=1e-2)  # the switch shows something else
    assert data["kinds"]["weight"]["series"] == data["text"]["series"]  # the text tab swaps with the maps
    series = {one["id"]: one["values"] for one in data["kinds"]["norm"]["series"]}
    np.testing.assert_allclose(series["layer-1-head-0"], shares[1][0][0], rtol=1e-3)  # the [CLS] row, whole words
    np.testing.assert_allclose(series["layer-0"], shares[0].mean(axis=0)[0], rtol=1e-3)
    np.testing.assert_allclose(series["rollout"], attention_rollout(shares)[0], rtol=1e-3)
    assert "kinds" not in inlined_data(attention_html(tokens, attentions))  # no norms, no switch
    with pytest.raises(ValueError, match="6 tokens for a 5 x 5"):
        attention_html(tokens, attentions, norms=[n[:, :5, :5] for n in norms])


@pytest.mark.slow
def test_the_kind_switch_redraws_the_head_and_model_views_in_a_browser(browser, tmp_path: Path):
    tokens, attentions = shared_key_attention()
    norms = norm_maps(attentions)
    shares = [n / n.sum(-1, keepdim=True) for n in norms]
    page = save_attention_html(tmp_path / "view.html", tokens, attentions, norms=norms, scale="fixed")
    browser.open(page.as_uri() + "#layer=1&heads=1")
    assert browser.js("document.getElementById('kind-switch').hidden") is False
    browser.move_to("g.token.left[data-index='4'] rect")
    assert_drawn(browser.lines(), expected_lines({"head-1": attentions[1][1]}, 4), 4)
    browser.js("(function () { var s = document.getElementById('kind'); s.value = 'norm'; "
               "s.dispatchEvent(new Event('change')); })()")  # fmt: skip
    browser.move_to("g.token.left[data-index='3'] rect")
    assert_drawn(browser.lines(), expected_lines({"head-1": shares[1][1]}, 3), 3)
    browser.js("location.hash = 'layer=rollout'")
    browser.wait_for("document.getElementById('layer').value === 'rollout'")
    browser.move_to("g.token.left[data-index='0'] rect")
    assert_drawn(browser.lines(), expected_lines({"rollout": attention_rollout(shares)}, 0), 0)
    browser.click("#mode-model")  # the model view paints the norm maps' cells
    pixel = (
        "Array.from(document.querySelector('canvas.map[data-layer=\"0\"][data-head=\"3\"]').getContext('2d')"
        ".getImageData(0, 2, 1, 1).data).slice(0, 3)"
    )  # query 2, key 0 of layer 0, head 3: one pixel per cell
    np.testing.assert_allclose(browser.js(pixel), ramp(shares[0][3][2, 0].numpy()), atol=1.01)
    plain = save_attention_html(tmp_path / "plain.html", tokens, attentions)
    browser.open(plain.as_uri())
    assert browser.js("document.getElementById('kind-switch').hidden") is True


@pytest.mark.slow
def test_the_text_tab_shades_by_weight_x_norm_when_the_map_switch_says_norm_in_a_browser(browser, tmp_path: Path):
    """Each word takes the pooled row of the norm maps' shares (pieces summed), and the weights back on switching."""
    torch.manual_seed(3)
    attentions = [torch.rand(3, 7, 7).softmax(-1) for _ in range(2)]
    lengths = torch.tensor([4.0, 1.0, 0.5, 2.0, 1.0, 3.0, 0.2])  # (T,): what each key moves, alike for every head
    norms = [w * lengths for w in attentions]
    shares = [(n / n.sum(-1, keepdim=True)).numpy() for n in norms]
    page = save_attention_html(tmp_path / "norm.html", PIECES, attentions, norms=norms, scale="fixed")
    browser.open(page.as_uri() + "#view=text&series=layer-0-head-2")
    pick = "var s = document.getElementById('kind'); s.value = '{}'; s.dispatchEvent(new Event('change'))"
    for kind, maps in (("norm", shares), ("weight", [w.numpy() for w in attentions])):
        browser.js(pick.format(kind))
        browser.wait_for(f"document.querySelector('#text span.word').dataset.kind === '{kind}'")
        shown = browser.js(TEXT_SPANS)
        assert [w[0] for w in shown] == WORDS and {w[3] for w in shown} == {"layer-0-head-2"}
        np.testing.assert_allclose([w[1] for w in shown], by_words(maps[0][2][0])[1:], rtol=1e-3)
        np.testing.assert_allclose([colour(w[2])[:3] for w in shown], ramp(np.array([w[1] for w in shown])), atol=1.01)
        assert ("weight x norm" in browser.js("document.getElementById('text-note').textContent")) == (kind == "norm")
    assert not np.allclose(by_words(shares[0][2][0]), by_words(attentions[0][2][0].numpy()), atol=1e-2)


@pytest.mark.slow
def test_the_head_view_downloads_as_png_and_svg_in_a_browser(browser, tmp_path: Path):
    """The two buttons download files Chromium writes to disk: an SVG of the view's size, and a PNG of twice it."""
    from PIL import Image

    tokens, attentions = shared_key_attention()
    page = save_attention_html(tmp_path / "view.html", tokens, attentions, title="a review")
    browser.open(page.as_uri() + "#token=3")
    folder = tmp_path / "downloads"
    session, browser.session = browser.session, None  # a browser command, not the tab's
    browser.send("Browser.setDownloadBehavior", behavior="allow", downloadPath=str(folder))
    browser.session = session
    browser.click("#export")
    browser.click("#export-png")
    files = {"svg": folder / "a review - head view.svg", "png": folder / "a review - head view.png"}
    deadline = time.monotonic() + 10
    while not all(f.exists() and f.stat().st_size > 0 for f in files.values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    root = ElementTree.parse(files["svg"]).getroot()
    width, height = int(root.get("width")), int(root.get("height"))
    assert width > 100 and height > 100 and all(t in "".join(root.itertext()) for t in tokens)
    with Image.open(files["png"]) as png:
        assert png.format == "PNG" and png.size == (2 * width, 2 * height)
        pixels = np.asarray(png.convert("RGB"), dtype=float)
    assert pixels.std() > 10 and (pixels < 128).any()  # drawn: text and lines, not a blank sheet


def test_predict_draws_the_norm_maps_in_its_pngs_when_asked(tmp_path: Path):
    ckpt = save_like_lightning(tiny_module(), tmp_path / "model.ckpt")
    pictures = {}
    for run, kind in (("weight", "weight"), ("again", "weight"), ("norm", "norm")):
        cfg = OmegaConf.create(
            {"ckpt_path": str(ckpt), "texts": [TEXT], "save_attention": "png", "attention_map": kind, "batch_size": 8,
             "paths": {"output_dir": str(tmp_path / run)}}
        )  # fmt: skip
        main(cfg)
        record = json.loads((tmp_path / run / "predictions.jsonl").read_text())
        pictures[run] = [Path(p).read_bytes() for p in [*record["attention_png"], record["rollout_png"]]]
    assert pictures["weight"] == pictures["again"]  # the same maps draw the same bytes ...
    assert all(a != b for a, b in zip(pictures["weight"], pictures["norm"], strict=True))  # ... so these are others
    cfg.attention_map = "norms"
    with pytest.raises(ConfigError, match="attention_map=norms: not a map kind; use weight or norm"):
        main(cfg)


def test_a_one_layer_page_has_no_rollout_to_repeat_its_layer():
    """A 1-layer rollout is the layer's mean mixed with the residual path: the page offers the layer alone."""
    one, two = ([torch.rand(2, 7, 7).softmax(-1) for _ in range(n)] for n in (1, 2))
    for maps, has in ((one, False), (two, True)):
        data = inlined_data(attention_html(PIECES, maps, norms=maps), raw=True)
        assert (data["rollout"] is not None) == has
        for series in (data["text"]["series"], data["kinds"]["norm"]["series"]):
            assert any(s["id"] == "rollout" for s in series) == has
