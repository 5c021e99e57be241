"""The from-scratch Transformer encoder (imports torch only).

Names load on first use (PEP 562), so `model.config` alone, what a config check needs, imports no torch.
The same names are imported for type checkers and IDEs under TYPE_CHECKING.
"""

from typing import TYPE_CHECKING

from ..checks import lazy_face
from .config import ATTENTION_IMPLS, EncoderConfig

if TYPE_CHECKING:  # `X as X`: the names this package exports, for type checkers
    from .attention import MultiHeadAttention as MultiHeadAttention
    from .attention import scaled_dot_product_attention as scaled_dot_product_attention
    from .attention import sdpa_attention as sdpa_attention
    from .classifier import ClassifierOutput as ClassifierOutput
    from .classifier import TransformerClassifier as TransformerClassifier
    from .classifier import pool as pool
    from .encoder import TransformerEncoder as TransformerEncoder
    from .encoder import TransformerEncoderLayer as TransformerEncoderLayer
    from .masks import causal_mask as causal_mask
    from .masks import padding_mask as padding_mask
    from .positional import LearnedPositionalEncoding as LearnedPositionalEncoding
    from .positional import SinusoidalPositionalEncoding as SinusoidalPositionalEncoding
    from .probes import gated_heads as gated_heads
    from .probes import norm_weighted_forward as norm_weighted_forward

__getattr__, _LAZY = lazy_face(__name__, __file__)
__all__ = ["ATTENTION_IMPLS", "EncoderConfig", *_LAZY]
