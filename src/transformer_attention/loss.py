"""What ClassifierModule's training loss adds to plain cross-entropy, its settings written once: `LossConfig`.
`ModelConfig` (the schema of `conf/model/`) is made of it and EncoderConfig, and `ClassifierModule` takes its
fields as keyword arguments, with these defaults, and keeps them as hyperparameters under the same names.
Standard library only: a config is checked before torch is imported."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass
class LossConfig:
    """The training loss's settings; the regularisers are in model/regularizers.py."""

    label_smoothing: float = 0.0  # cross-entropy's: this share of the target spread evenly over the classes
    word_dropout: float = 0.0  # in training, each real token leaves the attention mask with this probability
    adversarial_eps: float = 0.0  # > 0: the loss also on embeddings moved eps along its gradient (Miyato 2017)


LOSS_FIELDS = tuple(f.name for f in fields(LossConfig))
