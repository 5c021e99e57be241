"""The structured schema of `conf/model/` and the value rules a composed config must pass.

Keys and types are Hydra's job: `conf/model/` is backed by `ModelConfig` (the model's `EncoderConfig`
plus how it is optimised), so `model.num_head=4` or `model.d_model=abc` fails when the config is
composed. Values are checked here, before torch is imported, by the same rule functions the
constructors call (`check_encoder`, `check_data_settings`), plus the rules that join groups: the
trainer of the run and of its pretraining (`pretrain.trainer` in train.py), the pretraining recipe.
Each failure is a ConfigError that names the key, the bad value and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ..analysis.settings import AnalysisConfig, check_analyses, check_analysis_settings
from ..data.settings import check_data_settings
from ..errors import ConfigError
from ..model.config import EncoderConfig, check_encoder, closest
from .rules import check_loggers, check_pretrain, check_run, check_trainer, check_training


@dataclass
class ModelConfig(EncoderConfig):
    """`conf/model/`: the encoder's settings and how ClassifierModule optimises it."""

    _target_: str = "transformer_attention.module.ClassifierModule"
    _convert_: str = "all"  # plain lists and dicts in the hyperparameters: weights_only checkpoints
    label_smoothing: float = 0.0
    freeze_embedding_epochs: int = 0  # hold the token embedding fixed for this many first epochs (word vectors)
    optimizer: Any = None  # a `_partial_` optimizer (params come later); None: AdamW(lr=1e-3)
    scheduler: Any = None  # a `_partial_` scheduler (optimizer, total_steps); None: warmup_cosine
    # a pretrain.py checkpoint (or its vectors.npz) to start from, or "pretrain": pretrain now as `pretrain`
    # says (or reuse what is cached for the same texts and settings); None: from scratch
    init_from: Optional[str] = None  # noqa: UP045 - OmegaConf 2.3 reads Optional


def register_schemas() -> None:
    """Make `ModelConfig` and `AnalysisConfig` the schemas `conf/model/*.yaml` and `conf/analysis/*.yaml` start
    from (their `defaults: [schema]`)."""
    ConfigStore.instance().store(group="model", name="schema", node=ModelConfig)
    ConfigStore.instance().store(group="analysis", name="schema", node=AnalysisConfig)


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
    check_training(model, _values(model.get("optimizer")), _values(model.get("scheduler")))
    max_length, max_len = data.get("max_length"), model.get("max_len")
    if isinstance(max_length, int) and isinstance(max_len, int) and max_length > max_len:
        raise ConfigError(
            f"data.max_length={max_length} is longer than the positional table model.max_len={max_len}: "
            f"lower data.max_length or raise model.max_len (e.g. model.max_len={max_length})"
        )
    check_trainer(_values(cfg.get("trainer")), prefix="trainer.")
    pretrain = cfg.get("pretrain")
    recipe = _values(pretrain)
    check_pretrain(recipe, model.get("init_from"))
    check_training({}, _values(recipe.get("optimizer")), _values(recipe.get("scheduler")), prefix="pretrain.")
    if isinstance(pretrain, DictConfig) and "trainer" in pretrain:  # train.py: the trainer of model.init_from=pretrain
        check_trainer(_values(pretrain.trainer), prefix="pretrain.trainer.")
    check_run(_values(cfg))
    check_loggers(_values(cfg.get("logger")))
    check_analysis_settings(_values(cfg.get("analysis")))
    check_analyses(cfg.get("analyses"))
    analysis_callback = _values(cfg.get("callbacks")).get("model_analysis")
    if isinstance(analysis_callback, dict):
        check_analyses(analysis_callback.get("analyses"), key="callbacks.model_analysis.analyses")
    if HydraConfig.initialized():
        hydra = HydraConfig.get()
        check_added_keys(cfg, list(hydra.overrides.task), groups=list(hydra.runtime.choices))


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
