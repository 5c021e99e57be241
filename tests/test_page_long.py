"""Pages of long reviews (plotting/html.py, pack.py, review.py; predict.py's pages): small (the maps packed, what
the page can compute left out), their saved pictures named by the page's short name, a cut said in the console,
predictions.jsonl, the heading and the text tab, and, in a real headless Chromium, every tab saved as SVG and PNG
from a predict.py page of a 2,000-character review holding control characters, the heading three lines until
clicked, the cut marked where it falls, weights read to 3 significant digits, every head of a layer in view."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest
import test_html_view
import torch
from chromium import Chromium
from omegaconf import OmegaConf
from test_checkpoint import save_like_lightning, tiny_module

from transformer_attention.data import load_tokenizer
from transformer_attention.plotting.html import attention_html, read_attention_data
from transformer_attention.plotting.pack import pack, unpack
from transformer_attention.plotting.review import Review, file_stem, plain
from transformer_attention.tasks.predict import main

WORDS = "the acting was not bad at all but the plot is dull and slow".split()
HIDDEN = "\x07\x1b[31m\u202e"  # BEL, ESC (a terminal colour), a right-to-left override: none belongs on a page
MAX_PAGE_MB = 6.0  # a 512-token page of 2 layers x 4 heads with its norm maps and two attributions: 5.8 MB


def review(chars: int) -> str:
    """A review of about `chars` characters of words the tiny model knows, with IMDB's line breaks and HIDDEN."""
    words = [WORDS[i % len(WORDS)] for i in range(chars // 4)]
    text = " ".join(words[:40]) + "<br /><br />" + HIDDEN + " ".join(words[40:])
    return text[:chars]


def test_a_512_token_page_is_small_and_keeps_three_digits_of_every_weight():
    rng = np.random.default_rng(0)
    n = 512
    tokens = ["[CLS]"] + [f"w{i}" if i % 3 else f"##p{i}" for i in range(1, n)]
    attentions = [rng.dirichlet(np.full(n, 0.3), size=(4, n)) for _ in range(2)]
    attentions[0][0, 5] = 1 / n  # an even row: 1/n on every key
    norms = [a * rng.uniform(0.5, 3, size=(4, 1, n)) for a in attentions]
    attributions = {m: rng.normal(size=n).tolist() for m in ("integrated_gradients", "leave_one_out")}
    page = attention_html(tokens, attentions, norms=norms, attributions=attributions)
    assert len(page.encode("utf-8")) / 1e6 < MAX_PAGE_MB
    data = read_attention_data(page)
    np.testing.assert_allclose(data["layers"], np.stack(attentions), atol=1.6e-5)
    assert {f"{w:.3g}" for w in data["layers"][0, 0, 5]} == {f"{1 / n:.3g}"}  # 0.00195 on every key
    big = np.stack(attentions) > 1e-4  # 3 significant digits down to 1e-4
    np.testing.assert_allclose(data["layers"][big], np.stack(attentions)[big], rtol=5e-3)


def test_pack_refuses_what_is_no_weight_and_reads_back_any_shape():
    maps = np.linspace(0, 1, 24).reshape(2, 3, 4)
    np.testing.assert_allclose(unpack(pack(maps)), maps, atol=1.6e-5)
    assert "=" not in pack(maps)["sqrt16"]
    with pytest.raises(ValueError, match=r"pack stores weights in \[0, 1\], got values from -0.5"):
        pack(maps - 0.5)


def test_saved_pictures_take_the_pages_short_name_and_the_text_its_line_breaks():
    weights = [torch.rand(2, 4, 4).softmax(-1)]
    text = review(2000)
    page = attention_html(["[CLS]", "the", "plot", "is"], weights, title="text_3", review=Review(text, 4))
    data = read_attention_data(page)
    assert data["names"]["file"] == "text_3"
    assert data["review"]["text"] == plain(text) and "\n\n" in data["review"]["text"]  # <br /><br />: a blank line
    assert not re.search("[\x07\x1b\u202e]", page)
    assert file_stem(text) == " ".join(plain(text).split())[:60].strip()  # a title alone: its first 60 characters
    assert file_stem('a/b\\c:d*e?f"g<h>i|j\x07') == "a_b_c_d_e_f_g_h_i_j" and file_stem("..") == "attention"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return save_like_lightning(tiny_module(), tmp_path_factory.mktemp("ckpt") / "model.ckpt")


def predict_page(checkpoint: Path, run: Path, texts: list[str], max_length: int | None = None) -> list[dict]:
    """predict.py's pages of `texts` (three explanation methods, for speed): each record of predictions.jsonl."""
    cfg = OmegaConf.create(
        {"ckpt_path": str(checkpoint), "texts": texts, "save_attention": "html", "batch_size": 8,
         "max_length": max_length, "analysis": {"methods": ["attention", "integrated_gradients", "leave_one_out"]},
         "paths": {"output_dir": str(run)}}
    )  # fmt: skip
    main(cfg)
    return [json.loads(line) for line in (run / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]


def test_predict_says_where_it_cut_a_text(checkpoint: Path, tmp_path: Path, capsys):
    long, short = review(300), "the plot is dull"
    records = predict_page(checkpoint, tmp_path / "run", [long, short], max_length=16)
    tok = load_tokenizer(tiny_module().tokenizer_json)
    total = len(tok.encode(long).ids)  # [CLS] and every word piece of the whole review
    assert total > 40
    out = capsys.readouterr().out.splitlines()
    assert f"| read 16 of {total} tokens: " in out[0] and "read" not in out[1].split("|")[1]  # the console
    assert out[-2:] == [
        f"predictions: {tmp_path / 'run' / 'predictions.jsonl'}", f"attention maps: {tmp_path / 'run' / 'attention'}"
        " (<i>.html: open it in a browser)"
    ]  # fmt: skip
    assert [(r["tokens_read"], r["text_tokens"], r["truncated"]) for r in records] == [(16, total, True), (5, 5, False)]
    data = read_attention_data(Path(records[0]["attention_html"]).read_text(encoding="utf-8"))
    assert data["tokens"] == records[0]["tokens"] and len(data["tokens"]) == 16
    assert (data["review"]["read"], data["review"]["total"]) == (16, total)  # the heading's note and the cut
    unread = data["review"]["unread"]
    k = next(k for k in range(len(long)) if plain(long[k:]) == unread)  # the rest: after the last token read
    assert 0 < k < len(long) - 100 and tok.encode(long[:k]).tokens == records[0]["tokens"]
    assert data["names"]["file"] == "text_0"
    whole = read_attention_data(Path(records[1]["attention_html"]).read_text(encoding="utf-8"))["review"]
    assert (whole["read"], whole["total"], whole["unread"]) == (5, 5, "")


def test_predict_prints_paths_relative_to_the_working_directory(checkpoint: Path, tmp_path: Path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    predict_page(checkpoint, tmp_path / "out" / "run", ["the plot is dull"])
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == ["predictions: out/run/predictions.jsonl", "attention maps: out/run/attention (<i>.html: open "
                        "it in a browser)"]  # fmt: skip


# ---- in a real browser ------------------------------------------------------------------------------------------
browser = test_html_view.browser  # the fixture: a headless Chromium, or a skip that says how to install one


def downloads(browser: Chromium, folder: Path) -> None:
    """Let the browser write its downloads into `folder`."""
    session, browser.session = browser.session, None  # a browser command, not the tab's
    browser.send("Browser.setDownloadBehavior", behavior="allow", downloadPath=str(folder))
    browser.session = session


def wait_for_file(path: Path, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.stat().st_size > 0) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.2)  # the last bytes
    assert path.exists(), f"no file {path.name}; the folder holds {sorted(p.name for p in path.parent.glob('*'))}"


@pytest.mark.slow
def test_every_tab_of_a_long_reviews_page_saves_as_svg_and_png_in_a_browser(browser, checkpoint, tmp_path: Path):
    from PIL import Image

    text = review(2000)
    (record,) = predict_page(checkpoint, tmp_path / "run", [text], max_length=64)
    assert record["truncated"] and len(text) == 2000
    folder = tmp_path / "downloads"
    browser.open(Path(record["attention_html"]).as_uri(), timeout=60)
    downloads(browser, folder)
    for view in ("head", "model", "text", "words"):
        browser.click(f"#mode-{view}")
        browser.click("#export")
        browser.click("#export-png")
        svg, png = (folder / f"text_0 - {view} view.{kind}" for kind in ("svg", "png"))
        wait_for_file(svg)
        wait_for_file(png)
        root = ElementTree.parse(svg).getroot()  # well-formed XML, whatever the review holds
        width, height = int(root.get("width")), int(root.get("height"))
        said = "".join(root.itertext())
        assert "text_0" in said and "Hover" not in said  # the view, without its help and hover readout
        assert not [e for e in root.iter() if e.tag.endswith("select")]  # each list as its choice, in words
        with Image.open(png) as picture:
            assert picture.format == "PNG" and picture.size == (2 * width, 2 * height)
            assert np.asarray(picture.convert("L")).std() > 5  # drawn, not a blank sheet


@pytest.mark.slow
def test_a_cut_review_is_said_in_the_heading_and_marked_in_the_text_tab_in_a_browser(browser, checkpoint, tmp_path):
    text = review(2000)
    (record,) = predict_page(checkpoint, tmp_path / "run", [text], max_length=64)
    page = Path(record["attention_html"])
    data = read_attention_data(page.read_text(encoding="utf-8"))
    browser.open(page.as_uri(), timeout=60)
    assert browser.js("document.querySelector('h1').textContent") == "text_0"
    box = "(function () { var r = document.getElementById('review'); return [r.clientHeight, r.scrollHeight, " \
        "parseFloat(getComputedStyle(r).lineHeight) || 17]; })()"  # fmt: skip
    shown, whole, line = browser.js(box)
    assert shown <= 3 * line + 1 < whole  # three lines of the review; the rest one click away
    browser.click("#review-more")
    shown, whole, _ = browser.js(box)
    assert shown == whole and browser.js("document.getElementById('review-more').textContent") == "show less"
    assert browser.js("document.getElementById('review').textContent") == plain(text)
    note = browser.js("document.getElementById('cut-note').textContent")
    assert f"read the first 64 of this text\u2019s {record['text_tokens']} tokens" in note

    browser.click("#mode-text")
    order = browser.js(
        "Array.from(document.querySelectorAll('#text > span'), e => [e.className, e.textContent, "
        "e.getBoundingClientRect().top])"
    )
    kinds = [k for k, _, _ in order]
    assert kinds == ["word"] * (len(data["text"]["words"]) - 1) + ["cut", "unread"]  # the mark after the last word
    assert order[-1][1] == data["review"]["unread"] and f"64 of {record['text_tokens']}" in order[-2][1]
    colour = browser.js("getComputedStyle(document.querySelector('#text .unread')).color")
    assert colour == "rgb(153, 153, 153)"  # the unread rest in grey


@pytest.mark.slow
def test_long_maps_read_to_three_digits_and_show_every_head_of_a_layer_in_a_browser(browser, tmp_path: Path):
    n = 500
    rng = np.random.default_rng(0)
    tokens = ["[CLS]", *(f"w{i}" for i in range(1, n))]
    attentions = [rng.dirichlet(np.full(n, 0.3), size=(4, n)) for _ in range(2)]
    attentions[0][:, 3] = 1 / n  # query 3 reads every key alike in layer 0
    page = tmp_path / "long.html"
    page.write_text(attention_html(tokens, attentions, title="long"), encoding="utf-8")
    browser.open(page.as_uri() + "#layer=0&heads=0", timeout=60)
    browser.move_to("g.token.left[data-index='3'] rect")
    line = browser.js("document.querySelector('#readout .readline').textContent")
    assert line.startswith("head 0: ") and line.count("0.00200") == 5  # 1/500, not 0.00
    browser.move_to("g.token.left[data-index='7'] rect")  # a long text marks the keys read at least an even share
    marks = browser.lines("#blocks rect")
    row = np.asarray(read_attention_data(page.read_text(encoding="utf-8"))["layers"][0][0][7])  # as the page holds it
    assert sorted(m["key"] for m in marks) == [int(k) for k in np.flatnonzero(row >= np.float32(1 / n))]
    page_px, box_px, box_shown, window = browser.js(
        "[document.documentElement.scrollHeight, document.getElementById('view-box').scrollHeight, "
        "document.getElementById('view-box').clientHeight, innerHeight]"
    )
    assert box_px > 5000 and box_shown <= window and page_px <= 2 * window  # 500 rows scroll in the view's box
    browser.click("#mode-model")
    boxes = browser.js(
        "Array.from(document.querySelectorAll('canvas.map[data-layer=\"0\"]'), c => { var r = "
        "c.getBoundingClientRect(); return [r.left, r.right, r.top]; })"
    )
    width = browser.js("document.documentElement.clientWidth")
    assert len(boxes) == 4 and all(0 <= left < right <= width for left, right, _ in boxes)  # side by side, in view
    assert len({top for _, _, top in boxes}) == 1
    browser.move_to("canvas.map[data-layer='0'][data-head='2']")
    assert re.search(r"reads \u201cw\d+\u201d \d\.\d\d|reads \u201c.*\u201d \d\.\d+e-\d|0\.0\d\d\d", browser.js(
        "document.getElementById('model-readout').textContent"))  # fmt: skip


@pytest.mark.slow
def test_a_signed_series_says_what_its_colours_mean_in_a_browser(browser, tmp_path: Path):
    tokens = ["[CLS]", "not", "bad", "at", "all"]
    attentions = [torch.rand(2, 5, 5).softmax(-1)]
    attributions = {"leave_one_out": [0.0, 0.1, -0.2, 0.0, 0.3], "integrated_gradients": [0.0, 1.0, -1.0, 0.5, 0.1]}
    labels = {"integrated_gradients": "Integrated Gradients", "leave_one_out": "leave-one-out"}
    page = tmp_path / "signed.html"
    page.write_text(attention_html(tokens, attentions, attributions=attributions, method_labels=labels), "utf-8")
    browser.open(page.as_uri() + "#view=text&series=method-leave_one_out")
    legend = "[document.getElementById('text-signed').hidden, document.getElementById('text-signed').textContent]"
    hidden, said = browser.js(legend)
    assert not hidden and said.startswith("blue: towards the predicted class, orange: against it")
    options = browser.js("Array.from(document.querySelectorAll('#text-series optgroup[label=\"word attributions\"] "
                         "option'), o => [o.value, o.textContent])")  # fmt: skip
    assert options == [
        ["method-integrated_gradients", "Integrated Gradients"],
        ["method-leave_one_out", "leave-one-out"],
    ]  # Python's order
    browser.js("location.hash = 'view=text&series=layer-0'")
    browser.wait_for("document.querySelector('#text span.word').dataset.series === 'layer-0'")
    assert browser.js(legend)[0] is True  # a weight: the colour scale's legend instead
