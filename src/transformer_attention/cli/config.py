"""The structured schema of `conf/model/` and the value rules a composed config must pass.

Keys and types are Hydra's job: `conf/model/` is backed by `ModelConfig` (the model's `EncoderConfig`
plus how it is optimised), so `model.num_head=4` or `model.d_model=abc` fails when the config is
composed. Values are checked here, before torch is imported, by the same rule functions the
constructors call (`check_encoder`, `check_data_settings`), plus the rules that join groups: the
trainer of the run and of its pretraining (`pretrain.trainer` in train.py), the pretraining recipe.
Each failure is a ConfigError that names the key, the bad value and the fix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ..checks import is_number, is_whole
from ..data.settings import check_data_settings
from ..errors import ConfigError
from ..model.config import EncoderConfig, check_encoder, closest


@dataclass
class ModelConfig(EncoderConfig):
    """`conf/model/`: the encoder's settings and how ClassifierModule optimises it."""

    _target_: str = "transformer_attention.module.ClassifierModule"
    _convert_: str = "all"  # plain lists and dicts in the hyperparameters: weights_only checkpoints
    label_smoothing: float = 0.0
    optimizer: Any = None  # a `_partial_` optimizer (params come later); None: AdamW(lr=1e-3)
    scheduler: Any = None  # a `_partial_` scheduler (optimizer, total_steps); None: warmup_cosine
    # a pretrain.py checkpoint to start the encoder from, or "pretrain": pretrain now as `pretrain` says
    # (or reuse the encoder cached for the same texts and settings); None: from scratch
    init_from: Optional[str] = None  # noqa: UP045 - OmegaConf 2.3 reads Optional


def register_schemas() -> None:
    """Make `ModelConfig` the schema `conf/model/*.yaml` start from (their `defaults: [schema]`)."""
    ConfigStore.instance().store(group="model", name="schema", node=ModelConfig)


def check_config(cfg: DictConfig) -> None:
    """Raise ConfigError on the first impossible value of `cfg` (a whole or a partial config)."""
    model, data = _values(cfg.get("model")), _values(cfg.get("data"))
    known = [f.name for f in fields(ModelConfig)]
    for key in model:
        if key not in known:  # `+model.key=...` gets past the schema: Hydra's `+` may add keys
            near = closest(key, known)
            fix = f"did you mean model.{near}?" if near else f"the settings are: {', '.join(known)}"
            raise ConfigError(f"model.{key} is not a setting of the model: {fix}")
    try:
        check_encoder(model, prefix="model.")
        check_data_settings(data, prefix="data.")
    except ValueError as err:
        raise ConfigError(str(err)) from None
    _check_training(model, _values(model.get("optimizer")), _values(model.get("scheduler")))
    max_length, max_len = data.get("max_length"), model.get("max_len")
    if isinstance(max_length, int) and isinstance(max_len, int) and max_length > max_len:
        raise ConfigError(
            f"data.max_length={max_length} is longer than the positional table model.max_len={max_len}: "
            f"lower data.max_length or raise model.max_len (e.g. model.max_len={max_length})"
        )
    _check_trainer(_values(cfg.get("trainer")), prefix="trainer.")
    pretrain = cfg.get("pretrain")
    _check_pretrain(_values(pretrain), model.get("init_from"))
    if isinstance(pretrain, DictConfig) and "trainer" in pretrain:  # train.py: the trainer of model.init_from=pretrain
        _check_trainer(_values(pretrain.trainer), prefix="pretrain.trainer.")
    if HydraConfig.initialized():
        hydra = HydraConfig.get()
        check_added_keys(cfg, list(hydra.overrides.task), groups=list(hydra.runtime.choices))
    tags = cfg.get("tags")
    if tags is not None and not (OmegaConf.is_list(tags) and all(isinstance(t, str | int | float) for t in tags)):
        raise ConfigError(f"tags={tags!r} must be a list of words: e.g. tags=[baseline,heads8]")


def _check_training(model: dict, optimizer: dict, scheduler: dict) -> None:
    """The optimisation settings: label smoothing, learning rate, warmup and floor of the schedule."""
    fraction = "a number in [0, 1)"
    ranges = {  # key: (value, what it must be, the rule beyond "a number >= 0", an example)
        "model.label_smoothing": (model.get("label_smoothing"), fraction, lambda v: v < 1, 0.1),
        "model.optimizer.lr": (optimizer.get("lr"), "a positive number", lambda v: v > 0, 0.001),
        "model.scheduler.warmup_fraction": (scheduler.get("warmup_fraction"), fraction, lambda v: v < 1, 0.1),
        "model.scheduler.min_lr_ratio": (scheduler.get("min_lr_ratio"), "a number in [0, 1]", lambda v: v <= 1, 0),
    }
    for key, (value, allowed, ok, example) in ranges.items():
        if value is not None and (not is_number(value) or value < 0 or not ok(value)):
            raise ConfigError(f"{key}={value!r} must be {allowed}: e.g. {key}={example}")


def _check_pretrain(pretrain: dict, init_from: Any) -> None:
    """The pretraining recipe (`pretrain.*`, conf/pretrain) and `model.init_from`: checked before any data is
    read or tokenizer trained."""
    rules = {  # key: (is the value allowed, what it must be, an example)
        "mask_prob": (lambda v: is_number(v) and 0 < v < 1, "a number in (0, 1)", 0.15),
        "holdout": (lambda v: is_number(v) and 0 < v < 1, "a number in (0, 1)", 0.02),
        "dropout": (lambda v: is_number(v) and 0 <= v < 1, "a number in [0, 1)", 0.0),
        "max_length": (lambda v: is_whole(v, 2), "a whole number >= 2", 128),
        "batch_size": (lambda v: is_whole(v, 1), "a whole number >= 1", 64),
        "extra_texts": (
            lambda v: isinstance(v, list) and all(isinstance(t, str) for t in v),
            "a list of files, folders or hub names",
            "[../shared/data/imdb]",
        ),
    }
    for key, (ok, allowed, example) in rules.items():
        if key in pretrain and not ok(pretrain[key]):
            raise ConfigError(f"pretrain.{key}={pretrain[key]!r} must be {allowed}: e.g. pretrain.{key}={example}")
    if init_from is not None and init_from != "pretrain" and not os.path.isfile(str(init_from)):
        raise ConfigError(
            f"model.init_from={init_from!r} is not a file: give a checkpoint pretrain.py wrote "
            "(outputs/pretrain/runs/<time>/checkpoints/mlm_<step>.ckpt), or model.init_from=pretrain to pretrain first"
        )


# what Lightning takes, plus this project's `auto` (training/precision.py)
PRECISIONS = ("auto", "32-true", "bf16-mixed", "16-mixed", "bf16-true", "16-true", "64-true", "32", "16", "bf16", "64")


def _check_trainer(trainer: dict, prefix: str) -> None:
    """Whole-number loop settings (Lightning checks them only when fit starts), the precision, and a GPU
    that exists; `prefix` names the trainer (`trainer.`, or `pretrain.trainer.` for train.py's pretraining)."""
    lowest = {"max_epochs": -1, "min_epochs": 0, "log_every_n_steps": 1, "check_val_every_n_epoch": 1, "num_nodes": 1}
    for key, low in lowest.items():
        value = trainer.get(key)
        if value is not None and not is_whole(value, low):
            raise ConfigError(f"{prefix}{key}={value!r} must be a whole number >= {low}: e.g. {prefix}{key}=1")
    if trainer.get("max_epochs") == 0:
        raise ConfigError(
            f"{prefix}max_epochs=0 trains nothing: use {prefix}max_epochs=1 or more (-1: no limit), "
            "or train=false to test the weights as they are"
        )
    precision = trainer.get("precision")
    if precision is not None and str(precision) not in PRECISIONS:
        raise ConfigError(
            f"{prefix}precision={precision!r} must be one of {', '.join(PRECISIONS[:6])}: e.g. {prefix}precision=auto "
            "(the faster of 32-true and bf16-mixed, timed at start)"
        )
    accelerator = trainer.get("accelerator")
    devices = trainer.get("devices")
    strategy = trainer.get("strategy", "auto")
    strategy = str(strategy.get("_target_", strategy) if isinstance(strategy, dict) else strategy).rsplit(".", 1)[-1]
    if precision == "auto" and (devices not in (1, "1", None) or "ddp" in strategy.lower()):
        raise ConfigError(
            f"{prefix}precision=auto times one process, not {devices} device(s) (strategy {strategy}): "
            f"set {prefix}precision=32-true or {prefix}precision=bf16-mixed"
        )
    if accelerator == "cpu" and is_whole(devices):
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        if devices > cores:
            raise ConfigError(
                f"{prefix}devices={devices} CPU processes but this machine gives this run {cores} core(s): "
                f"use {prefix}devices={cores} or fewer (each process is one DDP rank)"
            )
    if accelerator not in ("gpu", "cuda"):
        return
    import torch  # only for a GPU run

    visible = torch.cuda.device_count()
    if not torch.cuda.is_available():
        raise ConfigError(
            f"{prefix}accelerator={accelerator} but no CUDA GPU is visible here: "
            "use trainer=cpu (or trainer=ddp_cpu for 2 processes on CPU)"
        )
    if isinstance(devices, int) and devices > visible:
        raise ConfigError(
            f"{prefix}devices={devices} but only {visible} GPU(s) are visible: "
            f"use {prefix}devices={visible} (or {prefix}devices=auto)"
        )


def check_added_keys(cfg: DictConfig, overrides: list[str], groups: list[str]) -> None:
    """`+key=value` at the top of the config adds a key nothing reads (`+max_epochs=1` trains 10 epochs):
    refuse it, with the nearest key the config has. Keys added under a group (`+trainer.max_time=...`)
    go to what that group builds, which accepts or refuses them itself; `+group=option` picks an option."""
    for override in overrides:
        if not override.startswith("+") or override.startswith("++") or "=" not in override:
            continue
        key, value = override[1:].split("=", 1)
        if "." in key or "@" in key or "/" in key or key in groups:
            continue
        paths = [p for p in _key_paths(OmegaConf.to_container(cfg, resolve=False)) if p != key]
        near = closest(key, [p.rsplit(".", 1)[-1] for p in paths])
        matches = sorted((p for p in paths if p.rsplit(".", 1)[-1] == near), key=lambda p: p.count("."))
        fix = f"did you mean {matches[0]}={value}?" if matches else f"the top-level keys are: {', '.join(sorted(cfg))}"
        raise ConfigError(f"+{key}={value} adds {key!r} at the top of the config, where nothing reads it: {fix}")


def _key_paths(node: Any, prefix: str = "", depth: int = 3) -> list[str]:
    """Dotted paths of a plain config's keys, `depth` levels deep (the hydra node left out)."""
    if not isinstance(node, dict) or depth == 0:
        return []
    out = []
    for key, value in node.items():
        if key == "hydra" and not prefix:
            continue
        out.append(f"{prefix}{key}")
        out += _key_paths(value, f"{prefix}{key}.", depth - 1)
    return out


def _values(node: Any) -> dict[str, Any]:
    """A config node's plain, resolved values; keys whose interpolation resolves only inside a Hydra
    run (e.g. `${hydra:runtime.output_dir}`) are left out."""
    if isinstance(node, dict):
        return node
    if not isinstance(node, DictConfig):
        return {}
    out = {}
    for key in node:
        try:
            value = node[key]
            out[key] = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
        except OmegaConfBaseException:
            continue
    return out
