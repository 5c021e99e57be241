"""HPARAMS as a reader opens it (`tensorboard --logdir outputs/train`, TensorBoard at its defaults, a 1600 px
window) over two single runs and a sweep: the settings that differ between them checked, test/acc shown whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from chromium import Chromium, find_chromium
from conftest import TINY, run_entry
from tensorboard_server import fetch, tensorboard

pytestmark = pytest.mark.slow

QUIET = ["callbacks.model_analysis=null", "callbacks.attention_maps=null"]  # TINY: d_model 16, 2 heads, 1 layer
SECOND = ["model.d_model=32", "model.num_layers=2", "model.pooling=mean", "trainer.max_epochs=2"]
SWEPT = "model.num_heads=1,4"
DIFFERING = {"model.d_model", "model.num_layers", "model.pooling", "trainer.max_epochs", "model.num_heads"}
RUNS = 4  # two single runs, two jobs
# every element, through the shadow roots of TensorBoard's Polymer dashboards
DEEP = (
    "(function all(root, out) { root.querySelectorAll('*').forEach(function (e) { out.push(e); "
    "if (e.shadowRoot) all(e.shadowRoot, out); }); return out; })(document, [])"
)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> Path:
    """`outputs/` after `python train.py` (TINY), one with SECOND's changes, and a sweep of `SWEPT`."""
    if find_chromium() is None:  # before the runs it would train for nothing
        pytest.skip("no Chromium or Chrome on PATH (the test drives it over DevTools): apt-get install chromium")
    log_dir = tmp_path_factory.mktemp("hparams") / "outputs"
    given = [*TINY, *QUIET, f"paths.log_dir={log_dir}"]
    run_entry("train.py", *given)
    run_entry("train.py", *given, *SECOND)
    run_entry("train.py", "-m", *given, SWEPT)
    return log_dir


def served_groups(base: str) -> list[dict]:
    request = {
        "experimentName": "",
        "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"],
        "colParams": [],
        "startIndex": 0,
        "sliceSize": 100,
    }
    return json.loads(fetch(f"{base}/data/plugin/hparams/session_groups", request))["sessionGroups"]


def test_hparams_checks_the_settings_that_differ_and_shows_test_acc_at_1600_px(outputs, tmp_path):
    exe = find_chromium()
    if exe is None:
        pytest.skip("no Chromium or Chrome on PATH (the test drives it over DevTools): apt-get install chromium")
    served = tmp_path / "tensorboard.log"
    with tensorboard(outputs / "train", served, lambda b: len(served_groups(b)) == RUNS) as base:
        groups = served_groups(base)
        values: dict[str, set[str]] = {}
        for group in groups:
            for key, value in group["hparams"].items():
                values.setdefault(key, set()).add(str(value))
        differing = {key for key, seen in values.items() if len(seen) > 1}  # the oracle: what the runs differ in
        assert differing == DIFFERING
        browser = Chromium(exe, tmp_path / "profile")
        try:
            browser.open(f"{base}/#hparams", ready="document.readyState === 'complete'", timeout=30)
            browser.send(
                "Emulation.setDeviceMetricsOverride", width=1600, height=1000, deviceScaleFactor=1, mobile=False
            )
            boxes = f"{DEEP}.filter(function (e) {{ return e.tagName === 'PAPER-CHECKBOX'; }})"
            browser.wait_for(f"{boxes}.some(function (e) {{ return e.textContent.trim() === 'test/acc'; }})", 30)
            ticked = browser.js(
                f"{boxes}.filter(function (e) {{ return e.checked; }}).map(function (e) "
                "{ return e.textContent.trim(); })"
            )
            checked = [name for name in ticked if name in values]
            assert set(checked) == differing  # TensorBoard checks five settings: here, the five that differ

            header = (
                f"{DEEP}.filter(function (e) {{ return e.classList.contains('table-header') && "
                "e.textContent.trim() === 'test/acc'; })"
            )
            browser.wait_for(f"{header}.length === 1", 30)
            box, grid, clipped = browser.js(
                f"(function () {{ var h = {header}[0], g = {DEEP}.filter(function (e) {{ return e.tagName === "
                "'VAADIN-GRID'; })[0], r = h.getBoundingClientRect(), q = g.getBoundingClientRect(); return "
                "[[r.left, r.right], [q.left, q.right], h.scrollWidth > h.clientWidth]; })()"
            )
        finally:
            browser.close()
    assert grid[0] <= box[0] < box[1] <= min(grid[1], 1600) and not clipped  # whole, in view, not "test/a…"
