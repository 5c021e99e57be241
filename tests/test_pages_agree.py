"""A training run's page and predict.py's page of the same text tell one story: the same tabs, the map switch, the
text and words tabs opening on the same method, the same words and labels; the training page computes the quick
methods only, and says what predict.py's page adds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from chromium import Chromium, find_chromium
from omegaconf import OmegaConf
from test_checkpoint import save_like_lightning, tiny_module

from transformer_attention.analysis.attributions import attribute
from transformer_attention.analysis.methods import TEXT_METHOD, labels
from transformer_attention.analysis.pages import PAGE_PASSES, page_methods, quick_methods
from transformer_attention.callbacks.attention_maps import AttentionMapLogger
from transformer_attention.callbacks.examples import Logged
from transformer_attention.data import load_tokenizer
from transformer_attention.inference import infer
from transformer_attention.plotting.html import read_attention_data
from transformer_attention.tasks.predict import main

TEXT = "the acting was not bad at all"


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    """The page predict.py writes of TEXT and the one a training run's callback writes of it, same model."""
    tmp = tmp_path_factory.mktemp("pages")
    module = tiny_module()
    ckpt = save_like_lightning(module, tmp / "model.ckpt")
    cfg = OmegaConf.create({"ckpt_path": str(ckpt), "text": TEXT, "save_attention": "html", "batch_size": 8})
    cfg.paths = {"output_dir": str(tmp / "predict")}
    (pred,) = main(cfg)
    tok = load_tokenizer(module.tokenizer_json)
    ids = [tok.token_to_id(t) for t in pred.tokens]
    (row,) = infer(module, [ids], need_weights=True)
    target = int(row.probabilities.argmax())
    maps = AttentionMapLogger(num_examples=0, texts=[TEXT])
    maps.last = [
        Logged("text_0", pred.tokens, row.attentions, "caption", ids=ids, predicted=target, class_name=pred.label)
    ]
    (trained,) = maps.write_pages(tmp / "train", "cls", module)
    return {"predict": tmp / "predict" / "attention" / "0000.html", "train": trained, "ids": ids, "target": target}


def test_both_pages_carry_the_same_views_and_open_on_the_same_method(pages):
    predicted, trained = (read_attention_data(pages[k].read_text(encoding="utf-8")) for k in ("predict", "train"))
    for data in (predicted, trained):
        assert "norm" in data["kinds"] and data["attributions"]  # the map switch and the words tab
        assert data["text"]["default"] == f"method-{TEXT_METHOD}"  # the text tab opens on the text method
        assert data["names"]["methods"] == labels()
    assert trained["text"]["words"] == predicted["text"]["words"]
    assert trained["text"]["target"] == predicted["caption"].split(" (")[0]  # the class predicted, named
    np.testing.assert_allclose(trained["kinds"]["norm"]["lengths"], predicted["kinds"]["norm"]["lengths"], atol=1e-5)
    quick = quick_methods(len(pages["ids"]), 2)  # the training page: the methods of a few passes, DecompX among them
    assert (
        list(trained["attributions"]) == quick and TEXT_METHOD in quick and set(quick) < set(predicted["attributions"])
    )
    assert trained["names"]["notes"] == page_methods()["method_notes"]  # each method's line, from the registry
    assert "Integrated Gradients" in trained["words_note"] and f"at most {PAGE_PASSES} passes" in trained["words_note"]
    module = tiny_module()
    (found,), _ = attribute(module.net, [pages["ids"]], [pages["target"]], mask_id=None, methods=[TEXT_METHOD])
    for data in (trained, predicted):  # the same numbers for the method both open on
        np.testing.assert_allclose(data["attributions"][TEXT_METHOD], found[TEXT_METHOD], rtol=1e-3, atol=1e-6)


@pytest.mark.slow
def test_in_a_browser_both_pages_show_the_same_tabs_and_open_on_the_same_method(pages, tmp_path: Path):
    exe = find_chromium()
    if exe is None:
        pytest.skip("no Chromium or Chrome on PATH: the browser test needs one")
    browser = Chromium(exe, tmp_path / "profile")
    seen = {}
    try:
        for name in ("predict", "train"):
            browser.open(pages[name].as_uri())
            tabs = browser.js("Array.from(document.querySelectorAll('#tabs .tab'), t => [t.id, t.hidden])")
            switch = browser.js("document.getElementById('kind-switch').hidden")
            browser.click("#mode-text")
            series = browser.js("document.getElementById('text-series').value")
            browser.click("#mode-words")
            method = browser.js("document.querySelector('#methods input:checked').id")
            note = browser.js("document.getElementById('method-note').textContent")
            seen[name] = (tabs, switch, series, method, note)
    finally:
        browser.close()
    assert seen["train"][:4] == seen["predict"][:4]
    tabs, switch, series, method, note = seen["train"]
    assert all(not hidden for _, hidden in tabs) and len(tabs) == 4 and switch is False
    assert series == f"method-{TEXT_METHOD}" and method == f"method-{TEXT_METHOD}"
    assert note.startswith(labels()[TEXT_METHOD] + ": ")  # the registry's line of the method shown
