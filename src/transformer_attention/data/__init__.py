"""Data: the toy set, Hugging Face review datasets, tokenizer, batches (knows nothing of the model).

The names below load with their module on first use (PEP 562): `data.settings`, all that a config
check needs, imports no torch, lightning or datasets. The same names are imported for type checkers and
IDEs under TYPE_CHECKING, so they see every name and where it lives.
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_face
from ..errors import DataError

if TYPE_CHECKING:
    from .batches import EncodedDataset, collate  # noqa: F401
    from .datamodule import ReviewDataModule  # noqa: F401
    from .pii import PII_TOKENS, scrub_pii  # noqa: F401
    from .sampler import BucketBatchSampler  # noqa: F401
    from .settings import check_data_settings  # noqa: F401
    from .tokenizer import CLS_ID, MASK_ID, PAD_ID, UNK_ID, load_tokenizer, save_tokenizer, train_tokenizer  # noqa: F401
    from .toy import make_toy_splits  # noqa: F401

_NAMES_BY_MODULE = {
    "batches": ("EncodedDataset", "collate"),
    "datamodule": ("ReviewDataModule",),
    "pii": ("PII_TOKENS", "scrub_pii"),
    "sampler": ("BucketBatchSampler",),
    "settings": ("check_data_settings",),
    "tokenizer": ("CLS_ID", "MASK_ID", "PAD_ID", "UNK_ID", "load_tokenizer", "save_tokenizer", "train_tokenizer"),
    "toy": ("make_toy_splits",),
}
__getattr__, _LAZY = lazy_face(__name__, _NAMES_BY_MODULE)
__all__ = ["DataError", *_LAZY]
