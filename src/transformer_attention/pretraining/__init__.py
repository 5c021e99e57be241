"""Pretraining, in one room: `pretrain(settings, data, run)` (methods.py), which `python pretrain.py` and `python
train.py model.init_from=pretrain` both call, with its methods as a table: a masked language model of the whole
encoder (mlm.py, `MaskedLMModule`) or skip-gram word vectors for the embedding (skipgram.py, gensim); the store of
their results between runs (store.py: key, lock, heal); and what both give a classifier to start from, a `Start`
(start.py: `PretrainedEncoder` in weights.py, `WordVectors` in vectors.py). Its settings (settings.py:
`PretrainConfig`, `SkipgramConfig`) import no torch: the CLI checks a config with them.

The names below load with their module on first use (PEP 562), so `pretraining.settings` alone imports no torch.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .settings import METHOD_NAMES, PretrainConfig, PretrainRun, SkipgramConfig

if TYPE_CHECKING:
    from .methods import METHODS, Method, pretrain  # noqa: F401
    from .mlm import IGNORE, MaskedLMModule, mask_tokens  # noqa: F401
    from .skipgram import train_vectors  # noqa: F401
    from .start import Start, read_start  # noqa: F401
    from .vectors import WordVectors  # noqa: F401
    from .weights import ARCHITECTURE, PretrainedEncoder  # noqa: F401

_NAMES_BY_MODULE = {
    "methods": ("METHODS", "Method", "pretrain"),
    "mlm": ("IGNORE", "MaskedLMModule", "mask_tokens"),
    "skipgram": ("train_vectors",),
    "start": ("Start", "read_start"),
    "vectors": ("WordVectors",),
    "weights": ("ARCHITECTURE", "PretrainedEncoder"),
}
_WHERE = {name: module for module, names in _NAMES_BY_MODULE.items() for name in names}

__all__ = ["METHOD_NAMES", "PretrainConfig", "PretrainRun", "SkipgramConfig", *sorted(_WHERE)]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{_WHERE[name]}", __name__), name)
