"""The user guide's TensorBoard screenshots (docs/tensorboard_*.png), taken again: a small sweep (or `--logdir`),
TensorBoard on a free port, and a headless Chromium driven over DevTools in real time (`chromium --screenshot
--virtual-time-budget` leaves TIME SERIES' charts empty: they draw in a web worker that virtual time stalls).
With `--page CKPT`, the interactive page's instead (docs/html_*.png): predict.py's page of one Rotten Tomatoes
test review (PAGE_TEXT) by that checkpoint, each tab at 1200 x 900.

    python docs/screenshots.py [--logdir DIR] [--real RUN]
    python docs/screenshots.py --page outputs/train/runs/<time>/checkpoints/last.ckpt

`--real RUN` adds a training run on real reviews (e.g. the Rotten Tomatoes recipe's folder) beside the sweep:
the IMAGES pictures then show its first example, a real review, whose maps and text the toy set's short
sentences do not stand for.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(ROOT / "tests"), str(DOCS)]
from chromium import Chromium, find_chromium  # noqa: E402
from pictures import stamp  # noqa: E402  (docs/pictures.py: each picture's sources, hashed as it is taken)

SWEEP = ["train.py", "-m", "model.num_heads=2,4", "trainer.max_epochs=4"]
# every element of the page, shadow roots included (SCALARS, IMAGES and HPARAMS are Polymer), and those
# that show just `text` on screen now
DEEP = (
    "function deep(root) { var out = []; root.querySelectorAll('*').forEach(function (e) { out.push(e); "
    "if (e.shadowRoot) out = out.concat(deep(e.shadowRoot)); }); return out; } "
    "function shown(text) { return deep(document).filter(function (e) { return e.textContent.trim() === text && "
    "e.getBoundingClientRect().width > 0; }); } "
)
TRAIN = ["val/acc", "val/loss"]  # TIME SERIES' first screen: the val group (~test, ~train and the rest sort after)
IMAGES = {"tags": "example_3/", "runs": "num_heads=4"}  # the toy set's longest example, in one run: 4 heads


def sweep(log_dir: Path) -> None:
    """The 2-job sweep the pictures show, its logs under `log_dir` (about a minute on 2 cores)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
    subprocess.run([sys.executable, *SWEEP, f"paths.log_dir={log_dir}"], cwd=ROOT, env=env, check=True)


def tensorboard(stack: ExitStack, log_dir: Path) -> str:
    """Start TensorBoard on a free port, stopped when `stack` closes; its URL once it serves every tab we take."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # started beside the folder, so the logdir it shows is the folder's name (`outputs`), not a temporary path
    cmd = [sys.executable, "-m", "tensorboard.main", f"--logdir={log_dir.name}", "--host=127.0.0.1", f"--port={port}"]
    proc = subprocess.Popen(cmd, cwd=log_dir.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stack.callback(proc.wait, timeout=10)  # callbacks run last first: terminate, then wait
    stack.callback(proc.terminate)
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/data/plugins_listing", timeout=5) as reply:
                plugins = json.load(reply)
            if all(plugins.get(name, {}).get("enabled") for name in ("scalars", "images", "hparams")):
                return url
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"tensorboard exited with {proc.returncode}: {' '.join(cmd)}") from None
        time.sleep(1)
    raise TimeoutError(f"tensorboard served no scalars, images and hparams from {log_dir} in 120 s")


def type_into(chrome: Chromium, label: str, text: str) -> None:
    """Type `text` into the filter box whose label says `label`, as a user would."""
    box = f"deep(document).find(e => e.tagName === 'PAPER-INPUT' && (e.label || '').includes('{label}'))"
    chrome.wait_for(DEEP + f"!!{box}", 60)
    chrome.js(DEEP + f"{box}.focus()")
    chrome.send("Input.insertText", text=text)
    chrome.js(DEEP + "deep(document).find(e => e.matches('input:focus')).blur()")  # no caret in the picture


def metrics_fit(chrome: Chromium) -> None:
    """HPARAMS as it opens: wait for the table, then say whether its first metric column (test/acc) is in view."""
    fits = DEEP + (
        "deep(document).filter(e => e.matches('paper-checkbox.metric-checkbox')).slice(0, 1).every(m => "
        "shown(m.textContent.trim()).some(h => h.matches('.table-header') && h.getBoundingClientRect().right "
        "<= innerWidth))"
    )
    chrome.wait_for(DEEP + "shown('Trial ID').length > 0", 60)
    time.sleep(1)
    print(f"HPARAMS at its defaults: the first metric column {'fits' if chrome.js(fits) else 'does NOT fit'}")


def shoot(chrome: Chromium, url: str, out: Path, ready: list[str], act=None, settle: float = 3.0) -> None:
    """Open `url` at 1600 x 1000, wait until every text in `ready` is on screen (after `act`, if any), give the
    charts `settle` real seconds to draw, and save the page as `out`."""
    chrome.open("about:blank", ready="true")  # a new tab, sized before the page lays out
    chrome.send("Emulation.setDeviceMetricsOverride", width=1600, height=1000, deviceScaleFactor=1, mobile=False)
    chrome.send("Page.navigate", url=url)
    chrome.wait_for(DEEP + "document.readyState === 'complete' && !!document.querySelector('tb-webapp')", 30)
    if act:
        act(chrome)
    loaded = "deep(document).every(e => e.tagName !== 'IMG' || e.complete)"
    chrome.wait_for(DEEP + f"{json.dumps(ready)}.every(t => shown(t).length > 0) && {loaded}", 60)
    time.sleep(settle)
    save(chrome, out)
    chrome.send("Page.close")


def save(chrome: Chromium, out: Path) -> None:
    """The tab as `out`; a picture of the guide's is stamped with its sources as they are now (docs/pictures.py)."""
    out.write_bytes(base64.b64decode(chrome.send("Page.captureScreenshot", format="png")["data"]))
    if out.parent.resolve() == DOCS:
        stamp([out.name])
    print(f"wrote {out}")


def images(chrome: Chromium) -> None:
    """IMAGES: one example of one run, its cards side by side at their tops (map, rollout, text), as it opens."""
    type_into(chrome, "tags", IMAGES["tags"])
    type_into(chrome, "runs", IMAGES["runs"])
    tag = json.dumps(f"~attention/{IMAGES['tags']}layer_0")
    first = f"deep(document).find(e => e.tagName === 'IMG' && e.getRootNode().host.tag === {tag} && e.offsetWidth)"
    chrome.wait_for(DEEP + f"!!{first} && {first}.complete && {first}.naturalHeight > 0", 60)
    time.sleep(2)  # the loader shows another step's image first, then this one


PAGE_TEXT = (  # a Rotten Tomatoes test review (test.parquet, row 788, negative): 49 words, long for the set
    "the first question to ask about bad company is why anthony hopkins is in it . we assume he had a bad run in "
    "the market or a costly divorce , because there is no earthly reason other than money why this distinguished "
    "actor would stoop so low ."
)
PAGE_SHOTS = {  # picture -> the page's hash: the tab and what it opens on (uniform: this model's heads are diffuse)
    "html_view.png": "view=head&scale=uniform&heads=2&token=7",
    "html_model_view.png": "view=model&scale=uniform",
    "html_text.png": "view=text&scale=uniform",
    "html_words.png": "view=words",
}


def page_shots(chrome: Chromium, ckpt: Path, out: Path, scratch: Path) -> None:
    """predict.py's page of PAGE_TEXT by `ckpt`, and a picture of each tab (PAGE_SHOTS) at 1200 x 900."""
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
    (texts := scratch / "review.txt").write_text(PAGE_TEXT + "\n", encoding="utf-8")
    run = [sys.executable, "predict.py", f"ckpt_path={ckpt.resolve()}", f"text_file={texts}", "save_attention=html"]
    subprocess.run([*run, f"paths.log_dir={scratch / 'outputs'}"], cwd=ROOT, env=env, check=True)
    (page,) = (scratch / "outputs").rglob("attention/0000.html")
    for name, view in PAGE_SHOTS.items():
        chrome.open("about:blank", ready="true")
        chrome.send("Emulation.setDeviceMetricsOverride", width=1200, height=900, deviceScaleFactor=1, mobile=False)
        chrome.send("Page.navigate", url=f"{page.as_uri()}#{view}")
        chrome.wait_for("document.readyState === 'complete' && !!document.querySelector('#lines')", 30)
        save(chrome, out / name)
        chrome.send("Page.close")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logdir", type=Path, help="TensorBoard logs to show (default: run a 2-job sweep first)")
    parser.add_argument("--out", type=Path, default=DOCS, help="where the PNGs go (default: docs/)")
    parser.add_argument("--page", type=Path, metavar="CKPT", help="the page's pictures instead, by this checkpoint")
    parser.add_argument("--real", type=Path, help="a training run on real reviews, shown beside the sweep")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a kill too stops TensorBoard and the browser
    exe = find_chromium()
    if exe is None:
        sys.exit("no Chromium or Chrome on PATH: apt-get install chromium")
    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="screenshots-")))
        if args.page:
            chrome = Chromium(exe, scratch / "profile")
            stack.callback(chrome.close)
            return page_shots(chrome, args.page, args.out, scratch)
        log_dir = args.logdir or scratch / "outputs"
        if args.real:  # beside the sweep, under the name TensorBoard gives it: its folder's; copied (checkpoints
            # left out) before the sweep, whose jobs then count it among the runs whose differing settings HPARAMS ticks
            target = log_dir / "train" / "runs" / args.real.name
            shutil.copytree(args.real, target, ignore=shutil.ignore_patterns("checkpoints"))
            IMAGES.update(tags="example_0/", runs=args.real.name)
        if args.logdir is None:
            sweep(log_dir)
        url = tensorboard(stack, log_dir)
        chrome = Chromium(exe, scratch / "profile")
        stack.callback(chrome.close)
        shoot(chrome, f"{url}/", args.out / "tensorboard_timeseries.png", TRAIN, settle=6)
        shoot(chrome, f"{url}/#scalars", args.out / "tensorboard_scalars.png", TRAIN)
        shoot(chrome, f"{url}/#hparams", args.out / "tensorboard_hparams.png", ["Trial ID"], act=metrics_fit)
        tags = [f"~attention/{IMAGES['tags']}{kind}" for kind in ("layer_0", "text")]  # a 1-layer run has no rollout
        shoot(chrome, f"{url}/#images", args.out / "tensorboard_images.png", tags, act=images)
        # the ATTENTION tab: its frame (and the page's inside it) draws after TensorBoard's own page is ready
        shoot(chrome, f"{url}/#attention", args.out / "tensorboard_attention.png", ["Attention"], settle=10)


if __name__ == "__main__":
    main()
