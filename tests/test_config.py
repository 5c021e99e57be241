"""Config checks (messages that name the key and the fix), the model's schema, and the whole conf/ tree composing."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from conftest import ROOT, run_entry
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf, open_dict

from transformer_attention.cli.config import check_config
from transformer_attention.cli.run import spawn_ddp
from transformer_attention.cli.tree import (
    print_config_tree,  # importing cli registers the resolvers and schemas conf/ uses
)
from transformer_attention.errors import ConfigError
from transformer_attention.model import EncoderConfig
from transformer_attention.training.settings import ModelConfig

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
        check_config(cfg)
    return str(err.value)


# ---- every config composes ------------------------------------------------------------------
GROUPS = sorted(p.name for p in CONF.iterdir() if p.is_dir() and p.name != "hydra")
OPTIONS = [(group, f.stem) for group in GROUPS for f in sorted((CONF / group).glob("*.yaml"))]
NEEDS_GPU = {("trainer", "gpu"), ("trainer", "ddp")}
EXTRA_LOGGERS = ("mlflow", "wandb")  # the project's extras of the same names bring them


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
    where = {"mlm": "mlm@pretrain"}.get(group, group)  # a group placed under another key
    cfg = conf(f"{where}={option}")
    if (group, option) in NEEDS_GPU and not torch.cuda.is_available():
        assert "no CUDA GPU" in error_of(cfg)
    elif group == "logger" and option in EXTRA_LOGGERS and importlib.util.find_spec(option) is None:
        assert f"logger={option} needs {option}, which is not installed: pip install -e '.[{option}]'" in error_of(cfg)
    else:
        check_config(cfg)


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
    print_config_tree(conf("tags=[a,b]", "notes=hello", "console.tree=full"), save_to=tmp_path / "tree.log")
    saved = (tmp_path / "tree.log").read_text()
    assert "d_model: 64" in capsys.readouterr().out
    for text in ("data", "model", "trainer", "d_model: 64", "- a", "notes: hello"):
        assert text in saved


# ---- each check's message -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("model.num_heads=5", ["model.d_model=64", "model.num_heads=5", "divisors", "model.num_heads=4"]),
        ("model.num_layers=0", ["model.num_layers=0", ">= 1"]),
        ("model.dim_feedforward=-8", ["model.dim_feedforward=-8", ">= 1"]),
        ("data.batch_size=0", ["data.batch_size=0", ">= 1"]),
        ("model.dropout=1.0", ["model.dropout=1.0", "[0, 1)"]),
        ("model.dropout=-0.1", ["model.dropout=-0.1", "[0, 1)"]),
        ("model.attention_dropout=1.5", ["model.attention_dropout=1.5", "[0, 1)"]),
        ("model.label_smoothing=1.0", ["model.label_smoothing=1.0", "[0, 1)"]),
        ("model.word_dropout=1.0", ["model.word_dropout=1.0", "[0, 1)"]),
        ("model.adversarial_eps=-1", ["model.adversarial_eps=-1.0", ">= 0"]),
        ("model.ngram_buckets=-1", ["model.ngram_buckets=-1", ">= 0", "model.ngram_buckets=131072"]),
        ("model.ngram_max=1", ["model.ngram_max=1", ">= 2", "model.ngram_max=2"]),
        ("data.max_length=600", ["data.max_length=600", "model.max_len=512", "model.max_len=600"]),
        ("model.pooling=maen", ["model.pooling='maen'", "cls, mean", "did you mean model.pooling=mean"]),
        ("model.attention_impl=flash", ["model.attention_impl='flash'", "math, sdpa"]),
        ("model.positional=rotary", ["model.positional='rotary'", "sinusoidal"]),
        ("model.optimizer.lr=0", ["model.optimizer.lr=0", "positive"]),
        ("model.scheduler.min_lr_ratio=2", ["model.scheduler.min_lr_ratio=2", "[0, 1]"]),
        ("+model.num_head=4", ["model.num_head is not a setting of the model", "did you mean model.num_heads"]),
        ("trainer.max_epochs=ten", ["trainer.max_epochs='ten'", "whole number"]),
        ("+trainer.num_nodes=0", ["trainer.num_nodes=0", ">= 1"]),
        ("data.vocab_size=1.5", ["data.vocab_size=1.5", "whole number"]),
        ("data=imdb data.val_fraction=1", ["data.val_fraction=1", "(0, 1)"]),
        ("data.max_length=1", ["data.max_length=1", ">= 2"]),
        ("tags=3", ["tags=3", "tags=[baseline,heads8]"]),
    ],
)
def test_config_error_names_key_and_fix(conf, override, expected):
    message = error_of(conf(*override.split()))
    for text in expected:
        assert text in message, (text, message)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("model.d_model=abc", ["'abc'", "Integer", "model.d_model"]),
        ("model.norm_first=maybe", ["'maybe'", "bool", "model.norm_first"]),
        ("model.num_head=4", ["Key 'num_head' not in 'ModelConfig'", "model.num_head"]),
    ],
)
def test_the_model_schema_rejects_keys_and_types_when_composing(conf, override, expected):
    with pytest.raises(ConfigCompositionException) as err:
        conf(override)
    message = f"{err.value} {err.value.__cause__}"
    for text in expected:
        assert text in message, (text, message)


def test_gpu_without_gpu_says_use_cpu(conf):
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    assert "use trainer=cpu" in error_of(conf("trainer=gpu"))


def test_partial_configs_are_checked_too():
    check_config(OmegaConf.create({"model": {"d_model": 32, "num_heads": 8}}))
    assert "model.num_heads=3" in error_of(OmegaConf.create({"model": {"d_model": 32, "num_heads": 3}}))


# ---- as a user meets them: the entry point, no traceback ------------------------------------
@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("model.num_head=4", ["model.num_head"]),  # Hydra's struct check: the key and how to add one
        ("model.d_model=abc", ["config error: model.d_model=abc: model.d_model takes a whole number, not abc"]),
        ("model.dropout=1.5", ["config error: model.dropout=1.5 must be a number in [0, 1)"]),
        ("+model.num_head=4", ["config error: model.num_head is not a setting of the model"]),
        # what only the classes know fails when they are built, before the data is loaded
        (
            "+trainer.max_epoch=3",
            ["config error: trainer.max_epoch is not an argument of", "did you mean trainer.max_epochs"],
        ),
        ("trainer.precision=bf16-mixd", ["config error:", "'bf16-mixd'", "bf16-mixed"]),
        ("model._target_=transformer_attention.module.Nope", ["config error:", "transformer_attention.module.Nope"]),
        ("+callbacks.attention_maps.num_example=2", ["config error:", "num_example", "attention_maps"]),
    ],
)
def test_entry_point_config_errors_are_one_message(tmp_path: Path, override, expected):
    proc = run_entry("train.py", override, f"paths.log_dir={tmp_path}", check=False, timeout=120)
    assert proc.returncode != 0
    for text in expected:
        assert text in proc.stderr, (text, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    if "config error:" in expected[0]:
        assert len([line for line in proc.stderr.splitlines() if "config error" in line]) == 1, proc.stderr
    assert not list(tmp_path.rglob("*.ckpt")) and not list(tmp_path.rglob("tokenizer.json"))  # no work was done


def test_spawn_ddp_switches_only_ddp_launched_by_command_line(conf):
    ddp_cpu, ddp, cpu = conf("trainer=ddp_cpu").trainer, conf("trainer=ddp").trainer, conf("trainer=cpu").trainer
    assert spawn_ddp(ddp_cpu) and ddp_cpu.strategy.start_method == "spawn"
    assert spawn_ddp(ddp) and ddp.strategy == "ddp_spawn"
    assert not spawn_ddp(cpu) and "strategy" not in cpu
    assert not spawn_ddp(ddp_cpu)  # already spawned


def test_a_model_setting_is_defined_once_and_reaches_config_checkpoint_and_hparams(conf):
    """EncoderConfig's fields are conf/model's keys, the module's hyperparameters and HPARAMS columns."""
    from hydra.utils import instantiate

    from transformer_attention.training.hparams import flatten_config

    settings = [f.name for f in EncoderConfig.__dataclass_fields__.values()]
    cfg = conf("model.num_heads=8", "model.pooling=mean")
    assert set(settings) <= set(cfg.model) <= set(ModelConfig.__dataclass_fields__)
    module = instantiate(cfg.model, vocab_size=50, num_classes=3, pad_id=0)
    assert {k: module.hparams[k] for k in settings} == {k: cfg.model[k] for k in settings}
    assert module.net.config == EncoderConfig(**{k: cfg.model[k] for k in settings})
    assert module.hparams.num_heads == 8 and module.net.encoder.layers[0].self_attn.num_heads == 8
    columns = flatten_config(OmegaConf.to_container(cfg, resolve=True))
    assert {f"model.{k}" for k in settings} <= set(columns)


def test_value_checks_import_no_torch():
    """What the entry point runs before a bad value fails: no torch, no Lightning (seconds saved)."""
    import subprocess
    import sys

    code = (
        "import sys; from omegaconf import OmegaConf; import transformer_attention.cli.config as r\n"
        "cfg = OmegaConf.create({'model': {'d_model': 30, 'num_heads': 4}})\n"
        "try:\n    r.check_config(cfg)\nexcept ValueError as e:\n    print(e)\n"
        "print(sorted(m for m in ('torch', 'lightning') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "model.d_model=30" in out and out.strip().endswith("[]")
