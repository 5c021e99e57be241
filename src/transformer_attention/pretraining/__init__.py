"""Pretraining: `pretrain(settings, data, run)` with its methods as a table (a masked language model of the
encoder, skip-gram word vectors for the embedding), the store of their results, and the `Start` they give a
classifier. The names load with their module on first use, so `pretraining.settings` alone imports no torch."""

from typing import TYPE_CHECKING

from ..checks import lazy_face
from .settings import METHOD_NAMES, PretrainConfig, PretrainRun, SkipgramConfig

if TYPE_CHECKING:
    from .methods import METHODS, Method, pretrain  # noqa: F401
    from .mlm import IGNORE, MaskedLMModule, mask_tokens  # noqa: F401
    from .skipgram import train_vectors  # noqa: F401
    from .start import Start, read_start  # noqa: F401
    from .vectors import WordVectors  # noqa: F401
    from .weights import ARCHITECTURE, PretrainedEncoder  # noqa: F401

__getattr__, _LAZY = lazy_face(__name__, __file__)
__all__ = ["METHOD_NAMES", "PretrainConfig", "PretrainRun", "SkipgramConfig", *_LAZY]
