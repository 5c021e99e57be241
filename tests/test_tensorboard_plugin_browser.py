"""The ATTENTION tab in a real TensorBoard (started by the test on a free port, its default loader) and headless
Chromium: the tab is listed as active, its frame loads the page, hovering a token changes the readout, the text
view opens on DecompX, the step control keeps the view, save SVG and save PNG download files, a run without
pages says so."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from xml.etree import ElementTree

import pytest
from chromium import Chromium, find_chromium
from test_tensorboard_plugin import TAG, page_args
from torch.utils.tensorboard import SummaryWriter

from transformer_attention.callbacks.page_summary import log_page
from transformer_attention.plotting.page_data import page_data
from transformer_attention.tensorboard_plugin.summary import PLUGIN_NAME

pytestmark = pytest.mark.slow
STEPS = (0, 3, 6)
TAB = "(document.querySelector('iframe') || {}).contentDocument"  # the tab's frame (index.js)
PAGE = f"(() => {{ const d = {TAB}, f = d && d.getElementById('page'); return f && f.contentDocument; }})()"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tensorboard(tmp_path_factory):
    """A TensorBoard on a free port over a run with a page at three steps and a run with none: its URL."""
    logdir = tmp_path_factory.mktemp("logdir")
    args = page_args(title="example_0")
    writer = SummaryWriter(str(logdir / "good"))
    for step in STEPS:
        log_page(writer, TAG, page_data(**args, caption=f"at step {step}"), step)
    writer.close()
    empty = SummaryWriter(str(logdir / "empty"))
    empty.add_scalar("val/acc", 0.5, 0)
    empty.close()
    port = free_port()
    command = [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--port", str(port)]
    server = subprocess.Popen([*command, "--host", "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            listing = json.load(urllib.request.urlopen(f"{url}/data/plugins_listing", timeout=5))
            runs = json.load(urllib.request.urlopen(f"{url}/data/plugin/{PLUGIN_NAME}/runs", timeout=5))["runs"]
            if listing[PLUGIN_NAME]["enabled"] and {r["run"] for r in runs} == {"good", "empty"}:
                break
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            pytest.fail(f"TensorBoard did not serve the tab: {server.communicate()[1].decode()[-2000:]}")
        time.sleep(0.5)
    yield url
    server.terminate()
    server.wait(timeout=30)


@pytest.fixture
def browser(tmp_path: Path):
    exe = find_chromium()
    if exe is None:
        pytest.skip("no Chromium or Chrome on PATH (the test drives DevTools): apt-get install chromium")
    chrome = Chromium(exe, tmp_path / "profile")
    yield chrome
    chrome.close()


def in_page(expression: str) -> str:
    """`expression` evaluated with `doc`, the document of the page inside the tab (null before it loads)."""
    return f"(() => {{ const doc = {PAGE}; return doc ? ({expression}) : null; }})()"


def point_at(browser: Chromium, selector: str, click: bool = False) -> None:
    """A real mouse move (and click) on `selector` in the page, two frames down: its centre on the screen."""
    x, y = browser.js(
        f"(() => {{ const tab = document.querySelector('iframe'), page = {TAB}.getElementById('page'); "
        f"const e = {PAGE}.querySelector({json.dumps(selector)}); e.scrollIntoView({{block: 'center'}}); "
        "const r = e.getBoundingClientRect(), a = tab.getBoundingClientRect(); "
        "const b = page.getBoundingClientRect(), x = a.x + tab.clientLeft + b.x, y = a.y + tab.clientTop + b.y; "
        "return [x + r.x + r.width / 2, y + r.y + r.height / 2]; })()"
    )
    browser.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
    for kind in ("mousePressed", "mouseReleased") if click else ():
        browser.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)


def downloaded(folder: Path, suffix: str) -> Path:
    """The one file of `suffix` the browser saved in `folder` (waited for; a download in progress has another)."""
    deadline = time.monotonic() + 20
    while not (saved := list(folder.glob(f"*{suffix}"))) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(saved) == 1, saved
    return saved[0]


def choose(browser: Chromium, control: str, value: object) -> None:
    """Set the tab's `control` (its id) to `value`, as a user's choice does (a change event)."""
    set_value = f"c.value = {json.dumps(value)}; c.dispatchEvent(new Event('change'))"
    browser.js(f"(() => {{ const c = {TAB}.getElementById('{control}'); {set_value}; }})()")


def test_the_tab_shows_each_logged_page_interactive(tensorboard: str, browser: Chromium, tmp_path: Path):
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    session, browser.session = browser.session, None  # a browser-wide command
    browser.send("Browser.setDownloadBehavior", behavior="allow", downloadPath=str(downloads))
    browser.session = session
    browser.open(f"{tensorboard}/#{PLUGIN_NAME}", ready=in_page("!!doc.querySelector('g.token.left')"), timeout=60)
    assert browser.js(f"{TAB}.getElementById('run').value") == "good"
    assert browser.js(f"{TAB}.getElementById('step-text').textContent") == "step 6 (3 of 3)"  # the latest first
    assert browser.js(in_page("doc.querySelector('.caption').textContent")) == "at step 6"

    before = browser.js(in_page("doc.getElementById('readout').textContent"))
    point_at(browser, "g.token.left[data-index='2'] rect")
    browser.wait_for(in_page(f"doc.getElementById('readout').textContent !== {json.dumps(before)}"))
    assert "\u201cbad\u201d" in browser.js(in_page("doc.getElementById('readout').textContent"))

    point_at(browser, "#mode-model", click=True)  # every layer and head: 2 x 2 maps and the rollout
    browser.wait_for(in_page("!doc.getElementById('model-view').hidden"))
    assert browser.js(in_page("doc.querySelectorAll('#grid canvas').length")) >= 4
    point_at(browser, "#mode-words", click=True)  # one attribution per word of the text tab
    browser.wait_for(in_page("!doc.getElementById('words-view').hidden"))
    assert browser.js(in_page("doc.getElementById('words').children.length")) > 0
    point_at(browser, "#mode-text", click=True)
    browser.wait_for(in_page("!doc.getElementById('text-view').hidden"))
    assert browser.js(in_page("doc.getElementById('text-series').value")) == "method-decompx"

    choose(browser, "step", 0)
    browser.wait_for(in_page("doc.querySelector('.caption')?.textContent === 'at step 0'"), timeout=20)
    browser.wait_for(in_page("!!doc.getElementById('text-series')?.value"))
    assert browser.js(in_page("doc.getElementById('text-view').hidden")) is False  # the view the last step showed
    assert browser.js(in_page("doc.getElementById('text-series').value")) == "method-decompx"

    point_at(browser, "#export", click=True)
    svg = downloaded(downloads, ".svg")
    assert svg.name == "example_0 - text view.svg"
    assert ElementTree.parse(svg).getroot().tag == "{http://www.w3.org/2000/svg}svg"
    point_at(browser, "#export-png", click=True)
    assert downloaded(downloads, ".png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")

    choose(browser, "run", "empty")
    hint = browser.js(f"[{TAB}.getElementById('hint').hidden, {TAB}.getElementById('hint').textContent]")
    assert hint[0] is False and hint[1].startswith("No attention pages in empty") and "\n" not in hint[1]
    assert browser.js(f"{TAB}.getElementById('page').hidden") is True
