"""TensorBoard end to end: a real `python train.py` sweep (two tiny runs, 2 epochs) read back with
TensorBoard's own event reader, then served by a real `tensorboard` server and fetched over HTTP."""

from __future__ import annotations

import io
import json
import urllib.parse
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY, run_warm
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import plugin_data_pb2
from tensorboard_server import fetch, tensorboard

pytestmark = pytest.mark.slow

LAYERS, EXAMPLES, HEADS = 2, 4, (1, 2)  # the sweep: model.num_heads=1,2
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> tuple[Path, list[Path]]:
    """`python train.py -m ... model.num_heads=1,2`: the outputs folder and the two jobs' folders."""
    log_dir = tmp_path_factory.mktemp("tensorboard") / "outputs"
    tiny = [o for o in TINY if not o.startswith("trainer.max_epochs=")]
    run_warm(
        "train.py",
        "-m",
        *tiny,
        "trainer.max_epochs=2",
        f"model.num_layers={LAYERS}",
        f"model.num_heads={','.join(map(str, HEADS))}",
        f"paths.log_dir={log_dir}",
    )
    jobs = sorted({p.parent for p in log_dir.glob("train/multiruns/*/*/events.out.tfevents.*")})
    assert len(jobs) == len(HEADS), jobs
    return log_dir, jobs


def read_events(run_dir: Path) -> EventAccumulator:
    acc = EventAccumulator(str(run_dir), size_guidance={"images": 0, "scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


def decode_png(data: bytes) -> np.ndarray:
    assert data[:8] == PNG_MAGIC
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def assert_not_blank(pixels: np.ndarray, coloured_share: float = 0.05) -> None:
    """A heatmap (or bars), not an empty canvas: coloured (non-grey) pixels and some contrast."""
    rgb = pixels.astype(int)
    coloured = (rgb.max(axis=2) - rgb.min(axis=2)) > 40  # white / black / grey text is not
    assert coloured.mean() > coloured_share and pixels.std() > 20


# ---- (a) the event files ---------------------------------------------------------------------
@pytest.mark.parametrize("job", range(len(HEADS)))
def test_event_files_hold_maps_scalars_and_hparams(sweep, job):
    _, jobs = sweep
    acc = read_events(jobs[job])
    tags = acc.Tags()

    # scalars: epoch-end metrics are logged at the last batch's step (global_step - 1), twice; the validation curves
    # under their names, everything else after them (`~train/...`, `~test/...`): TIME SERIES opens on val/acc
    for name in ("~train/loss_step", "~train/acc", "val/loss", "val/acc", "val/f1", "~train/lr"):
        assert name in tags["scalars"], name
    assert "epoch" not in tags["scalars"]  # Lightning's epoch series: metrics.csv keeps it
    assert [t for t in tags["scalars"] if "lr" in t.split("/")[-1]] == ["~train/lr"]  # one learning-rate curve
    assert not [t for t in tags["scalars"] if t.startswith("train/")]  # the train curves after val's
    assert all(t.startswith(("val/", "~")) for t in [*tags["scalars"], *tags["images"]])
    lr = [e.value for e in acc.Scalars("~train/lr")]
    assert len(lr) >= 2 and max(lr) > lr[-1] > 0  # one value per logged step, decaying (warmup, cosine)
    val_steps = [e.step for e in acc.Scalars("val/acc_best")]
    assert len(val_steps) == 2 and val_steps[0] > 0  # no placeholder value at step 0 from the hparams
    test_metrics = ("acc", "f1", "loss", "precision/negative", "recall/positive", "f1/positive")
    for name in (f"~test/{m}" for m in test_metrics):
        assert len(acc.Scalars(name)) == 1, name

    # attention images: every example, every layer (heads and their mean) and the rollout, every validation epoch
    expected = {f"~attention/example_{i}/{k}" for i in range(EXAMPLES) for k in ("layer_0", "layer_1", "rollout")}
    assert expected <= set(tags["images"])
    for tag in sorted(expected):
        events = acc.Images(tag)
        assert [e.step for e in events] == [s + 1 for s in val_steps], tag  # the global step after each epoch
        for e in events:
            pixels = decode_png(e.encoded_image_string)
            assert pixels.shape == (e.height, e.width, 3) and e.width >= 150 and e.height >= 200, tag  # 1 head: 1 panel
            assert_not_blank(pixels, 0.02 if tag.endswith("rollout") else 0.05)  # bars: the colour bar and a few bars
    described = acc.SummaryMetadata("~attention/example_0/rollout").summary_description
    assert described.startswith("example_0: \u201c") and "true label: " in described

    # captions: the examples' texts and true labels in the TEXT tab, at every logged step
    captions = acc.Tensors("~attention/examples/text_summary")
    assert [c.step for c in captions] == [s + 1 for s in val_steps]
    table = captions[-1].tensor_proto.string_val[0].decode()
    assert table.startswith("| tag | text | true label | prediction (p) |")
    assert all(f"| example_{i} | " in table for i in range(EXAMPLES))

    cm = acc.Images("~test/confusion_matrix")
    assert len(cm) == 1
    assert_not_blank(decode_png(cm[0].encoded_image_string))

    # hparams: one experiment for the task's runs (outputs/train/hparams), whose columns are the settings that
    # shape the result (what the sweep varies first, marked as differing) and the metrics, test/acc and the
    # optimised one first; a session named by what the job tried (the Trial ID column shows about 15 characters)
    content = acc.PluginTagToContent("hparams")
    assert "_hparams_/experiment" not in content
    experiment, _ = hparams_of(jobs[job])
    metrics = [(m.name.tag, m.display_name) for m in experiment.metric_infos]
    assert metrics[:2] == [("~test/acc", "test/acc"), ("val/acc_best", "val/acc_best")]
    assert not [name for _, name in metrics if name == "epoch" or "lr" in name]
    assert [h.name for h in experiment.hparam_infos if h.differs] == ["model.num_heads"]
    session = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"]).session_start_info
    assert session.group_name.startswith(f"num_heads={HEADS[job]} \u00b7 job {job} \u00b7 ")
    hp = session.hparams
    assert hp["model.num_heads"].number_value == HEADS[job]
    assert hp["model.num_layers"].number_value == LAYERS
    assert hp["trainer.max_epochs"].number_value == 2
    assert hp["data.name"].string_value == "toy"
    assert hp["model.optimizer.lr"].number_value > 0 and "seed" in hp and "data.max_length" in hp
    assert not [k for k in hp if k.startswith(("callbacks.", "paths.", "logger.")) or "._" in k]  # no plumbing
    # what the sweep varied names the job's folder (= its TensorBoard run)
    assert jobs[job].name.startswith(f"{job}_") and f"model.num_heads={HEADS[job]}" in jobs[job].name


# ---- (a') HPARAMS' columns: the same in every run, the differing ones checked ---------------------------
SINGLE = ["experiment=toy", "model.pooling=mean", "model.dropout=0.2"]  # and TINY's model and epochs


@pytest.fixture(scope="module")
def single(tmp_path_factory) -> Path:
    """One `python train.py experiment=toy ...` run: its folder (TINY, no end-of-fit analysis)."""
    log_dir = tmp_path_factory.mktemp("single") / "outputs"
    run_warm("train.py", *TINY, *SINGLE, "callbacks.model_analysis=null", f"paths.log_dir={log_dir}")
    (run,) = (log_dir / "train" / "runs").iterdir()
    return run


def hparams_of(run: Path) -> tuple[plugin_data_pb2.Experiment, dict]:
    """HPARAMS' experiment over the run's task (its columns, in `outputs/train/hparams`) and the run's session's
    values, as TensorBoard reads them."""
    root = next(p for p in run.parents if p.name == "train")
    shared = read_events(root / "hparams").PluginTagToContent("hparams")
    experiment = plugin_data_pb2.HParamsPluginData.FromString(shared["_hparams_/experiment"]).experiment
    content = read_events(run).PluginTagToContent("hparams")
    session = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
    return experiment, dict(session.session_start_info.hparams)


def test_hparams_check_what_differs_and_every_run_has_every_column(sweep, single):
    """A sweep checks what its jobs vary; a single run what its experiment and overrides change from the
    defaults (TensorBoard checks the `differs` columns first); every run logs a value for every column, the
    same columns in all runs (parallel coordinates drops a run without one); the two metrics lead."""
    _, jobs = sweep
    columns = []
    for run, differing in [*((job, {"model.num_heads"}) for job in jobs), (single, None)]:
        experiment, values = hparams_of(run)
        names = [h.name for h in experiment.hparam_infos]
        checked = [h.name for h in experiment.hparam_infos if h.differs]
        if differing is None:  # TINY's model and epochs, then SINGLE's: the columns the defaults differ in
            tiny = {"model.d_model", "model.num_heads", "model.num_layers", "model.dim_feedforward"}
            differing = {*tiny, "trainer.max_epochs", "model.pooling", "model.dropout"}
            assert values["model.pooling"].string_value == "mean" and values["trainer.max_epochs"].number_value == 1
        # the differing columns first, and the five TensorBoard ticks marked (of seven: the model's before the rest)
        assert set(names[: len(differing)]) == differing and set(checked) <= differing
        assert len(checked) == min(5, len(differing)) and all(c.startswith("model.") for c in checked)
        assert set(values) == set(names)  # a value for every column
        assert values["data.path"].string_value == "none"  # unset: a value all the same
        assert [m.display_name for m in experiment.metric_infos][:2] == ["test/acc", "val/acc_best"]
        columns.append(sorted(names))
    assert columns[0] == columns[1] == columns[2]  # the sweep's jobs and the single run: the same columns


# ---- (b) a real tensorboard server ----------------------------------------------------------
@pytest.fixture(scope="module")
def server(sweep, tmp_path_factory):
    """`tensorboard --logdir outputs` on a free loopback port; yields its base URL, then stops it."""
    log_dir, jobs = sweep

    def ready(base: str) -> bool:
        tags = json.loads(fetch(f"{base}/data/plugin/images/tags", timeout=5))
        return len(tags) == len(jobs) and all("~attention/example_0/layer_0" in t for t in tags.values())

    with tensorboard(log_dir, tmp_path_factory.mktemp("server") / "tensorboard.log", ready) as base:
        yield base


def test_server_serves_the_attention_images(sweep, server):
    log_dir, jobs = sweep
    tags = json.loads(fetch(f"{server}/data/plugin/images/tags"))
    runs = {str(log_dir / run) for run in tags}
    assert runs == {str(j) for j in jobs}  # one run per sweep job, named by its folder
    run = sorted(tags)[0]
    expected = {f"~attention/example_{i}/layer_{layer}" for i in range(EXAMPLES) for layer in range(LAYERS)}
    assert expected <= set(tags[run]) and "~test/confusion_matrix" in tags[run]

    query = urllib.parse.urlencode({"run": run, "tag": "~attention/example_0/layer_1"})
    series = json.loads(fetch(f"{server}/data/plugin/images/images?{query}"))
    assert len(series) == 2 and series[0]["step"] < series[1]["step"]  # the slider: one image per epoch
    png = fetch(f"{server}/data/plugin/images/individualImage?{series[-1]['query']}")
    pixels = decode_png(png)
    stored = read_events(log_dir / run).Images("~attention/example_0/layer_1")[-1]
    assert png == stored.encoded_image_string and pixels.shape == (stored.height, stored.width, 3)
    assert_not_blank(pixels)


def test_server_hparams_list_every_run_with_its_metrics(sweep, server):
    log_dir, _ = sweep
    experiment = json.loads(fetch(f"{server}/data/plugin/hparams/experiment", {"experimentName": ""}))
    shown = [m.get("displayName") or m["name"]["tag"] for m in experiment["metricInfos"]]
    assert shown[:2] == ["test/acc", "val/acc_best"] and "epoch" not in shown
    # the swept key is the first column, marked as differing; the constant settings follow
    first = experiment["hparamInfos"][0]
    assert first["name"] == "model.num_heads" and first.get("differs") is True
    assert not any(h.get("differs") for h in experiment["hparamInfos"][1:])
    request = {
        "experimentName": "",
        "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"],
        "colParams": [
            {"metric": {"tag": "val/acc_best", "group": ""}},
            {"metric": {"tag": "~test/acc", "group": ""}},
            {"hparam": "model.num_heads"},
        ],
        "startIndex": 0,
        "sliceSize": 100,
    }
    groups = json.loads(fetch(f"{server}/data/plugin/hparams/session_groups", request))["sessionGroups"]
    assert sorted(g["hparams"]["model.num_heads"] for g in groups) == list(HEADS)
    for group in groups:
        values = {m["name"]["tag"]: m["value"] for m in group["metricValues"]}
        assert 0.0 <= values["val/acc_best"] <= 1.0 and 0.0 <= values["~test/acc"] <= 1.0
        assert group["name"].startswith(f"num_heads={group['hparams']['model.num_heads']:g} ")  # the Trial ID
        (session,) = group["sessions"]
        acc = read_events(log_dir / session["name"])
        assert values["val/acc_best"] == pytest.approx(acc.Scalars("val/acc_best")[-1].value)
        assert values["~test/acc"] == pytest.approx(acc.Scalars("~test/acc")[-1].value)
