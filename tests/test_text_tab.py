"""TensorBoard's TEXT tab: the faithfulness table fits a card without wrapping a number or a header (checked in
headless Chromium on the HTML TensorBoard makes of it), and keeps every method's averages."""

from __future__ import annotations

import numpy as np
import pytest
from chromium import Chromium, find_chromium
from tensorboard.plugin_util import markdown_to_safe_html

from transformer_attention.analysis.report import Faithfulness
from transformer_attention.analysis.run import Analysis
from transformer_attention.analysis.write import MINUS, NBSP, TEXT_COLUMNS, text_table

METHODS = ["integrated_gradients", "leave_one_out", "grad_x_input", "rollout", "attention_norm_rollout",
           "attention_norm", "attention", "random"]  # fmt: skip
CARD_PX = 600  # narrower than the TEXT tab's card in a 1600-pixel window


def report(tau: bool = True) -> Faithfulness:
    rng = np.random.default_rng(0)
    scores, sem = {}, {}
    for i, method in enumerate(METHODS):
        s = {
            f"{m}@{k}": float(rng.uniform(-0.06, 0.5))
            for m in ("comprehensiveness", "sufficiency")
            for k in (10, 20, 50)
        }
        s |= {"comprehensiveness": 0.46 - i / 20, "sufficiency": -0.054 + i / 50, "aopc": 0.43 - i / 30}
        s |= {"naopc": 0.8 - i / 10, "auprc": 0.95 - i / 20, "token_f1": 0.9 - i / 20, "seconds_per_text": 0.0123}
        s |= {"eraser_comprehensiveness": 0.3 - i / 40, "eraser_sufficiency": 0.1 + i / 50}
        if tau:
            s |= {"tau_leave_one_out": 0.31 - i / 40, "tau_integrated_gradients": -0.05 + i / 100}
        scores[method], sem[method] = s, dict.fromkeys(s, 0.004)
    return Faithfulness("validation", 100, "mask", [10, 20, 50], 0.01, scores=scores, sem=sem)


def test_the_text_table_has_each_measure_once_every_method_and_no_break_inside_a_cell():
    found = report()
    lines = text_table(Analysis(faithfulness=found)).splitlines()
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    assert head == ["method", *(h.replace(" ", NBSP) for h in TEXT_COLUMNS.values()), "s/text"]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert [r[0] for r in rows] == sorted(METHODS, key=lambda m: -found.scores[m]["aopc"])  # best AOPC first
    assert rows[0][2] == f"{MINUS}0.054"  # sufficiency of the best, a minus sign no line breaks after
    for row in rows:
        assert all(" " not in cell and "-" not in cell for cell in row[1:])
        got = [float(c.replace(MINUS, "-")) for c in row[1:-1]]
        expected = [found.scores[row[0]][m] for m in TEXT_COLUMNS]
        np.testing.assert_allclose(got, expected, atol=5e-4)
    without = text_table(Analysis(faithfulness=report(tau=False))).splitlines()[0]
    assert "LOO" not in without and "AOPC" in without  # a measure not taken has no column
    assert text_table(Analysis()) == ""


@pytest.fixture(scope="module")
def chrome(tmp_path_factory):
    exe = find_chromium()
    if exe is None:
        pytest.skip("no Chromium or Chrome on PATH")
    browser = Chromium(exe, tmp_path_factory.mktemp("profile"))
    yield browser
    browser.close()


def lines_per_cell(chrome: Chromium, markdown: str, folder) -> list[float]:
    """How many lines each header and cell of `markdown`'s table takes in a card `CARD_PX` wide, as TensorBoard makes
    it HTML (its own sanitised markdown)."""
    page = folder / "table.html"
    page.write_text(f"<html><body style='font: 14px Roboto, sans-serif; margin: 0'><div style='width: {CARD_PX}px'>"
                    f"{markdown_to_safe_html(markdown)}</div></body></html>", encoding="utf-8")  # fmt: skip
    chrome.open(page.as_uri(), ready="document.querySelectorAll('td').length > 0")
    return chrome.js(
        "Array.from(document.querySelectorAll('th, td'), function (c) { var r = document.createRange(); "
        "r.selectNodeContents(c); var lines = new Set(Array.from(r.getClientRects(), function (b) { "
        "return Math.round(b.top); })); return lines.size; })"
    )


def test_no_number_or_header_wraps_in_a_card(chrome, tmp_path):
    found = report()
    assert max(lines_per_cell(chrome, text_table(Analysis(faithfulness=found)), tmp_path)) == 1
    assert max(lines_per_cell(chrome, "\n".join(found.table()), tmp_path)) > 1  # the file's wide table would wrap
