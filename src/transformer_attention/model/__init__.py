"""The from-scratch Transformer encoder (imports torch only).

Names load on first use (PEP 562), so `model.config` alone, what a config check needs, imports no torch.
The same names are imported for type checkers and IDEs under TYPE_CHECKING.
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_face
from .config import ATTENTION_IMPLS, EncoderConfig

if TYPE_CHECKING:
    from .attention import MultiHeadAttention, scaled_dot_product_attention, sdpa_attention  # noqa: F401
    from .chunked import chunked_attention  # noqa: F401
    from .classifier import ClassifierOutput, TransformerClassifier  # noqa: F401
    from .encoder import TransformerEncoder, TransformerEncoderLayer  # noqa: F401
    from .masks import causal_mask, padding_mask  # noqa: F401
    from .positional import LearnedPositionalEncoding, SinusoidalPositionalEncoding  # noqa: F401
    from .probes import gated_heads, norm_weighted_forward  # noqa: F401

_NAMES_BY_MODULE = {
    "attention": ("MultiHeadAttention", "scaled_dot_product_attention", "sdpa_attention"),
    "chunked": ("chunked_attention",),
    "classifier": ("ClassifierOutput", "TransformerClassifier"),
    "encoder": ("TransformerEncoder", "TransformerEncoderLayer"),
    "masks": ("causal_mask", "padding_mask"),
    "positional": ("LearnedPositionalEncoding", "SinusoidalPositionalEncoding"),
    "probes": ("gated_heads", "norm_weighted_forward"),
}
__getattr__, _LAZY = lazy_face(__name__, _NAMES_BY_MODULE)
__all__ = ["ATTENTION_IMPLS", "EncoderConfig", *_LAZY]
