"""Config checks (messages that name the key and the fix) and the whole conf/ tree composing."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import ROOT, run_entry
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf, open_dict

import transformer_attention.train  # noqa: F401 - registers the resolvers train.yaml uses
from transformer_attention.config import ConfigError, print_config_tree, spawn_ddp, validate_config

CONF = ROOT / "conf"


@pytest.fixture
def conf():
    """compose(overrides) of train.yaml, with the Hydra part so `${hydra:...}` resolves."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):

        def _compose(*overrides: str, config_name: str = "train", resolve: bool = True):
            cfg = compose(config_name, overrides=list(overrides), return_hydra_config=True)
            with open_dict(cfg):
                cfg.hydra.runtime.output_dir = "/tmp/unused"
                cfg.hydra.job.num = 0
            HydraConfig.instance().set_config(cfg)
            # resolved: every interpolation of every group (the hydra part included) must work
            out = OmegaConf.create(OmegaConf.to_container(cfg, resolve=resolve))
            del out["hydra"]
            return out

        yield _compose
    GlobalHydra.instance().clear()


def error_of(cfg) -> str:
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    return str(err.value)


# ---- every config composes ------------------------------------------------------------------
GROUPS = sorted(p.name for p in CONF.iterdir() if p.is_dir() and p.name != "hydra")
OPTIONS = [(group, f.stem) for group in GROUPS for f in sorted((CONF / group).glob("*.yaml"))]
NEEDS_GPU = {("trainer", "gpu"), ("trainer", "ddp")}


def test_every_group_has_options():
    for group in ("experiment", "debug", "hparams_search", "trainer"):
        assert (group, "default") in OPTIONS or any(g == group for g, _ in OPTIONS)
    for name in ("toy", "rotten_tomatoes", "imdb"):
        assert ("experiment", name) in OPTIONS
    for name in ("fdr", "overfit", "limit", "profiler"):
        assert ("debug", name) in OPTIONS
    for name in ("cpu", "gpu", "ddp", "ddp_cpu"):
        assert ("trainer", name) in OPTIONS


@pytest.mark.parametrize(("group", "option"), OPTIONS, ids=[f"{g}={o}" for g, o in OPTIONS])
def test_every_config_composes_resolves_and_validates(conf, group, option):
    cfg = conf(f"{group}={option}")
    if (group, option) in NEEDS_GPU and not torch.cuda.is_available():
        assert "no CUDA GPU" in error_of(cfg)
    else:
        validate_config(cfg)


@pytest.mark.parametrize("config_name", sorted(p.stem for p in CONF.glob("*.yaml")))
def test_every_primary_config_composes(conf, config_name):
    cfg = conf(config_name=config_name, resolve=False)
    assert "paths" in cfg


def test_experiments_pin_their_data_and_tags(conf):
    for name in ("rotten_tomatoes", "imdb"):
        cfg = conf(f"experiment={name}")
        assert name in cfg.data.name and name in cfg.tags
        assert cfg.data.max_length <= cfg.model.max_len


def test_debug_configs_set_what_they_promise(conf):
    assert conf("debug=fdr").trainer.fast_dev_run is True
    assert conf("debug=overfit").trainer.overfit_batches > 0
    limit = conf("debug=limit").trainer
    assert 0 < limit.limit_train_batches < 1 and 0 < limit.limit_val_batches < 1
    assert conf("debug=profiler").trainer.profiler._target_.endswith("SimpleProfiler")
    assert conf("debug=fdr").task_name == "debug"  # debug runs stay out of outputs/train/


def test_optuna_search_space_never_breaks_head_divisibility(conf):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        params = compose("train", ["hparams_search=optuna"], return_hydra_config=True).hydra.sweeper.params
    choices = {k: [int(x) for x in v[len("choice(") : -1].split(",")] for k, v in params.items() if "choice" in v}
    assert all(d % h == 0 for d in choices["model.d_model"] for h in choices["model.num_heads"])


def test_config_tree_is_printed_and_saved(conf, tmp_path: Path, capsys):
    print_config_tree(conf("tags=[a,b]", "notes=hello"), save_to=tmp_path / "tree.log")
    saved = (tmp_path / "tree.log").read_text()
    assert "d_model: 64" in capsys.readouterr().out
    for text in ("data", "model", "trainer", "d_model: 64", "- a", "notes: hello"):
        assert text in saved


# ---- each check's message -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("model.num_heads=5", ["model.d_model=64", "model.num_heads=5", "divisors", "model.num_heads=4"]),
        ("model.d_model=abc", ["model.d_model='abc'", "whole number"]),
        ("model.num_layers=0", ["model.num_layers=0", ">= 1"]),
        ("model.dim_feedforward=-8", ["model.dim_feedforward=-8", ">= 1"]),
        ("data.batch_size=0", ["data.batch_size=0", ">= 1"]),
        ("model.dropout=1.0", ["model.dropout=1.0", "[0, 1)"]),
        ("model.dropout=-0.1", ["model.dropout=-0.1", "[0, 1)"]),
        ("model.attention_dropout=1.5", ["model.attention_dropout=1.5", "[0, 1)"]),
        ("data.max_length=600", ["data.max_length=600", "model.max_len=512", "model.max_len=600"]),
        ("model.pooling=maen", ["model.pooling='maen'", "cls, mean", "did you mean model.pooling=mean"]),
        ("model.attention_impl=flash", ["model.attention_impl='flash'", "math, sdpa, chunked"]),
        ("model.positional=rotary", ["model.positional='rotary'", "sinusoidal"]),
        ("model.optimizer.lr=0", ["model.optimizer.lr=0", "positive"]),
        ("+model.num_head=4", ["model.num_head is not a parameter", "did you mean model.num_heads"]),
        ("+trainer.max_epoch=3", ["trainer.max_epoch", "did you mean trainer.max_epochs"]),
        ("trainer.max_epochs=ten", ["trainer.max_epochs='ten'", "int | None"]),
        ("trainer.precision=bf16-mixd", ["trainer.precision='bf16-mixd'", "did you mean trainer.precision=bf16-mixed"]),
        ("data.vocab_size=1.5", ["data.vocab_size=1.5", "whole number"]),
        ("model.norm_first=maybe", ["model.norm_first='maybe'", "bool"]),
        ("model._target_=transformer_attention.module.Nope", ["model._target_", "cannot be imported"]),
        ("tags=3", ["tags=3", "tags=[baseline,heads8]"]),
    ],
)
def test_config_error_names_key_and_fix(conf, override, expected):
    message = error_of(conf(override))
    for text in expected:
        assert text in message, (text, message)


def test_gpu_without_gpu_says_use_cpu(conf):
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    assert "use trainer=cpu" in error_of(conf("trainer=gpu"))


def test_partial_configs_are_checked_too():
    validate_config(OmegaConf.create({"model": {"d_model": 32, "num_heads": 8}}))
    assert "model.num_heads=3" in error_of(OmegaConf.create({"model": {"d_model": 32, "num_heads": 3}}))


# ---- as a user meets them: the entry point, no traceback ------------------------------------
@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("model.num_head=4", "model.num_head"),  # Hydra's own struct check: the key and how to add one
        ("model.dropout=1.5", "config error: model.dropout=1.5 must be a number in [0, 1)"),
        ("+model.num_head=4", "config error: model.num_head is not a parameter of ClassifierModule"),
    ],
)
def test_entry_point_config_errors_are_one_message(tmp_path: Path, override, expected):
    proc = run_entry("train.py", override, f"paths.log_dir={tmp_path}", check=False, timeout=120)
    assert proc.returncode != 0
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not list(tmp_path.rglob("*.ckpt")) and not list(tmp_path.rglob("tokenizer.json"))  # no work was done


def test_spawn_ddp_switches_only_ddp_launched_by_command_line(conf):
    ddp_cpu, ddp, cpu = conf("trainer=ddp_cpu").trainer, conf("trainer=ddp").trainer, conf("trainer=cpu").trainer
    assert spawn_ddp(ddp_cpu) and ddp_cpu.strategy.start_method == "spawn"
    assert spawn_ddp(ddp) and ddp.strategy == "ddp_spawn"
    assert not spawn_ddp(cpu) and "strategy" not in cpu
    assert not spawn_ddp(ddp_cpu)  # already spawned


def test_config_choices_are_the_models_own():
    from transformer_attention import config
    from transformer_attention.model.attention import ATTENTION_IMPLS
    from transformer_attention.model.classifier import POOLINGS, POSITIONALS
    from transformer_attention.model.encoder import ACTIVATIONS

    assert config.ATTENTION_IMPLS == ATTENTION_IMPLS and config.POOLINGS == POOLINGS
    assert set(config.POSITIONALS) == set(POSITIONALS) and set(config.ACTIVATIONS) == set(ACTIVATIONS)


def test_value_checks_import_no_torch():
    """What the entry point runs before a bad value fails: no torch, no Lightning (seconds saved)."""
    import subprocess
    import sys

    code = (
        "import sys; from omegaconf import OmegaConf; import transformer_attention.config as c\n"
        "cfg = OmegaConf.create({'model': {'d_model': 30, 'num_heads': 4}})\n"
        "try:\n    c.check_values(cfg)\nexcept c.ConfigError as e:\n    print(e)\n"
        "print(sorted(m for m in ('torch', 'lightning') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "model.d_model=30" in out and out.strip().endswith("[]")
