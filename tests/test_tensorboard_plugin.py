"""The ATTENTION tab (tensorboard_plugin/), in process: TensorBoard's own WSGI app with the plugin, over event
files written by callbacks/page_summary.py, read through the data provider, queried with werkzeug's test client."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from lightning.pytorch.loggers import TensorBoardLogger
from tensorboard.backend.application import TensorBoardWSGI
from tensorboard.backend.event_processing.data_provider import MultiplexerDataProvider
from tensorboard.backend.event_processing.plugin_event_multiplexer import EventMultiplexer
from tensorboard.plugins import base_plugin
from test_checkpoint import tiny_module
from torch.utils.tensorboard import SummaryWriter
from werkzeug.test import Client

from transformer_attention.analysis.methods import labels, signed
from transformer_attention.analysis.run import explain_rows
from transformer_attention.callbacks.page_summary import log_page
from transformer_attention.data import load_tokenizer
from transformer_attention.inference import predict
from transformer_attention.plotting.html import MODULES, attention_html, read_attention_data
from transformer_attention.plotting.page_data import page_data
from transformer_attention.tensorboard_plugin import page as page_module
from transformer_attention.tensorboard_plugin.loader import AttentionLoader
from transformer_attention.tensorboard_plugin.summary import PLUGIN_NAME, PageError, page_summary, read_page

TEXT = "not bad at all, <b>really</b>"
TAG = "attention/example_0"
ROUTE = f"/data/plugin/{PLUGIN_NAME}"
STEPS = (0, 5, 10)


def page_args(text: str = TEXT, **more) -> dict:
    """The arguments of a tiny model's page of `text`, its DecompX attributions included."""
    module = tiny_module()
    (p,) = predict(module, [text], need_weights=True)
    tok = load_tokenizer(module.tokenizer_json)
    rows = [[tok.token_to_id(t) for t in p.tokens]]
    explained, _ = explain_rows(module.net, rows, tok, {"methods": ["decompx"]})
    assert explained[0] is not None
    decompx = {m: a.tolist() for m, a in explained[0].attributions.items()}
    args = dict(tokens=p.tokens, attentions=p.attentions, attributions=decompx, text_method="decompx")
    args.update(method_labels=labels(), method_signed=signed(), **more)
    return args


def write_run(folder: Path, summaries: list[tuple[object, int]]) -> None:
    writer = SummaryWriter(str(folder))
    for summary, step in summaries:
        writer.file_writer.add_summary(summary, global_step=step)
    writer.close()


@pytest.fixture(scope="module")
def logged(tmp_path_factory) -> tuple[Path, dict]:
    """A logdir: `good` (a page at three steps, through Lightning's TensorBoardLogger), `empty` (a scalar only),
    `broken` (a truncated blob at step 1, not gzip at 2, gzip of another JSON at 3)."""
    logdir = tmp_path_factory.mktemp("logdir")
    args = page_args(title="example_0")
    experiment = TensorBoardLogger(str(logdir), name="good", version="").experiment
    for step in STEPS:
        log_page(experiment, TAG, page_data(**args, caption=f"</p>caption at step {step}"), step)
    experiment.close()
    data = page_data(**args)
    empty = SummaryWriter(str(logdir / "empty"))
    empty.add_scalar("val/acc", 0.5, 0)
    empty.close()
    whole = page_summary(TAG, data)
    cut = page_summary(TAG, data)
    blob = cut.value[0].tensor.string_val[0]
    cut.value[0].tensor.string_val[0] = blob[: len(blob) // 2]
    garbage = page_summary(TAG, data)
    garbage.value[0].tensor.string_val[0] = b"not a gzip stream at all"
    other = page_summary(TAG, data)
    other.value[0].tensor.string_val[0] = gzip.compress(b'{"format": 99}')
    write_run(logdir / "broken", [(whole, 0), (cut, 1), (garbage, 2), (other, 3)])
    return logdir, args


def tensorboard_app(logdir: Path) -> Client:
    """TensorBoard's WSGI app with the tab alone, over the Python loader's data provider."""
    multiplexer = EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(logdir))
    multiplexer.Reload()
    provider = MultiplexerDataProvider(multiplexer, str(logdir))
    context = base_plugin.TBContext(data_provider=provider, logdir=str(logdir))
    plugin = AttentionLoader().load(context)
    return Client(TensorBoardWSGI([plugin], data_provider=provider))


@pytest.fixture(scope="module")
def client(logged) -> Client:
    return tensorboard_app(logged[0])


def one_line(response) -> str:
    body = response.get_data(as_text=True)
    assert response.mimetype == "text/plain" and body.endswith("\n") and body.count("\n") == 1, body
    return body


def test_the_entry_point_loads_the_tab_without_torch():
    (entry,) = [e for e in metadata.entry_points().select(group="tensorboard_plugins") if e.name == PLUGIN_NAME]
    assert entry.load() is AttentionLoader
    heavy = ("torch", "lightning", "matplotlib", "transformer_attention.plotting")
    code = (
        "import sys; from importlib import metadata; "
        "[e.load() for e in metadata.entry_points().select(group='tensorboard_plugins')]; "
        "import transformer_attention.tensorboard_plugin.plugin; "
        f"print(sorted(m for m in {heavy} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_the_blob_round_trips_and_refuses_what_is_not_a_page(logged, monkeypatch: pytest.MonkeyPatch):
    data = page_data(**logged[1], caption="c")
    summary = page_summary(TAG, data)
    value = summary.value[0]
    assert value.metadata.plugin_data.plugin_name == PLUGIN_NAME
    assert value.metadata.data_class == 3  # DATA_CLASS_BLOB_SEQUENCE: without it TensorBoard keeps nothing
    assert list(value.tensor.tensor_shape.dim[0:1])[0].size == 1
    blob = value.tensor.string_val[0]
    assert read_page(blob) == data and value.metadata.summary_description == "c"
    assert len(blob) < 0.6 * len(json.dumps(data))  # compressed
    for bad, why in [(blob[:-9], "truncated"), (b"\x1f\x8b junk", "gzip"), (gzip.compress(b"[1]"), "format")]:
        with pytest.raises(PageError, match=why):
            read_page(bad)
    monkeypatch.setattr("transformer_attention.tensorboard_plugin.summary.MAX_JSON", 1000)
    with pytest.raises(PageError, match="more than"):  # a blob that unpacks without end is cut short
        read_page(blob)


def test_runs_lists_every_run_its_examples_and_steps(client):
    reply = client.get(f"{ROUTE}/runs")
    assert reply.status_code == 200 and reply.mimetype == "application/json"
    runs = {r["run"]: r for r in reply.get_json()["runs"]}
    assert set(runs) == {"good", "empty", "broken"}
    assert runs["good"]["examples"] == [{"tag": TAG, "steps": list(STEPS)}] and runs["good"]["hint"] == ""
    assert runs["broken"]["examples"] == [{"tag": TAG, "steps": [0, 1, 2, 3]}]
    assert runs["empty"]["examples"] == [] and "\n" not in runs["empty"]["hint"]
    assert "No attention pages in empty" in runs["empty"]["hint"]


def test_the_served_page_is_the_callbacks_page_with_its_script_served(logged, client):
    args = logged[1]
    reply = client.get(f"{ROUTE}/page", query_string={"run": "good", "tag": TAG, "step": 5})
    assert reply.status_code == 200 and reply.mimetype == "text/html"
    served = reply.get_data(as_text=True)
    assert read_attention_data(served, raw=True) == page_data(**args, caption="</p>caption at step 5")
    standalone = attention_html(**args, caption="</p>caption at step 5")
    inline = re.compile(r"<script>\n.*?</script>", flags=re.DOTALL)  # the page's one inline script
    assert len(inline.findall(standalone)) == 1
    assert served == inline.sub(lambda _: page_module.MODULE, standalone)  # the same page, its script a file
    scripts = re.findall(r"<script([^>]*)>", served)
    assert scripts == [' type="application/json" id="attention-data"', ' type="module" src="static/main.js"']
    assert not re.search(r"\son\w+\s*=", served)  # no inline handler: the CSP would block it
    csp = dict(reply.headers)["Content-Security-Policy"]
    script_src = next(p for p in csp.split(";") if p.strip().startswith("script-src")).split()
    assert "'self'" in script_src and "'unsafe-inline'" not in script_src  # the modules run as same-origin files
    assert not re.search(r"https?://(?!www\.w3\.org)", served)  # nothing from a CDN


def test_every_script_is_served_and_nothing_else(client):
    for name in [*MODULES, "index"]:
        reply = client.get(f"{ROUTE}/static/{name}.js")
        assert reply.status_code == 200 and reply.mimetype == "text/javascript", name
        folder = page_module.HERE if name == "index" else page_module.page_folder()
        assert reply.get_data() == (folder / f"{name}.js").read_bytes()
    secret = (Path(page_module.__file__).parent / "summary.py").read_text()
    for path in [
        "static/../summary.py",
        "static/%2e%2e/summary.py",
        "static/%2E%2E%2Fsummary.py",
        "static/..%5csummary.py",
        "static/..\\summary.py",
        "static/....//summary.py",
        "static/page.html",
        "static/page.css",
        "static/%2fetc%2fpasswd",
    ]:
        reply = client.get(f"{ROUTE}/{path}")
        body = reply.get_data(as_text=True)
        assert reply.status_code == 404, path
        assert "PLUGIN_NAME" not in body and "<html" not in body and secret not in body, path


def test_bad_requests_and_bad_data_are_one_line(client):
    def page(**query) -> tuple[int, str]:
        reply = client.get(f"{ROUTE}/page", query_string=query)
        return reply.status_code, one_line(reply) if reply.status_code != 200 else ""

    assert page(run="good", tag=TAG)[0] == 400
    assert page(run="good", tag=TAG, step="-1")[0] == page(run="good", tag=TAG, step="\u00b2")[0] == 400
    code, line = page(run="good", tag=TAG, step=7)
    assert code == 404 and "no page of attention/example_0 at step 7 of good" in line
    assert page(run="nowhere", tag=TAG, step=0)[0] == 404
    assert page(run="broken", tag=TAG, step=0)[0] == 200  # the run's good step still shows
    for step, why in [(1, "truncated"), (2, "gzip"), (3, "format")]:
        code, line = page(run="broken", tag=TAG, step=step)
        assert code == 422 and why in line and f"at step {step} of broken" in line


def test_the_tab_is_active_only_with_its_data(logged, tmp_path: Path):
    listing = tensorboard_app(logged[0]).get("/data/plugins_listing").get_json()[PLUGIN_NAME]
    assert listing["enabled"] is True and listing["tab_name"] == "Attention"
    assert listing["loading_mechanism"]["type"] == "IFRAME"
    assert listing["loading_mechanism"]["module_path"].endswith(f"/{PLUGIN_NAME}/static/index.js")
    entry = tensorboard_app(logged[0]).get("/data/plugin_entry.html", query_string={"name": PLUGIN_NAME})
    assert 'import("./static/index.js")' in entry.get_data(as_text=True)  # TensorBoard's frame loads the tab
    empty = tmp_path / "empty"
    write_run(empty, [])
    app = tensorboard_app(empty)
    assert app.get("/data/plugins_listing").get_json()[PLUGIN_NAME]["enabled"] is False
    runs = app.get(f"{ROUTE}/runs").get_json()["runs"]
    assert all(r["examples"] == [] and r["hint"].startswith("No attention pages") for r in runs)


def test_a_page_logged_after_the_logger_closed_still_reaches_the_tab(logged, tmp_path: Path):
    experiment = TensorBoardLogger(str(tmp_path), name="late", version="").experiment
    log_page(experiment, TAG, page_data(**logged[1], caption="before"), 1)
    experiment.close()  # as after fit: the file writer is gone
    size = log_page(experiment, TAG, page_data(**logged[1], caption="after"), 2)
    assert size > 0 and len(list((tmp_path / "late").glob("events.out.tfevents.*"))) == 2
    app = tensorboard_app(tmp_path)
    assert app.get(f"{ROUTE}/runs").get_json()["runs"][0]["examples"] == [{"tag": TAG, "steps": [1, 2]}]
    page = app.get(f"{ROUTE}/page", query_string={"run": "late", "tag": TAG, "step": 2}).get_data(as_text=True)
    assert read_attention_data(page, raw=True)["caption"] == "after"


@pytest.mark.slow
def test_a_regular_install_ships_the_tab(regular_install: tuple[Path, Path]):
    """A wheel built from the project registers the entry point and holds the tab's script; installed from it (not
    editable), the plugin finds its script and the page's modules and template."""
    wheel, target = regular_install
    with zipfile.ZipFile(wheel) as z:
        assert "transformer_attention/tensorboard_plugin/static/index.js" in z.namelist()
        (entry_points,) = [n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt")]
        assert "[tensorboard_plugins]\nattention = " in z.read(entry_points).decode()
    code = (
        "from transformer_attention.tensorboard_plugin import page\n"
        "print(page.__file__)\n"
        "print(all(map(page.static_file, ('index.js', 'main.js', 'state.js'))), page.static_file('page.html'))\n"
        "print('static/main.js' in page.render({'title': 't', 'caption': '', 'tokens': [], 'layers': {}}))"
    )
    env = {"PYTHONPATH": str(target)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.split("\n")[:3] == [
        str(target / "transformer_attention/tensorboard_plugin/page.py"),
        "True None",
        "True",
    ]
