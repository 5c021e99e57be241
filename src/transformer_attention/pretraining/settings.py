"""The pretraining recipe, defined once and checked when built: `PretrainConfig` (`pretrain.*`, conf/pretrain, the
same keys in `python pretrain.py` and `python train.py model.init_from=pretrain`) and `SkipgramConfig`
(`pretrain.skipgram.*`). The CLI builds them to check a config before torch is imported; a task builds them once
at its start and passes them down. Standard library only."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ..checks import Rule, as_list_example, check_rules, closest, is_number, settings_of, whole
from ..data.sources import FORMATS, SPLIT_ALIASES
from ..errors import ConfigError
from ..model.config import encoder_fields
from ..training.settings import check_optimization, check_trainer

METHOD_NAMES = ("mlm", "skipgram")  # what `pretrain.method` may name: methods.METHODS says what each does
# what train.py does when `pretrain.extra_texts` is empty or a hub name in it cannot be loaded (offline)
WITHOUT_EXTRA_TEXTS = ("pretrain", "scratch", "error")
GROUPS = ("trainer", "callbacks", "logger")  # how a pretraining runs (config groups under pretrain.*), not what


@dataclass(frozen=True)
class SkipgramConfig:
    """gensim's Word2Vec (sg=1) settings for `pretrain.method=skipgram`."""

    dim: int | None = None  # the vectors' size; None: model.d_model, the embedding they start
    window: int = 5  # words either side that count as context
    negative: int = 5  # negative samples per context word
    sample: float = 1e-4  # down-sampling of frequent words
    epochs: int = 10
    min_count: int = 1  # ids seen fewer times keep their random init
    workers: int | None = 1  # threads; 1: the same vectors on any machine and load; None: the usable cores

    def __post_init__(self) -> None:
        lowest = {"dim": 2, "window": 1, "negative": 1, "epochs": 1, "min_count": 1, "workers": 1}
        examples = {"dim": 128, "window": 5, "negative": 5, "epochs": 10, "min_count": 5, "workers": 1}
        optional = ("dim", "workers")  # None: the embedding's size, the usable cores

        rules: dict[str, Rule] = {
            key: (whole(low, null=key in optional), f"a whole number >= {low}", examples[key])
            for key, low in lowest.items()
        }
        rules["sample"] = (lambda v: is_number(v) and 0 <= v < 1, "a number in [0, 1)", 0.0001)
        check_rules(asdict(self), rules, prefix="pretrain.skipgram.")


@dataclass(frozen=True)
class PretrainConfig:
    """What `pretrain.*` says: the method, its texts, the masked language model's settings, its optimiser and
    schedule, the skip-gram's settings, and the groups that run it (trainer, callbacks, logger: plain dicts, as
    Hydra composed them). `encoder`: the encoder's settings while it pretrains (`encoder_of` the model's)."""

    method: str = "mlm"
    extra_texts: tuple[str, ...] = ()  # more unlabelled text: files, folders or hub names (data/unlabelled.py)
    text_column: str = "text"  # of the extra texts
    # without them (none given, or a hub name unreachable): pretrain on the data's own texts, start train.py from
    # random embeddings (a recipe whose pretraining does not pay without them), or stop with one line
    without_extra_texts: str = "pretrain"
    max_length: int = 128  # tokens per window: a longer text is read in several windows
    batch_size: int = 64
    mask_prob: float = 0.15
    dropout: float = 0.0  # the encoder's dropout while pretraining (fine-tuning uses model.dropout)
    holdout: float = 0.02  # share of the texts held out to measure the MLM on (at most 1000 texts)
    seed: int = 0  # fixed apart from the run's `seed`: every seed of a sweep fine-tunes the same start
    optimizer: Mapping[str, Any] | None = None  # a `_partial_` optimiser; None: AdamW(lr=1e-3)
    scheduler: Mapping[str, Any] | None = None  # a `_partial_` schedule; None: warmup_cosine
    skipgram: SkipgramConfig = field(default_factory=SkipgramConfig)
    trainer: Mapping[str, Any] = field(default_factory=dict)
    callbacks: Mapping[str, Any] = field(default_factory=dict)
    logger: Mapping[str, Any] = field(default_factory=dict)
    encoder: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.method not in METHOD_NAMES:
            near = closest(self.method, METHOD_NAMES)
            hint = f"did you mean pretrain.method={near}? " if near else ""
            names = ", ".join(METHOD_NAMES)
            raise ConfigError(f"pretrain.method={self.method!r} is not a pretraining method: {hint}use one of {names}")
        texts = self.extra_texts
        if not isinstance(texts, tuple | list) or not all(isinstance(t, str) for t in texts):
            example = as_list_example(texts) if isinstance(texts, str) else None  # one name: the list of it
            shown = list(texts) if isinstance(texts, tuple) else texts
            raise ConfigError(
                f"pretrain.extra_texts={shown!r} must be a list of files, folders or hub names: "
                f"e.g. 'pretrain.extra_texts={example or '[imdb:unsupervised]'}'"
            )
        check_extra_folders(texts)
        if self.without_extra_texts not in WITHOUT_EXTRA_TEXTS:
            raise ConfigError(
                f"pretrain.without_extra_texts={self.without_extra_texts!r} must be one of "
                f"{', '.join(WITHOUT_EXTRA_TEXTS)}: e.g. pretrain.without_extra_texts=scratch"
            )
        check_rules(asdict(self), RULES, prefix="pretrain.")
        check_optimization(self.optimizer, self.scheduler, prefix="pretrain.")
        check_trainer(self.trainer, prefix="pretrain.trainer.")
        self.check_vector_size()

    def check_vector_size(self) -> None:
        """Skip-gram vectors start the embedding, so they are its size: `pretrain.skipgram.dim` is `model.d_model` or
        unset. The fix named is a valid config (a `d_model` that `num_heads` divides)."""
        dim, d_model = self.skipgram.dim, self.encoder.get("d_model")
        if self.method != "skipgram" or dim is None or d_model is None or dim == d_model:
            return
        heads = int(self.encoder.get("num_heads") or 1)
        other = f", or model.d_model={dim} for vectors of {dim}" if dim % heads == 0 else ""
        raise ConfigError(
            f"pretrain.skipgram.dim={dim} but model.d_model={d_model}: the vectors start the embedding, so they are "
            f"its size: e.g. pretrain.skipgram.dim=null (the model's d_model){other}"
        )

    @classmethod
    def from_values(cls, values: Mapping[str, Any], model: Mapping[str, Any] | None = None) -> PretrainConfig:
        """Built from `pretrain.*`'s plain values (and `model.*`'s, for the encoder's sizes); an unknown key is a
        ConfigError naming the nearest one."""
        values = dict(values)
        skipgram = values.get("skipgram") or {}
        values["skipgram"] = settings_of(SkipgramConfig, skipgram, "pretrain.skipgram.", "the skip-gram vectors")
        texts = values.get("extra_texts") or ()
        values["extra_texts"] = tuple(texts) if isinstance(texts, list | tuple) else texts  # else: refused
        settings = settings_of(cls, values, "pretrain.", "the pretraining")
        return settings if model is None else replace(settings, encoder=settings.encoder_of(model))

    def encoder_of(self, model: Mapping[str, Any]) -> dict[str, Any]:
        """The encoder's settings while it pretrains: the classifier's own (`model.*`), with pretraining's dropout and
        positions for its windows."""
        settings = {k: model[k] for k in encoder_fields() if k in model}
        settings["dropout"] = self.dropout
        settings["max_len"] = max(settings.get("max_len", 0), self.max_length)
        return settings

    def recipe(self) -> dict[str, Any]:
        """What shapes the result, as plain data for the cache key: every setting but the groups that run it."""
        return {k: v for k, v in asdict(self).items() if k not in (*GROUPS, "without_extra_texts")}

    @property
    def vector_dim(self) -> int | None:
        """The skip-gram vectors' size: `pretrain.skipgram.dim`, else the encoder's `d_model`."""
        return self.skipgram.dim or self.encoder.get("d_model")


@dataclass(frozen=True)
class PretrainRun:
    """Where a pretraining runs and what it may reuse: its own folder (for a pretraining that runs now), the cache
    folder, whether a cached result for the same texts and settings is taken (train.py) or a new one made
    (pretrain.py), the checkpoint it resumes, and what its loggers record (a `training.hparams.RunRecord`)."""

    output_dir: Path
    cache_dir: Path
    reuse: bool = True
    ckpt_path: str | None = None
    record: Any = None


RULES: dict[str, Rule] = {
    "mask_prob": (lambda v: is_number(v) and 0 < v < 1, "a number in (0, 1)", 0.15),
    "holdout": (lambda v: is_number(v) and 0 < v < 1, "a number in (0, 1)", 0.02),
    "dropout": (lambda v: is_number(v) and 0 <= v < 1, "a number in [0, 1)", 0.0),
    "max_length": (whole(2), "a whole number >= 2", 128),
    "batch_size": (whole(1), "a whole number >= 1", 64),
    "seed": (whole(0), "a whole number >= 0", 0),
}


def check_extra_folders(sources: Sequence[str]) -> None:
    """A local folder in `pretrain.extra_texts` holds the data files its split is read from (`train.*`, or
    `<split>.*` for `folder:<split>`), named under pretrain.extra_texts, not data.path; its files are listed, not
    read."""
    for source in sources:
        where, split, match = Path(source), "train", re.fullmatch(r"(.+):([A-Za-z_][\w-]*)", source)
        if not where.exists() and match:
            where, split = Path(match[1]), match[2]
        if not where.is_dir() or any((where / f).exists() for f in ("dataset_dict.json", "state.json")):
            continue  # a file, a hub name, a save_to_disk folder: the loader's to judge
        files = [f for f in where.rglob("*") if f.suffix.lower() in FORMATS and not f.name.startswith(".")]
        if split == "train":
            named = [f for f in files if re.match(r"[a-z]*", f.stem.lower())[0] in SPLIT_ALIASES]  # type: ignore[index]
        else:
            named = [f for f in files if f.parent == where and f.name.startswith(split)]
        if not named:
            found = sorted(p.name for p in where.iterdir())
            shown = ", ".join(found[:3]) + (", ..." if len(found) > 3 else "") if found else "nothing"
            raise ConfigError(
                f"pretrain.extra_texts: {source!r} holds no {split}.* data file ({', '.join(FORMATS)}; it holds "
                f'{shown}): put its texts in {where / split}.jsonl, one {{"text": ...}} a line (or a .csv, .parquet '
                "with a text column), or give a folder of such files"
            )


def check_overrides(overrides: Sequence[str]) -> None:
    """pretrain.py runs only the pretraining of train.py's config: a command-line override of the fine-tuning's
    trainer, callbacks or loggers would change nothing, so it is refused, naming the key that does; the value moved
    there is checked first, so the fix printed is one the pretraining's checks take."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    for override in overrides:
        key, _, value = override.lstrip("+~").partition("=")
        group, _, leaf = key.partition(".")
        if group not in GROUPS:
            continue
        why = f"{override} sets the fine-tuning's {group}, which pretrain.py does not run: the pretraining's is "
        parsed = OverridesParser.create().parse_override(override)
        if group == "trainer" and leaf and not parsed.is_sweep_override() and not parsed.is_delete():
            try:
                check_trainer({leaf: parsed.value()}, prefix="pretrain.trainer.")
            except ConfigError as err:  # its value is refused there too: that refusal's fix
                raise ConfigError(f"{why}pretrain.trainer, where {err}") from None
        fix = f"pretrain.{key}={value}" if leaf else f"{group}@pretrain.{group}={value}"
        raise ConfigError(f"{why}pretrain.{group}: e.g. {fix}")
