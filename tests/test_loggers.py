"""Loggers beside TensorBoard: metrics.csv (default) holds what the event files hold; MLflow (local store)
and W&B (offline) receive metrics, images and text when their extras are installed."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY, run_dirs, run_warm
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from transformer_attention.callbacks.sinks import image_loggers, log_image, log_text, png_bytes
from transformer_attention.plotting.tags import tensorboard_tag
from transformer_attention.training.metrics import final_metrics, read_metrics

TWO_EPOCHS = [o for o in TINY if not o.startswith("trainer.max_epochs=")] + [
    "trainer.max_epochs=2",
    "callbacks.attention_maps=null",
]


def series(rows: list[dict[str, float]], name: str) -> list[tuple[int, float]]:
    return [(int(r["step"]), r[name]) for r in rows if name in r]


def tensorboard_scalars(run: Path) -> EventAccumulator:
    acc = EventAccumulator(str(run), size_guidance={"scalars": 0, "images": 0})
    acc.Reload()
    return acc


def picture(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(12, 20, 3), dtype=np.uint8)


@pytest.mark.slow
def test_metrics_csv_holds_what_the_event_files_hold(tmp_path: Path):
    run_warm("train.py", *TWO_EPOCHS, f"paths.log_dir={tmp_path}")
    (run,) = run_dirs(tmp_path)
    assert (run / "csv" / "version_0" / "metrics.csv").is_file()
    rows, final = read_metrics(run), final_metrics(run)
    events = tensorboard_scalars(run)
    tags = set(events.Tags()["scalars"])  # TensorBoard's names: the curves first (`~test/acc`)
    for name in ("val/acc", "val/acc_best", "val/loss", "train/acc", "test/acc", "test/f1", "test/loss"):
        assert tensorboard_tag(name) in tags and name in final, name
    in_both = [name for name in final if tensorboard_tag(name) in tags]
    assert len(in_both) >= 7
    for name in in_both:  # every series both have: the same steps, the same values (float32)
        tb = [(e.step, e.value) for e in events.Scalars(tensorboard_tag(name))]
        assert [s for s, _ in series(rows, name)] == [s for s, _ in tb], name
        assert [v for _, v in series(rows, name)] == pytest.approx([v for _, v in tb], rel=1e-6), name
        assert final[name] == pytest.approx(tb[-1][1], rel=1e-6), name
    assert len(series(rows, "val/acc")) == 2  # one per epoch


# ---- MLflow --------------------------------------------------------------------------------------
@pytest.mark.slow
def test_mlflow_local_store_receives_the_run(tmp_path: Path):
    mlflow = pytest.importorskip("mlflow", reason="the mlflow extra is not installed")
    with_maps = [o for o in TWO_EPOCHS if not o.startswith("callbacks.attention_maps")]
    run_warm("train.py", *with_maps, "logger=mlflow", "tags=[mlflow_test]", f"paths.log_dir={tmp_path}")
    (run,) = run_dirs(tmp_path)
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow/mlflow.db")
    (found,) = client.search_runs([client.get_experiment_by_name("train").experiment_id])
    assert found.data.tags["run_dir"] == str(run)
    assert found.data.params["model/d_model"] == "16"
    csv_rows = read_metrics(run)  # the default loggers still write beside it
    for name in ("val/acc", "val/loss", "test/acc"):
        history = sorted((m.step, m.value) for m in client.get_metric_history(found.info.run_id, name))
        assert [s for s, _ in history] == [s for s, _ in series(csv_rows, name)], name
        assert [v for _, v in history] == pytest.approx([v for _, v in series(csv_rows, name)], rel=1e-6), name
    assert found.info.status == "FINISHED"
    images = [a.path for a in client.list_artifacts(found.info.run_id, "images") if a.path.endswith(".png")]
    assert any(p.startswith("images/attention~") for p in images), images  # the callbacks' maps, through image_sinks


def test_log_image_and_text_reach_tensorboard_and_mlflow(tmp_path: Path):
    mlflow = pytest.importorskip("mlflow", reason="the mlflow extra is not installed")
    from lightning.pytorch.loggers import MLFlowLogger

    tb = TensorBoardLogger(tmp_path / "tb", name=None, version="")
    ml = MLFlowLogger(
        experiment_name="sinks", tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", artifact_location=str(tmp_path / "art")
    )
    csv_logger = CSVLogger(tmp_path / "csv", name=None, version="")
    loggers = [tb, ml, csv_logger]
    assert image_loggers(loggers) == [tb, ml]
    image = picture()
    log_image(loggers, "attention/example_0/layer_1", image, step=3)
    log_text(loggers, "test/report", "| class | f1 |\n|---|---|\n| a | 0.5 |", step=3)
    tb.finalize("success")
    ml.finalize("success")

    acc = EventAccumulator(str(tmp_path / "tb"), size_guidance={"images": 0, "tensors": 0})
    acc.Reload()
    (event,) = acc.Images("~attention/example_0/layer_1")  # TensorBoard: after the curves (plotting/tags.py)
    assert event.step == 3
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(event.encoded_image_string))), image)
    assert "~test/report/text_summary" in acc.Tags()["tensors"]

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    pngs = [a.path for a in client.list_artifacts(ml.run_id, "images") if a.path.endswith(".png")]
    (png,) = [p for p in pngs if "attention~example_0~layer_1+step+3+" in p]
    local = client.download_artifacts(ml.run_id, png, str(tmp_path / "download"))
    np.testing.assert_array_equal(np.asarray(Image.open(local).convert("RGB")), image)
    text = client.download_artifacts(ml.run_id, "text/test/report/step_3.txt", str(tmp_path / "download"))
    assert Path(text).read_text().startswith("| class | f1 |")
    assert not list((tmp_path / "csv").glob("*.png"))  # CSV takes no images, and no error


def test_log_image_refuses_what_is_not_an_hwc_uint8_image(tmp_path: Path):
    tb = TensorBoardLogger(tmp_path, name=None, version="")
    with pytest.raises(ValueError, match=r"\(H, W, 3\) uint8.*\(3, 12, 20\)"):
        log_image([tb], "x", picture().transpose(2, 0, 1), step=0)
    with pytest.raises(ValueError, match="float32"):
        log_image([tb], "x", picture().astype(np.float32), step=0)


# ---- W&B -----------------------------------------------------------------------------------------
def test_log_image_reaches_wandb_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("wandb", reason="the wandb extra is not installed")
    from lightning.pytorch.loggers import WandbLogger

    monkeypatch.setenv("WANDB_SILENT", "true")
    wb = WandbLogger(project="sinks", save_dir=str(tmp_path), offline=True)
    log_image([wb], "attention/example_0/layer_1", picture(), step=3)
    log_text([wb], "test/report", "hello", step=3)
    run_dir = Path(wb.experiment.dir).parent
    wb.experiment.finish()
    (png,) = (run_dir / "files" / "media" / "images" / "attention" / "example_0").glob("layer_1_*.png")
    np.testing.assert_array_equal(np.asarray(Image.open(png).convert("RGB")), picture())


def test_png_bytes_decode_to_the_image():
    rng = np.random.default_rng(0)
    for height in (20, 700):  # 20 x 30 px, and 700 x 350 px as an attention grid
        image = rng.integers(0, 256, (height, 350 if height > 20 else 30, 3), dtype=np.uint8)
        image[: height // 2] = image[0]  # long runs, as in the maps, and noise
        np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(png_bytes(image)))), image)


def test_tensorboard_images_round_trip_with_their_description(tmp_path: Path):
    """What `log_image` writes to TensorBoard decodes (Pillow) to the very pixels, also odd sizes, and carries
    its description; after the logger is closed it still writes (a file of its own)."""
    tb = TensorBoardLogger(tmp_path, name=None, version="")
    rng = np.random.default_rng(0)
    images = {"a": picture(), "b": rng.integers(0, 256, size=(7, 5, 3), dtype=np.uint8)}
    for step, (tag, image) in enumerate(images.items()):
        log_image([tb], tag, image, step=step, description=f"the {tag} picture")
    tb.finalize("success")
    log_image([tb], "late", images["b"], step=9)  # the writer is closed: a file of its own
    acc = EventAccumulator(str(tmp_path), size_guidance={"images": 0})
    acc.Reload()
    for tag, image in images.items():
        (event,) = acc.Images(f"~{tag}")  # after the curves in TensorBoard (plotting/tags.py)
        np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(event.encoded_image_string))), image)
        assert acc.SummaryMetadata(f"~{tag}").summary_description == f"the {tag} picture"
    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 2
    assert [e.step for e in acc.Images("~late")] == [9]


def test_the_readme_tensorboard_command_opens_the_training_runs_only():
    """`tensorboard --logdir outputs/train`: each task's runs sit under outputs/<task_name>/ (Hydra's run and
    sweep folders), and only train.py's task is `train`: evaluate, predict, pretraining and debug runs are not shown."""
    import re

    from conftest import ROOT
    from omegaconf import OmegaConf

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert set(re.findall(r"^tensorboard --logdir (\S+)$", readme, flags=re.M)) == {"outputs/train"}
    tasks = {
        name: OmegaConf.load(ROOT / "conf" / f"{name}.yaml").task_name for name in ("train", "evaluate", "predict")
    }
    tasks["pretrain"] = OmegaConf.load(ROOT / "conf" / "pretrain.yaml").task_name
    assert tasks == {"train": "train", "evaluate": "evaluate", "predict": "predict", "pretrain": "pretrain"}
    for debug in (ROOT / "conf" / "debug").glob("*.yaml"):  # every debug config is, or starts from, debug/default
        node = OmegaConf.load(debug)
        assert node.get("task_name") == "debug" or "default" in (node.get("defaults") or []), debug.name
    hydra = OmegaConf.load(ROOT / "conf" / "hydra" / "default.yaml")
    for folder in ("run", "sweep"):  # as written, not resolved
        assert OmegaConf.to_container(hydra[folder])["dir"].startswith("${paths.log_dir}/${task_name}/")
    assert OmegaConf.to_container(OmegaConf.load(ROOT / "conf" / "paths" / "default.yaml"))["log_dir"] == (
        "${paths.root_dir}/outputs"
    )
