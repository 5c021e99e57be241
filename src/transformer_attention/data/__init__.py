"""Data: the toy set, Hugging Face review datasets, tokenizer, batches (knows nothing of the model). The names
load with their module on first use, so `data.settings`, all that a config check needs, imports no torch."""

from typing import TYPE_CHECKING

from ..checks import lazy_face
from ..errors import DataError

if TYPE_CHECKING:
    from .batches import EncodedDataset as EncodedDataset
    from .batches import collate as collate
    from .datamodule import ReviewDataModule as ReviewDataModule
    from .pii import PII_TOKENS as PII_TOKENS
    from .pii import scrub_pii as scrub_pii
    from .sampler import BucketBatchSampler as BucketBatchSampler
    from .settings import check_data_settings as check_data_settings
    from .tokenizer import CLS_ID as CLS_ID
    from .tokenizer import MASK_ID as MASK_ID
    from .tokenizer import PAD_ID as PAD_ID
    from .tokenizer import UNK_ID as UNK_ID
    from .tokenizer import load_tokenizer as load_tokenizer
    from .tokenizer import save_tokenizer as save_tokenizer
    from .tokenizer import train_tokenizer as train_tokenizer
    from .toy import make_toy_splits as make_toy_splits

__getattr__, _LAZY = lazy_face(__name__, __file__)
__all__ = ["DataError", *_LAZY]
