"""Bad input refused in one line that names the value and a fix that works, before the work it would waste: an
empty list of explanation methods, a checkpoint whose label names do not name its classes, a damaged checkpoint
(still a zip of the same size), skip-gram vectors given as a classifier, and the fixes printed for data offline and
for pretrain.py's trainer keys."""

from __future__ import annotations

import re
import shlex
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import run_warm
from omegaconf import OmegaConf
from test_checkpoint import save_like_lightning, tiny_module
from test_config import conf  # noqa: F401 - the fixture
from test_fail_early import one_line

from transformer_attention.analysis.plan import analysis_settings
from transformer_attention.analysis.settings import check_method_names
from transformer_attention.callbacks.analysis import ModelAnalysis
from transformer_attention.checks import Rule, as_list_example, check_rules, takes
from transformer_attention.cli.config import check_config
from transformer_attention.data.labels import labels_to_ids
from transformer_attention.data.sources import load_source
from transformer_attention.errors import CheckpointError, ConfigError, DataError
from transformer_attention.module import ClassifierModule
from transformer_attention.pretraining.settings import PretrainConfig, check_overrides
from transformer_attention.tasks.evaluate import evaluate
from transformer_attention.tasks.predict import main as predict_main
from transformer_attention.training.checkpoint import load_module, read_checkpoint

ENTRIES = {"train": [], "evaluate": ["ckpt_path=model.ckpt"], "predict": ["ckpt_path=model.ckpt", "text=good"]}


# ---- analysis.methods=[]: refused by the config check every entry runs first -----------------------------------
@pytest.mark.parametrize("task", sorted(ENTRIES))
def test_an_empty_list_of_methods_is_refused_by_every_entrys_config_check(conf, task: str):  # noqa: F811
    with pytest.raises(ConfigError) as err:
        check_config(conf(*ENTRIES[task], "analysis.methods=[]", config_name=task, resolve=False), task)
    line = str(err.value)
    assert line.startswith("analysis.methods=[] names no explanation method") and "analysis.methods=null" in line
    fix = re.search(r"e\.g\. ('analysis\.methods=\[[a-z_,]+\]')", line)
    assert fix is not None, line
    (pasted,) = shlex.split(fix[1])  # the example, as the shell passes it: a config the checks take
    check_config(conf(*ENTRIES[task], pasted, config_name=task, resolve=False), task)


def test_an_empty_list_of_methods_is_refused_wherever_settings_are_built():
    """The end-of-fit callback (its own key), and the settings evaluate.py's plan and predict.py's pages build."""
    with pytest.raises(ConfigError, match=r"^callbacks\.model_analysis\.methods=\[\] names no explanation method"):
        ModelAnalysis(methods=[])
    with pytest.raises(ConfigError, match=r"^analysis\.methods=\[\] names no"):
        analysis_settings({"methods": []})
    assert check_method_names(["decompx", "decompx"], "analysis.methods") == ["decompx"]  # a list still works


# ---- analysis.methods=decompx: the example for a list-valued key is the list meant ---------------------------
@pytest.mark.parametrize(
    ("given", "example"), [("decompx", "[decompx]"), ("10", "[10]"), ("[a]", None), ("a,b", None), ("", None)]
)
def test_a_single_value_given_for_a_list_is_offered_as_its_one_item_list(given: str, example: str | None):
    assert as_list_example(given) == example
    assert as_list_example(given, fits=lambda items: False) is None  # a list the key does not take: no example


@pytest.mark.parametrize(
    ("typed", "fix"),
    [("analysis.methods=decompx", "'analysis.methods=[decompx]'"), ("analysis.k=10", "'analysis.k=[10]'")],
)
def test_one_value_given_for_a_list_is_refused_with_the_list_meant(conf, typed: str, fix: str):  # noqa: F811
    from hydra.errors import HydraException

    from transformer_attention.cli.entry import refusal

    with pytest.raises(HydraException) as err:
        conf(typed, config_name="evaluate")
    key = typed.split("=")[0]
    assert refusal(err.value, [typed]) == f"{typed}: {key} takes a list, not {typed.split('=')[1]}: e.g. {fix}"
    check_config(conf("ckpt_path=m.ckpt", *shlex.split(fix), config_name="evaluate"), "evaluate")


def test_a_value_no_list_of_the_key_takes_gets_the_configs_own_list(conf):  # noqa: F811
    from hydra.errors import HydraException

    from transformer_attention.cli.entry import refusal

    with pytest.raises(HydraException) as err:
        conf("analysis.k=abc", config_name="evaluate")
    assert refusal(err.value, ["analysis.k=abc"]).endswith("e.g. 'analysis.k=[10.0, 20.0, 50.0]'")


def test_a_mapping_given_for_a_list_is_one_line_with_the_configs_own_list(conf):  # noqa: F811
    from hydra.errors import HydraException

    from transformer_attention.cli.entry import refusal

    with pytest.raises(HydraException) as err:
        conf("analysis.k={a: 1}", config_name="evaluate")
    line = refusal(err.value, ["analysis.k={a: 1}"])
    assert line == "analysis.k={a: 1}: analysis.k takes a list, not {a: 1}: e.g. 'analysis.k=[10.0, 20.0, 50.0]'"


# ---- label names that do not name the classes ------------------------------------------------------------------
def refusals(ckpt: Path, text: str, output_dir: Path) -> list[str]:
    """What predict.py and evaluate.py (in process) each refuse `ckpt` with, as a CheckpointError, given `text`."""
    cfg = OmegaConf.create({"ckpt_path": str(ckpt), "text": text, "batch_size": 4})
    cfg.paths = {"output_dir": str(output_dir)}
    lines = []
    for entry in (predict_main, evaluate):
        with pytest.raises(CheckpointError) as err:
            entry(cfg)
        lines.append(str(err.value))
    return lines


@pytest.mark.parametrize(
    ("names", "says"),
    [
        (["positive"], "1 label name(s), ['positive'], for 2 classes"),
        (["pos", "pos"], "give 'pos' to more than one"),
    ],
)
def test_a_checkpoint_whose_label_names_do_not_name_its_classes_is_refused(tmp_path: Path, names, says: str):
    module = tiny_module()
    module.hparams.label_names = names
    ckpt = save_like_lightning(module, tmp_path / "model.ckpt")
    for line in refusals(ckpt, "a good film", tmp_path / "run"):
        assert f"checkpoint {ckpt} cannot name its classes" in line and says in line and "\n" not in line
    assert sorted(tmp_path.iterdir()) == [ckpt]  # nothing written


def test_label_names_given_to_the_data_name_each_class_once():
    with pytest.raises(DataError, match=r"data\.label_names: label names \['a', 'a'\] give 'a' to more than one"):
        labels_to_ids({"train": [0, 1]}, label_names=["a", "a"])
    assert labels_to_ids({"train": [0, 1]}, label_names=["a", "b"])[1] == ["a", "b"]
    with pytest.raises(DataError, match=r"data\.label_names=\['a'\] names 1 class\(es\), but label 1 .* 0 to 2$"):
        labels_to_ids({"train": [0, 1], "test": [], "validation": [2]}, label_names=["a"])


# ---- a damaged checkpoint: the same size, still a zip, records that fail their CRC-32 ---------------------------
def bigger_module() -> ClassifierModule:
    """A classifier whose checkpoint is ~300 kB, so that 32 kB in its middle are tensor bytes."""
    small = tiny_module()
    settings = {k: small.hparams[k] for k in ("vocab_size", "num_classes", "label_names")}
    return ClassifierModule(
        **settings, tokenizer=small.tokenizer_json, d_model=64, num_heads=4, num_layers=2, dim_feedforward=128
    )


def damage(path: Path, span: int = 32 * 1024, at: int | None = None) -> Path:
    """`span` bytes zeroed around byte `at` (the middle) of `path`, in place: its size and zip directory kept."""
    data = bytearray(path.read_bytes())
    size, middle = len(data), len(data) // 2 if at is None else at
    data[middle - span // 2 : middle + span // 2] = bytes(span)
    path.write_bytes(bytes(data))
    with zipfile.ZipFile(path) as archive:  # still a valid zip, as the damage the loader must find
        assert archive.namelist() and path.stat().st_size == size
    return path


@pytest.fixture
def damaged(tmp_path: Path) -> Path:
    return damage(save_like_lightning(bigger_module(), tmp_path / "model.ckpt"))


def test_a_checkpoint_damaged_in_the_middle_is_refused_before_any_prediction(tmp_path: Path, damaged: Path):
    for line in refusals(damaged, "the plot was quite silly", tmp_path / "run"):
        assert f"checkpoint {damaged} is damaged: its record" in line and "CRC-32" in line
        assert "copy it again" in line
    assert not (tmp_path / "run").exists()


def test_an_undamaged_checkpoint_still_loads_and_a_damaged_record_is_named(tmp_path: Path):
    module = bigger_module()
    path = save_like_lightning(module, tmp_path / "model.ckpt")
    torch.testing.assert_close(load_module(path).state_dict(), module.state_dict(), rtol=0, atol=0)
    with zipfile.ZipFile(path) as archive:  # the largest tensor's record, damaged in the middle of its bytes
        hit = max(archive.infolist(), key=lambda i: i.file_size)
    at = hit.header_offset + 128 + hit.file_size // 2  # past its local header (< 128 bytes: name, alignment)
    with pytest.raises(CheckpointError, match=re.escape(f"its record {hit.filename} does not match")):
        read_checkpoint(damage(path, span=16, at=at))


@pytest.mark.slow
@pytest.mark.parametrize("script", ["predict.py", "evaluate.py"])
def test_entry_points_refuse_a_damaged_checkpoint_in_one_line(tmp_path: Path, damaged: Path, script: str):
    text = ["text=good"] if script == "predict.py" else []
    proc = run_warm(script, f"ckpt_path={damaged}", *text, f"paths.log_dir={tmp_path / 'out'}", check=False)
    assert f"checkpoint {damaged} is damaged" in one_line(proc, "checkpoint error")
    assert not (tmp_path / "out").exists()


# ---- skip-gram vectors given where a classifier is expected ----------------------------------------------------
@pytest.mark.parametrize("dim", [64, 16, 30])
def test_word_vectors_are_named_as_such_with_a_fine_tuning_command_that_passes_the_checks(
    tmp_path: Path,
    conf,  # noqa: F811
    dim: int,
):
    path = tmp_path / "vectors.npz"
    arrays = {"vectors": np.zeros((50, dim), np.float32), "known": np.ones(50, bool)}
    np.savez(path, **arrays, tokenizer=np.array(tiny_module().tokenizer_json), settings=np.array("{}"))
    with pytest.raises(CheckpointError) as err:
        load_module(path)
    line = str(err.value)
    assert line.startswith(f"{path} holds skip-gram word vectors (50 x {dim}") and "not a classifier" in line
    command = shlex.split(line.split("fine-tune a classifier from them first: ", 1)[1])
    assert command[:2] == ["python", "train.py"] and f"model.init_from={path}" in command
    cfg = conf(*command[2:], resolve=False)  # the command composes, passes the run's checks, and fits the vectors
    check_config(cfg, "train")
    assert cfg.model.d_model == dim and dim % cfg.model.num_heads == 0


def test_a_pretrained_encoders_fine_tuning_command_sets_its_sizes(tmp_path: Path, conf):  # noqa: F811
    shape = {"d_model": 16, "num_heads": 2, "num_layers": 1, "dim_feedforward": 32, "norm_first": True}
    shape |= {"activation": "gelu", "positional": "learned", "max_len": 128}
    hparams = {**shape, "mask_prob": 0.15, "vocab_size": 50, "dropout": 0.0}
    path = tmp_path / "mlm.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": hparams, "tokenizer": tiny_module().tokenizer_json}, path)
    with pytest.raises(CheckpointError) as err:
        load_module(path)
    line = str(err.value)
    assert f"checkpoint {path} is a pretrained encoder (pretrain.py), not a classifier" in line
    command = shlex.split(line.split("fine-tune it first: ", 1)[1])
    assert command[:3] == ["python", "train.py", f"model.init_from={path}"] and "model.dropout=0.0" not in command
    cfg = conf(*command[2:], resolve=False)
    check_config(cfg, "train")
    assert {k: cfg.model[k] for k in shape} == shape  # what PretrainedEncoder.check_fits asks of the model


# ---- printed fixes: the data set's own name, and values pretrain.py's checks take -------------------------------
def test_an_offline_hub_name_suggests_local_files_of_that_data_set(monkeypatch, tmp_path: Path):
    import datasets

    def offline(name, *args, **kwargs):
        raise ConnectionError("offline")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DataError) as err:
        load_source("cornell-movie-review-data/rotten_tomatoes", None, None)
    line = str(err.value)
    assert "data.path=<a folder holding rotten_tomatoes as train/validation/test" in line
    assert "imdb" not in line and "shared" not in line


@pytest.mark.parametrize(
    ("typed", "fix"),
    [
        ("trainer.accumulate_grad_batches=0", "e.g. pretrain.trainer.accumulate_grad_batches=1"),
        ("trainer.gradient_clip_val=-1", "e.g. pretrain.trainer.gradient_clip_val=1.0"),
        ("+trainer.max_epochs=3", "e.g. pretrain.trainer.max_epochs=3"),
        ("trainer=cpu", "e.g. trainer@pretrain.trainer=cpu"),
    ],
)
def test_pretrains_fix_for_a_fine_tuning_trainer_key_passes_its_checks(conf, typed: str, fix: str):  # noqa: F811
    with pytest.raises(ConfigError) as err:
        check_overrides([typed])
    line = str(err.value)
    assert line.startswith(f"{typed} sets the fine-tuning's trainer, which pretrain.py does not run")
    assert fix in line
    pasted = line.rsplit("e.g. ", 1)[1]
    check_overrides([pasted])  # pretrain.py takes it
    check_config(conf(pasted, config_name="pretrain", resolve=False), "pretrain")


@pytest.mark.parametrize(("given", "example"), [("imdb", "[imdb]"), (5, "[imdb:unsupervised]")])
def test_extra_texts_given_as_one_value_are_refused_with_a_list_that_passes(given, example: str):
    with pytest.raises(ConfigError) as err:
        PretrainConfig.from_values({"extra_texts": given})
    line = str(err.value)
    assert (
        line.startswith(f"pretrain.extra_texts={given!r} must be a list")
        and f"'pretrain.extra_texts={example}'" in line
    )
    pasted = OmegaConf.from_dotlist([shlex.split(line.rsplit("e.g. ", 1)[1])[0]])  # as Hydra reads it
    assert PretrainConfig.from_values(OmegaConf.to_container(pasted.pretrain)).extra_texts == (example[1:-1],)


def rule_tables() -> list[tuple[str, str, Rule]]:
    """Every table of rules check_rules prints a fix from: (its name, the key, the rule)."""
    from transformer_attention.analysis import settings as analysis
    from transformer_attention.pretraining import settings as pretraining
    from transformer_attention.training import settings as training

    tables = {"analysis": analysis.RULES, "pretrain": pretraining.RULES, "console": {"tree": training.TREE_RULE}}
    for name in ("OPTIMIZER_RULES", "SCHEDULER_RULES", "MODULE_RULES", "TRAINER_RULES", "RUN_RULES"):
        tables[name] = getattr(training, name)
    tables |= {f"callbacks.{name}": rules for name, rules in training.CALLBACK_RULES.items()}
    return [(table, key, rule) for table, rules in tables.items() for key, rule in rules.items()]


@pytest.mark.parametrize(("table", "key", "rule"), rule_tables(), ids=[f"{t}.{k}" for t, k, _ in rule_tables()])
def test_every_rules_example_pasted_passes_that_rule(table: str, key: str, rule: Rule):
    ok, _, example = rule
    assert takes(ok, f"{key}={str(example).partition(' (')[0]}"), (table, key, example)


def test_a_refusal_prints_only_an_example_its_rule_takes():
    rules: dict[str, Rule] = {"k": (lambda v: v == 1, "one", 2), "j": (lambda v: v == [1, 2], "a pair", "[1,2]")}
    with pytest.raises(ConfigError, match=r"^x\.k=0 must be one$"):  # the example 2 is refused too: no fix
        check_rules({"k": 0}, rules, prefix="x.")
    with pytest.raises(ConfigError, match=r"^x\.j=\[3\] must be a pair: e\.g\. 'x\.j=\[1,2\]'$"):
        check_rules({"j": [3]}, rules, prefix="x.")
