"""What conf/ needs registered, and a composed config's check before torch is imported: each group's settings built
as the dataclasses that check their own fields, then the rules that join groups (keys and types: Hydra's)."""

from __future__ import annotations

import re
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from ..analysis.settings import AnalysisConfig, check_analyses, check_analysis_settings
from ..checks import closest, settings_of
from ..data.settings import check_data_settings
from ..errors import ConfigError
from ..files import run_dir_of
from ..pretraining.settings import PretrainConfig, check_overrides
from ..training.settings import ModelConfig, check_callbacks, check_joint, check_loggers, check_run, check_trainer
from .tree import leaves, plain

NAME_SKIPS = ("hydra", "hparams_search", "paths", "ckpt_path", "data.path", "data.data_files", "trainer.devices")


def register() -> None:
    """The schemas of `conf/model/` and `conf/analysis/`, and the resolvers: `resume_dir` and `resume_subdir`
    (a run resumed from `<run>/checkpoints/*.ckpt` goes on in `<run>`), `job_name` (a sweep job's folder)."""
    ConfigStore.instance().store(group="model", name="schema", node=ModelConfig)
    ConfigStore.instance().store(group="analysis", name="schema", node=AnalysisConfig)
    resolver = OmegaConf.register_new_resolver
    resolver("resume_dir", lambda ckpt, default: str(run_dir_of(ckpt) or default), replace=True)
    resolver("resume_subdir", lambda ckpt, resumed, other: resumed if run_dir_of(ckpt) else other, replace=True)
    resolver("job_name", job_name, replace=True)


def job_name(num: Any, overrides: Any) -> str:
    """A sweep job's folder, its number and what it overrides (`1_model.num_heads=2,seed=3`) in 100 characters."""
    parts = [str(o) for o in overrides or [] if not str(o).lstrip("+~").startswith(NAME_SKIPS)]
    name = ",".join(re.sub(r"[^A-Za-z0-9_.,=+\-]+", "-", p) for p in parts)
    return f"{num}_{name}"[:100] if name else str(num)


def check_config(cfg: DictConfig, task: str | None = None) -> None:
    """A ConfigError naming the first impossible value of `cfg` (whole or partial) of `task`, and a fix."""
    hydra = HydraConfig.get() if HydraConfig.initialized() else None
    overrides = list(hydra.overrides.task) if hydra is not None else []
    added = [o[1:] for o in overrides if o.startswith("+") and not o.startswith("++") and "=" in o]  # key=value
    try:
        check_groups(cfg)
        if hydra is not None:
            check_added_keys(cfg, added, groups=list(hydra.runtime.choices))
        if task == "pretrain":
            check_overrides(overrides)  # the fine-tuning's groups, which pretrain.py does not run
    except ConfigError as err:
        message = str(err)
        for key in (a.split("=", 1)[0] for a in added):
            message = message.replace(f"e.g. {key}=", f"e.g. +{key}=").replace(f"e.g. '{key}=", f"e.g. '+{key}=")
        raise ConfigError(message) from None


def check_groups(cfg: DictConfig) -> None:
    """Each group's settings, built as the dataclasses that check themselves, then the rules that join groups."""
    model, data = _values(cfg.get("model")), _values(cfg.get("data"))
    settings_of(ModelConfig, model, "model.", "the model")
    try:
        check_data_settings(data, prefix="data.")
    except ValueError as err:
        raise ConfigError(str(err)) from None
    check_trainer(_values(cfg.get("trainer")), prefix="trainer.")
    if "pretrain" in cfg:  # train.py's model.init_from=pretrain and pretrain.py's run: one recipe, its groups too
        PretrainConfig.from_values(_values(cfg.get("pretrain")), model=model)
    check_joint(model, data)
    check_run(_values(cfg))
    check_loggers(_values(cfg.get("logger")))
    analysis = _values(cfg.get("analysis"))
    settings_of(AnalysisConfig, analysis, "analysis.", "the analyses")  # `+analysis.key=...`: a key it lacks
    check_analysis_settings(analysis)
    check_analyses(cfg.get("analyses"))
    callbacks = _values(cfg.get("callbacks"))
    check_callbacks(callbacks)
    if isinstance(analysis_callback := callbacks.get("model_analysis"), dict):
        check_analyses(analysis_callback.get("analyses"), key="callbacks.model_analysis.analyses")


def read_words(cfg: DictConfig) -> None:
    """`analysis.target=true` as the word it spells (in place): Hydra's boolean, held as 'True' by a text key."""
    if (value := OmegaConf.select(cfg, "analysis.target", default=None)) in ("True", "False"):
        OmegaConf.update(cfg, "analysis.target", value.lower())


def check_added_keys(cfg: DictConfig, added: list[str], groups: list[str]) -> None:
    """`+key=value` (`added`: each `key=value`) at the top of the config adds a key nothing reads (`+max_epochs=1`
    trains 10 epochs): refused with the nearest key. Under a group, what the group builds takes or refuses it."""
    for key, value in (a.split("=", 1) for a in added):
        if "." in key or "@" in key or "/" in key or key in groups:
            continue
        paths = sorted((p for p, _ in leaves(cfg) if p != key), key=lambda p: p.count("."))  # the shallowest first
        near = closest(key, [p.rsplit(".", 1)[-1] for p in paths])
        fix = next((f"did you mean {p}={value}?" for p in paths if p.rsplit(".", 1)[-1] == near), None)
        fix = fix or f"the top-level keys are: {', '.join(sorted(cfg))}"
        raise ConfigError(f"+{key}={value} adds {key!r} at the top of the config, where nothing reads it: {fix}")


def _values(node: Any) -> dict[str, Any]:
    """A config node's plain values, resolved (as written where they point at a group or resolve only in a run)."""
    return plain(node) if isinstance(node, DictConfig) else node if isinstance(node, dict) else {}
