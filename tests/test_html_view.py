"""The offline attention view (html_view.py): nothing loaded from the network, the inlined data equal to the
model's attention, tokens kept as text, `predict.py save_attention=html`, and the page itself in a real
headless Chromium (driven over the DevTools protocol on a pipe, no dependency): hover a token, check the lines."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ROOT, entry_env
from omegaconf import OmegaConf
from test_checkpoint import save_like_lightning, tiny_module

from transformer_attention.errors import ConfigError
from transformer_attention.inference import Prediction, predict
from transformer_attention.plotting import attention_rollout
from transformer_attention.plotting.html import MIN_WEIGHT, attention_html, read_attention_data, save_attention_html
from transformer_attention.tasks.predict import attention_formats, main

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


def inlined_data(page: str) -> dict:
    """The JSON of the page's data element, found the way a browser finds it (not with the module's helper)."""
    (data,) = [text for attrs, text in Scripts(page).scripts if attrs.get("id") == "attention-data"]
    return json.loads(data)


# ---- the file ---------------------------------------------------------------------------------------
def test_the_page_loads_nothing_from_the_network(prediction):
    page = attention_html(HOSTILE, [torch.rand(2, 6, 6).softmax(-1)], title="see http://example.com//x", caption="//")
    page += attention_html(prediction.tokens, prediction.attentions)
    rest = page.replace(SVG_NS, "")
    assert "//" not in rest, "a URL (or protocol-relative //) in the page"
    assert not re.search(r"\b(src|href)\s*=|<link\b|@import|url\(", rest, flags=re.IGNORECASE)  # nothing to fetch
    assert [bool(attrs.get("src")) for attrs, _ in Scripts(page).scripts] == [False] * 4  # 2 pages x 2 inline


def test_the_inlined_data_is_the_models_attention_for_every_layer_and_head(prediction):
    page = attention_html(prediction.tokens, prediction.attentions)
    data = inlined_data(page)
    assert data == read_attention_data(page)
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


@pytest.mark.parametrize("choice", ["html", "both"])
def test_predict_writes_one_page_per_text(tmp_path: Path, choice: str):
    ckpt = save_like_lightning(tiny_module(), tmp_path / "model.ckpt")
    texts = [TEXT, "a dull film"]
    cfg = OmegaConf.create(
        {"ckpt_path": str(ckpt), "texts": texts, "save_attention": choice, "batch_size": 8, "paths": {}}
    )
    cfg.paths.output_dir = str(tmp_path / "run")
    preds = main(cfg)
    records = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    for i, (record, pred) in enumerate(zip(records, preds, strict=True)):
        page = Path(record["attention_html"])
        assert page == tmp_path / "run" / "attention" / f"{i:04d}.html"
        data = inlined_data(page.read_text(encoding="utf-8"))
        assert data["tokens"] == pred.tokens
        np.testing.assert_allclose(np.array(data["layers"][1]), pred.attentions[1].numpy(), atol=1e-4)
        assert ("attention_png" in record) == (choice == "both")


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
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def find_chromium() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


class Chromium:
    """A headless Chromium driven over `--remote-debugging-pipe` (the DevTools protocol as NUL-separated JSON on
    file descriptors 3 and 4): no websocket, no package."""

    def __init__(self, exe: str, profile: Path) -> None:
        to_browser, self._commands = os.pipe()  # the browser reads commands on its fd 3
        self._replies, from_browser = os.pipe()  # and writes replies on its fd 4

        def wire() -> None:  # in the child, before exec: the pipes become fds 3 and 4
            os.dup2(to_browser, 3)
            os.dup2(from_browser, 4)

        args = ["--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run"]
        self.proc = subprocess.Popen(
            [exe, *args, f"--user-data-dir={profile}", "--window-size=1000,1400", "about:blank"],
            preexec_fn=wire,
            close_fds=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser)
        os.close(from_browser)
        self._buffer, self._next_id, self.session = b"", 0, None

    def send(self, method: str, timeout: float = 30.0, **params) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if self.session:
            message["sessionId"] = self.session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while b"\0" not in self._buffer:
                chunk = os.read(self._replies, 1 << 16)
                if not chunk:
                    raise RuntimeError(f"chromium closed the pipe (exit code {self.proc.poll()})")
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
        raise TimeoutError(f"no reply to {method} in {timeout} s")

    def open(self, url: str) -> None:
        target = self.send("Target.createTarget", url=url)["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.wait_for("document.readyState === 'complete' && document.querySelectorAll('#lines').length === 1")

    def wait_for(self, condition: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.js(condition):
            if time.monotonic() > deadline:
                raise TimeoutError(f"still false after {timeout} s: {condition}")
            time.sleep(0.05)

    def js(self, expression: str):
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def centre(self, selector: str) -> tuple[float, float]:
        x, y = self.js(
            f"(function () {{ var e = document.querySelector({json.dumps(selector)}); e.scrollIntoView({{block: "
            "'center'}); var r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        return x, y

    def move_to(self, selector: str) -> None:
        x, y = self.centre(selector)
        self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

    def click(self, selector: str) -> None:
        x, y = self.centre(selector)
        self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def lines(self) -> list[dict]:
        """The lines drawn now: series, query, key, weight and stroke width of each."""
        return self.js(
            "Array.prototype.map.call(document.querySelectorAll('#lines line'), function (l) { return {series: "
            "l.getAttribute('data-series'), query: Number(l.getAttribute('data-query')), key: "
            "Number(l.getAttribute('data-key')), weight: Number(l.getAttribute('data-weight')), width: "
            "Number(l.getAttribute('stroke-width'))}; })"
        )

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._commands)
        os.close(self._replies)


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


def assert_drawn(drawn: list[dict], expected: dict[tuple[str, int], float], query: int) -> None:
    assert {line["query"] for line in drawn} == {query}
    got = {(line["series"], line["key"]): line for line in drawn}
    near_threshold = {k for k, w in expected.items() if abs(w - MIN_WEIGHT) < 1e-4}
    assert set(got) - near_threshold == set(expected) - near_threshold
    for k, w in expected.items():
        if k in got:
            assert got[k]["weight"] == pytest.approx(w, abs=1e-4)
            assert got[k]["width"] == pytest.approx(9 * w, abs=1e-3)  # thickness = weight (MAX_WIDTH 9 px)


@pytest.mark.slow
def test_the_page_draws_the_hovered_tokens_row_in_a_browser(browser, prediction, tmp_path: Path):
    tokens, attentions = prediction.tokens, prediction.attentions
    page = save_attention_html(tmp_path / "view.html", tokens, attentions, title="<script>x</script>")
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
