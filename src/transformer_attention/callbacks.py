"""What the model does, in TensorBoard: attention maps, a test report, the run's hyperparameters.

Tags written (examples and layers count from 0, layer l is `ClassifierOutput.attentions[l]`):

    attention/example_{i}/layer_{l}        image: one panel per head of layer l, query x key
    attention/example_{i}/layer_{l}_mean   image: the same map averaged over the heads
    attention/text_{j}/layer_{l}[_mean]    the same for AttentionMapLogger(texts=[...])
    test/confusion_matrix                  image: counts of (true, predicted)
    test/{precision,recall,f1}/{label}     scalars: per class, at test end
    test/report                            text: the per-class table

`log_hyperparameters` puts the resolved config in the HPARAMS tab, one row per run, with the
`val/acc_best` and test metric series of that run as columns.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import Logger, TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_only
from torch.utils.tensorboard.summary import hparams
from torchmetrics import MetricCollection
from torchmetrics.classification import (
    MulticlassConfusionMatrix,
    MulticlassF1Score,
    MulticlassPrecision,
    MulticlassRecall,
)

from .data.tokenizer import encode
from .inference import infer
from .plotting import MAX_TOKENS, figure_to_array, plot_attention, plot_confusion_matrix

log = logging.getLogger(__name__)

HPARAM_METRICS = ("val/acc_best", "val/acc", "val/loss", "test/acc", "test/f1", "test/loss")


def _tensorboards(trainer: L.Trainer) -> list[Any]:
    """The SummaryWriters of the trainer's TensorBoard loggers (none on ranks other than 0)."""
    if not trainer.is_global_zero:
        return []
    return [lg.experiment for lg in trainer.loggers if isinstance(lg, TensorBoardLogger)]


def _label_names(trainer: L.Trainer, pl_module: L.LightningModule, num_classes: int) -> list[str]:
    names = getattr(trainer.datamodule, "label_names", None) or pl_module.hparams.get("label_names")
    return list(names) if names else [str(c) for c in range(num_classes)]


def pick_examples(labels: Sequence[int], lengths: Sequence[int], k: int) -> list[int]:
    """`k` dataset indices that mix the classes (in turn) and the lengths (spread over each class's
    length quantiles, short to long). Deterministic: the same data gives the same examples."""
    by_class: dict[int, list[int]] = {}
    for i in sorted(range(len(labels)), key=lambda i: (lengths[i], i)):
        by_class.setdefault(int(labels[i]), []).append(i)
    classes = sorted(by_class)
    counts = dict.fromkeys(classes, 0)
    for _ in range(min(k, len(labels))):  # deal the k picks out in turn, as far as a class has examples
        c = min((c for c in classes if counts[c] < len(by_class[c])), key=lambda c: (counts[c], c))
        counts[c] += 1
    picks = {  # the middles of `counts[c]` equal slices of the length-sorted class
        c: [by_class[c][int((j + 0.5) * len(by_class[c]) / counts[c])] for j in range(counts[c])] for c in classes
    }
    rounds = max(counts.values(), default=0)
    return [picks[c][j] for j in range(rounds) for c in classes if j < counts[c]]


class AttentionMapLogger(Callback):
    """Every `every_n_epochs` validation epochs, logs each head's attention on fixed examples as
    TensorBoard images (tags in this module's docstring), at the global step.

    The examples are chosen once, at fit start: `num_examples` from the validation split
    (`pick_examples`), plus any `texts` of your own (tagged `text_{j}`, e.g. a negated review).
    Only they go through the model, in eval mode and without gradients; the sanity check is
    skipped. The end of fit is logged too when the last validation was not, so the image slider
    always ends at the trained model.
    """

    def __init__(
        self,
        num_examples: int = 4,
        every_n_epochs: int = 1,
        texts: Sequence[str] | None = None,
        max_tokens: int = MAX_TOKENS,
        split: str = "validation",
        mean: bool = True,
        tag: str = "attention",
    ) -> None:
        self.texts = list(texts or [])
        if num_examples < 0 or (num_examples == 0 and not self.texts):
            raise ValueError(
                f"num_examples={num_examples} and no texts: nothing to show; set num_examples >= 1, "
                "or switch the callback off with callbacks.attention_maps=null"
            )
        if every_n_epochs < 1:
            raise ValueError(f"every_n_epochs={every_n_epochs}: must be >= 1")
        self.num_examples, self.every_n_epochs, self.max_tokens = num_examples, every_n_epochs, max_tokens
        self.split, self.mean, self.tag = split, mean, tag
        self.examples: list[tuple[str, list[int], int | None]] = []  # (name, token ids, true label)
        self.validations = 0  # validation epochs run, sanity check excluded
        self.last_logged_step: int | None = None

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        dm = trainer.datamodule
        if getattr(dm, "tokenizer", None) is None:
            log.warning("AttentionMapLogger: the datamodule has no tokenizer; no attention maps")
            return
        if not any(isinstance(lg, TensorBoardLogger) for lg in trainer.loggers):
            log.warning("AttentionMapLogger: no TensorBoard logger; no attention maps")
            return
        data = getattr(dm, "splits", {}).get(self.split)
        picked = pick_examples(data.labels, [len(ids) for ids in data.ids], self.num_examples) if data else []
        self.examples = [(f"example_{j}", data.ids[i], int(data.labels[i])) for j, i in enumerate(picked)]
        own = encode(dm.tokenizer, self.texts, dm.max_length) if self.texts else []
        self.examples += [(f"text_{j}", ids, None) for j, ids in enumerate(own)]

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        if self.validations % self.every_n_epochs == 0:
            self.log_maps(trainer, pl_module)
        self.validations += 1

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.validations and self.last_logged_step != trainer.global_step:
            self.log_maps(trainer, pl_module)

    def state_dict(self) -> dict[str, Any]:
        return {"validations": self.validations}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.validations = state_dict.get("validations", 0)

    def log_maps(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Run the model on the chosen examples (`infer`: eval mode, no gradients) and log every layer's
        map of each."""
        writers = _tensorboards(trainer)
        if not self.examples or not writers:
            return
        dm = trainer.datamodule
        rows = infer(pl_module, [ids for _, ids, _ in self.examples], pad_id=dm.pad_id, need_weights=True)
        names = _label_names(trainer, pl_module, len(rows[0].probabilities))
        step = trainer.global_step
        for (example, ids, label), row in zip(self.examples, rows, strict=True):
            tokens = [dm.tokenizer.id_to_token(int(t)) for t in ids]
            pred = int(row.probabilities.argmax())
            title = f"pred: {names[pred]} (p={row.probabilities[pred]:.2f})"
            if label is not None:
                title = f"true: {names[label]}, {title}"
            for layer, weights in enumerate(row.attentions):  # each (H, T, T), T = len(ids)
                maps = {f"layer_{layer}": (weights, f"{title}, layer {layer}")}
                if self.mean:
                    maps[f"layer_{layer}_mean"] = (weights.mean(dim=0), f"{title}, layer {layer}, mean of heads")
                for name, (w, caption) in maps.items():
                    image = figure_to_array(plot_attention(tokens, w, caption, max_tokens=self.max_tokens))  # (H, W, 3)
                    for writer in writers:
                        writer.add_image(f"{self.tag}/{example}/{name}", image, global_step=step, dataformats="HWC")
        self.last_logged_step = step


def _safe_tag(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "label"


class ClassificationReport(Callback):
    """At test end: a confusion-matrix image, per-class precision / recall / F1 as scalars (also in
    `trainer.callback_metrics`) and as a text table. Reads the `{"preds", "labels"}` that
    `ClassifierModule.test_step` returns."""

    def __init__(self, prefix: str = "test") -> None:
        self.prefix = prefix
        self.metrics: MetricCollection | None = None

    def on_test_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        C = pl_module.hparams.num_classes
        self.metrics = MetricCollection(
            {
                "confusion": MulticlassConfusionMatrix(C),
                "precision": MulticlassPrecision(C, average=None),
                "recall": MulticlassRecall(C, average=None),
                "f1": MulticlassF1Score(C, average=None),
            }
        ).to(pl_module.device)

    def on_test_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if not isinstance(outputs, Mapping) or "preds" not in outputs:
            raise TypeError(f"ClassificationReport needs test_step to return {{'preds', 'labels'}}, got {outputs!r}")
        self.metrics.update(outputs["preds"], outputs["labels"])

    def on_test_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        result = {k: v.cpu() for k, v in self.metrics.compute().items()}  # synced across processes
        names = _label_names(trainer, pl_module, result["confusion"].shape[0])
        rows = ["| class | precision | recall | f1 | support |", "|---|---|---|---|---|"]
        for c, name in enumerate(names):
            for metric in ("precision", "recall", "f1"):
                pl_module.log(f"{self.prefix}/{metric}/{_safe_tag(name)}", result[metric][c].item())
            scores = " | ".join(f"{result[m][c]:.4f}" for m in ("precision", "recall", "f1"))
            rows.append(f"| {name} | {scores} | {int(result['confusion'][c].sum())} |")
        image = figure_to_array(plot_confusion_matrix(result["confusion"], names, f"{self.prefix}: confusion matrix"))
        for w in _tensorboards(trainer):
            w.add_image(f"{self.prefix}/confusion_matrix", image, global_step=trainer.global_step, dataformats="HWC")
            w.add_text(f"{self.prefix}/report", "\n".join(rows), global_step=trainer.global_step)
        self.metrics = None


def flatten_config(config: Mapping, prefix: str = "") -> dict[str, int | float | str]:
    """`{"model": {"d_model": 64}}` -> `{"model.d_model": 64}`; lists, None, bools and the like as strings
    (TensorBoard would show a bool as 0 / 1)."""
    flat: dict[str, int | float | str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten_config(value, f"{name}."))
        else:
            flat[name] = value if isinstance(value, (int, float, str)) and not isinstance(value, bool) else str(value)
    return flat


@rank_zero_only
def log_hyperparameters(
    loggers: Sequence[Logger], config: Mapping, metrics: Sequence[str | None] = HPARAM_METRICS
) -> None:
    """Log the resolved run config to every logger. TensorBoard also gets an HPARAMS session: the
    flattened config (`model.d_model`, ... as in Hydra overrides) and, as its metric columns, the
    `metrics` scalar series of the run (None and repeats dropped). Only names are declared: no
    placeholder values in the scalar series.

    The session goes into the logger's own event file, through its SummaryWriter's public `file_writer`:
    a second event file in the run folder could sort after the logger's (same second, uid 9 vs 10), and a
    live `tensorboard` follows only a run's newest file, so it would stop showing the run's new scalars."""
    names = dict.fromkeys(m for m in metrics if m)
    summaries = hparams(flatten_config(config), dict.fromkeys(names, 0.0))  # experiment, session start, end
    for lg in loggers:
        lg.log_hyperparams(dict(config))
        if isinstance(lg, TensorBoardLogger):
            for summary in summaries:
                lg.experiment.file_writer.add_summary(summary)
