"""A composed config's check, before torch is imported: every group's settings built as the dataclasses that
check their own fields (`ModelConfig`, `PretrainConfig`, the data's and the analyses' rules, each defined once in
its room), the trainer's rules, then the rules that join groups (rules.py) and the keys a command line adds.

Keys and types are Hydra's job: `conf/model/` is backed by `ModelConfig` (training/settings.py), so `model.num_head=4`
or `model.d_model=abc` fails when the config is composed. Each failure here is a ConfigError that names the key,
the bad value and the fix.
"""

from __future__ import annotations

from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ..analysis.settings import AnalysisConfig, check_analyses, check_analysis_settings
from ..checks import closest, settings_of
from ..data.settings import check_data_settings
from ..errors import ConfigError
from ..pretraining.settings import PretrainConfig
from ..training.settings import ModelConfig, check_trainer
from .rules import check_callbacks, check_joint, check_loggers, check_run, check_task_keys


def register_schemas() -> None:
    """Make `ModelConfig` and `AnalysisConfig` the schemas `conf/model/*.yaml` and `conf/analysis/*.yaml` start
    from (their `defaults: [schema]`)."""
    ConfigStore.instance().store(group="model", name="schema", node=ModelConfig)
    ConfigStore.instance().store(group="analysis", name="schema", node=AnalysisConfig)


def check_config(cfg: DictConfig, task: str | None = None) -> None:
    """Raise ConfigError on the first impossible value of `cfg` (a whole or a partial config) of `task`'s run; a fix
    it suggests for a key the command line added (`+key=...`) is written as added too, so that it composes."""
    hydra = HydraConfig.get() if HydraConfig.initialized() else None
    overrides = list(hydra.overrides.task) if hydra is not None else []
    try:
        check_groups(cfg)
        if hydra is not None:
            check_added_keys(cfg, overrides, groups=list(hydra.runtime.choices))
            check_task_keys(task, overrides)
    except ConfigError as err:
        message = str(err)
        for added in (o[1:].split("=", 1)[0] for o in overrides if o.startswith("+") and not o.startswith("++")):
            for quote in ("", "'"):
                message = message.replace(f"e.g. {quote}{added}=", f"e.g. {quote}+{added}=")
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
    if "pretrain" in cfg:  # train.py's model.init_from=pretrain, pretrain.py's run: one recipe, its groups included
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
    analysis_callback = callbacks.get("model_analysis")
    if isinstance(analysis_callback, dict):
        check_analyses(analysis_callback.get("analyses"), key="callbacks.model_analysis.analyses")


WORDS = ("analysis.target",)  # keys that take a word where `true`/`false` are words too (a class named true)


def read_words(cfg: DictConfig) -> None:
    """`analysis.target=true` as the word it spells: Hydra reads `true` as a boolean, which a text key holds as
    'True'; here it is 'true' again (in place), as the guide and the class names write it."""
    for key in WORDS:
        value = OmegaConf.select(cfg, key, default=None)
        if value in ("True", "False"):
            OmegaConf.update(cfg, key, value.lower())


def check_added_keys(cfg: DictConfig, overrides: list[str], groups: list[str]) -> None:
    """`+key=value` at the top of the config adds a key nothing reads (`+max_epochs=1` trains 10 epochs):
    refuse it, with the nearest key the config has. Keys added under a group (`+trainer.benchmark=...`)
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
    out: dict[Any, Any] = {}  # a DictConfig's keys: strings in a config
    for key in node:
        try:
            value = node[key]
            out[key] = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
        except OmegaConfBaseException:
            continue
    return out
