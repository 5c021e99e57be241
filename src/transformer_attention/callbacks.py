"""What the model does, in TensorBoard (and any other image logger): attention maps, rollout, captions,
a test report.

Tags written (examples and layers count from 0, layer l is `ClassifierOutput.attentions[l]`):

    attention/example_{i}/layer_{l}        image: a panel per head of layer l, then their mean, query x key
    attention/example_{i}/rollout          image: each input token's share in the pooled vector, all layers
    attention/text_{j}/...                 the same for AttentionMapLogger(texts=[...])
    attention/examples                     text: a table of tag, text, true label and prediction
    test/confusion_matrix                  image: counts of (true, predicted)
    test/{precision,recall,f1}/{label}     scalars: per class, at test end
    test/report                            text: the per-class table

The HPARAMS tab is written by `hparams.log_hyperparameters`.
"""

from __future__ import annotations

import logging
import re
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import Logger
from torchmetrics import MetricCollection
from torchmetrics.classification import (
    MulticlassConfusionMatrix,
    MulticlassF1Score,
    MulticlassPrecision,
    MulticlassRecall,
)

from .data.tokenizer import encode
from .image_sinks import image_loggers, log_image, log_text
from .inference import infer
from .plotting import (
    MAX_TOKENS,
    AttentionGrid,
    RolloutBars,
    attention_rollout,
    figure_to_array,
    noted,
    plot_confusion_matrix,
    pooled_rollout,
)

log = logging.getLogger(__name__)


def _image_loggers(trainer: L.Trainer) -> list[Logger]:
    """The trainer's loggers that take images (TensorBoard, MLflow, W&B; none on ranks other than 0)."""
    return image_loggers(trainer.loggers) if trainer.is_global_zero else []


def _label_names(trainer: L.Trainer, pl_module: L.LightningModule, num_classes: int) -> list[str]:
    names = getattr(trainer.datamodule, "label_names", None) or pl_module.hparams.get("label_names")
    return list(names) if names else [str(c) for c in range(num_classes)]


def _text(texts: Sequence[str] | None, i: int, tokenizer: Any, data: Any) -> str:
    """Example `i`'s text: as given, or decoded from its ids where the data keeps no texts (pretraining windows)."""
    return texts[i] if texts else tokenizer.decode([int(t) for t in data.ids[i]])


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


def _cell(text: str) -> str:
    """`text` as one markdown table cell: pipes escaped, whitespace runs (newlines too) made one space."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _timed(fn: Callable[..., Any], *args: Any) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def _render_and_log(
    loggers: list[Logger], tag: str, step: int, description: str, render: Callable, args: tuple
) -> None:
    log_image(loggers, tag, render(*args), step, description)


class AttentionMapLogger(Callback):
    """Every `every_n_epochs` validation epochs, logs each head's attention on fixed examples as
    TensorBoard images, and the attention rollout of each (tags in this module's docstring), at the
    global step; the examples' texts, true labels and predictions go to the TEXT tab.

    The examples are chosen once, at fit start: `num_examples` from the validation split
    (`pick_examples`), plus any `texts` of your own (tagged `text_{j}`, e.g. a negated review).
    Only they go through the model, in eval mode and without gradients; the sanity check is
    skipped. The end of fit is logged too when the last validation was not, so the image slider
    always ends at the trained model.

    Cheap by design: each example's figure (labels, titles, colour bar) is drawn once, at fit start,
    then every step only writes its cells (`AttentionGrid.render`); one image per layer holds all heads
    and their mean (`mean=True`), on the one 0-1 colour scale. With `background=True` the images are
    drawn, encoded and written on a thread of their own (drained at the end of fit, nothing dropped):
    that pays where cores are spare; on 2 busy cores it cost more CPU than it saved (benchmarks/maps.py).
    """

    MAX_PENDING = 64  # images waiting for the writer thread

    def __init__(
        self,
        num_examples: int = 4,
        every_n_epochs: int = 1,
        texts: Sequence[str] | None = None,
        max_tokens: int = MAX_TOKENS,
        split: str = "validation",
        mean: bool = True,
        rollout: bool = True,
        html: bool = True,
        background: bool = False,
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
        if max_tokens < 1:
            raise ValueError(f"max_tokens={max_tokens}: must be >= 1")
        self.num_examples, self.every_n_epochs, self.max_tokens = num_examples, every_n_epochs, max_tokens
        self.split, self.mean, self.rollout, self.html, self.tag = split, mean, rollout, html, tag
        self.background = background  # images drawn, encoded and written on a thread of their own
        self.pages: list[Path] = []  # the interactive views written at the end of fit
        self._last: list[tuple[str, list[str], list, str]] = []  # (name, tokens, attentions, caption) last logged
        self.examples: list[tuple[str, list[int], int | None, str]] = []  # (name, token ids, true label, text)
        self.figures: dict[str, tuple[AttentionGrid, RolloutBars | None]] = {}  # drawn once per example
        self.validations = 0  # validation epochs run, sanity check excluded
        self.last_logged_step: int | None = None
        self.cost = {"logs": 0, "images": 0, "seconds": 0.0, "writing_seconds": 0.0}  # logged at the end of fit
        self._pool: ThreadPoolExecutor | None = None  # encodes and writes the images, off the training thread
        self._pending: deque[Future] = deque()

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        dm = trainer.datamodule
        if getattr(dm, "tokenizer", None) is None:
            log.warning("AttentionMapLogger: the datamodule has no tokenizer; no attention maps")
            return
        if not image_loggers(trainer.loggers):
            log.warning("AttentionMapLogger: no logger that takes images (TensorBoard, MLflow, W&B); no attention maps")
            return
        data = getattr(dm, "splits", {}).get(self.split)
        picked = pick_examples(data.labels, [len(ids) for ids in data.ids], self.num_examples) if data else []
        texts = getattr(data, "texts", None)
        labelled = getattr(pl_module, "predicts_labels", True)  # a masked language model (pretraining) does not
        self.examples = [
            (
                f"example_{j}",
                data.ids[i],
                int(data.labels[i]) if labelled else None,
                _text(texts, i, dm.tokenizer, data),
            )
            for j, i in enumerate(picked)
        ]
        own = encode(dm.tokenizer, self.texts, dm.max_length) if self.texts else []
        self.examples += [
            (f"text_{j}", ids, None, text) for j, (ids, text) in enumerate(zip(own, self.texts, strict=True))
        ]
        self.figures = {}
        if self.examples and self.background and self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attention-maps")
        heads = pl_module.hparams.get("num_heads")
        if self.examples and heads:  # drawn here, on the training thread: on the writer thread it ran 5x slower
            names = _label_names(trainer, pl_module, pl_module.hparams.get("num_classes", 2))
            start = time.perf_counter()
            self._prepare(dm.tokenizer, heads, names)
            self.cost["seconds"] += time.perf_counter() - start

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        if self.validations % self.every_n_epochs == 0:
            self.log_maps(trainer, pl_module)
        self.validations += 1

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.validations and self.last_logged_step != trainer.global_step:
            self.log_maps(trainer, pl_module)
        self._close()
        if self.html and self._last and trainer.is_global_zero:
            self.write_pages(Path(trainer.default_root_dir) / "attention")
        if self.cost["logs"]:
            cost = self.cost
            own = f", {cost['writing_seconds']:.2f} s on their own thread" if self.background else ""
            log.info(
                "attention maps: %d images at %d steps, %.2f s on the training thread%s",
                *(cost["images"], cost["logs"], cost["seconds"], own),
            )

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self._close()  # the images of the steps logged so far are written, not dropped

    def state_dict(self) -> dict[str, Any]:
        return {"validations": self.validations}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.validations = state_dict.get("validations", 0)

    def _title(self, example: str, ids: Sequence[int], label: int | None, text: str, names: list[str]) -> str:
        shown = text if len(text) <= 120 else text[:119] + "\u2026"
        known = f" \u00b7 true: {names[label]}" if label is not None else ""
        return noted(f"{example}{known} \u00b7 \u201c{shown}\u201d", min(len(ids), self.max_tokens), len(ids))

    def _figures(self, name: str, tokens: list[str], heads: int, title: str) -> tuple[AttentionGrid, Any]:
        """The example's grid and rollout bars, built once (`_prepare`, or at its first logged step)."""
        if name not in self.figures:
            panels = [f"head {h}" for h in range(heads)] + (["mean of heads"] if self.mean else [])
            grid = AttentionGrid(tokens, panels, title, status=True)
            bars = RolloutBars(tokens, f"{title} \u00b7 attention rollout", status=True) if self.rollout else None
            grid.prepare()
            if bars is not None:
                bars.prepare()
            self.figures[name] = (grid, bars)
        return self.figures[name]

    def _prepare(self, tokenizer: Any, heads: int, names: list[str]) -> None:
        """Draw every example's figures (labels, titles, colour bars) once, at fit start."""
        for example, ids, label, text in self.examples:
            tokens = [tokenizer.id_to_token(int(t)) for t in ids[: self.max_tokens]]
            self._figures(example, tokens, heads, self._title(example, ids, label, text, names))

    def log_maps(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Run the model on the chosen examples (`infer`: eval mode, no gradients) and log every layer's
        map of each, its rollout and the table of examples."""
        writers = _image_loggers(trainer)
        if not self.examples or not writers:
            return
        start = time.perf_counter()
        dm = trainer.datamodule
        rows = infer(pl_module, [ids for _, ids, _, _ in self.examples], pad_id=dm.pad_id, need_weights=True)
        labelled = getattr(pl_module, "predicts_labels", True)
        names = _label_names(trainer, pl_module, len(rows[0].probabilities))
        pooling = pl_module.hparams.get("pooling", "cls")
        step = trainer.global_step
        table = ["| tag | text | true label | prediction (p) |", "|---|---|---|---|"]
        self._last = []
        for (example, ids, label, text), row in zip(self.examples, rows, strict=True):
            n = min(len(ids), self.max_tokens)
            tokens = [dm.tokenizer.id_to_token(int(t)) for t in ids]  # decoded once: the page shows them all
            pred = int(row.probabilities.argmax())
            said = f"pred: {names[pred]} (p={row.probabilities[pred]:.2f})" if labelled else "pred: -"
            truth = names[label] if label is not None else "-"
            title = self._title(example, ids, label, text, names)
            description = f"{example}: \u201c{text}\u201d (true label: {truth})"  # the same at every step
            table.append(f"| {example} | {_cell(text)} | {_cell(truth)} | {_cell(said[6:])} |")
            layers = row.attentions  # each (H, T, T), T = len(ids)
            caption = f"{description}; {said} at step {step}"
            self._last.append((example, tokens, layers, caption))
            grid, bars = self._figures(example, tokens[:n], heads=layers[0].shape[0], title=title)
            for layer, weights in enumerate(layers):
                maps = weights[:, :n, :n].numpy()  # (H, n, n)
                if self.mean:
                    maps = np.concatenate([maps, maps.mean(axis=0, keepdims=True)])  # (H + 1, n, n)
                status = f"layer {layer} of {len(layers)} \u00b7 step {step} \u00b7 {said}"
                tag = f"{self.tag}/{example}/layer_{layer}"
                self._send(writers, tag, step, description, grid.render, maps, status)
            if bars is not None:
                shares = pooled_rollout(attention_rollout(layers), pooling)[:n]  # (n,)
                what = "[CLS]" if pooling == "cls" else "the mean of the tokens"
                status = f"what {what} reads through {len(layers)} layers \u00b7 step {step}"
                self._send(writers, f"{self.tag}/{example}/rollout", step, description, bars.render, shares, status)
        log_text(writers, f"{self.tag}/examples", "\n".join(table), step)
        self.last_logged_step = step
        self.cost["logs"] += 1
        self.cost["images"] += len(self.examples) * (len(rows[0].attentions) + (1 if self.rollout else 0))
        self.cost["seconds"] += time.perf_counter() - start

    def write_pages(self, folder: Path) -> list[Path]:
        """The interactive attention view (`html_view`: hover a token, pick a layer and heads, the rollout) of
        each example as last logged: `<folder>/<example>.html`, self-contained, opens offline."""
        from .html_view import save_attention_html

        self.pages = [
            save_attention_html(folder / f"{name}.html", tokens, layers, title=name, caption=caption)
            for name, tokens, layers, caption in self._last
        ]
        log.info("attention maps: interactive views of the %d examples in %s", len(self.pages), folder)
        return self.pages

    def _send(self, loggers: list[Logger], tag: str, step: int, description: str, render: Callable, *args: Any) -> None:
        """`render(*args)` (an image's cells and texts into its ready-drawn figure: numpy and Pillow, which
        release the GIL), encoded and written to the loggers, on the writer thread during fit (at most
        `MAX_PENDING` images wait, the training thread waits beyond that: nothing is dropped), else here."""
        if self._pool is None:
            self.cost["writing_seconds"] += _timed(_render_and_log, loggers, tag, step, description, render, args)
            return
        while len(self._pending) >= self.MAX_PENDING:
            self.cost["writing_seconds"] += self._pending.popleft().result()
        job = self._pool.submit(_timed, _render_and_log, loggers, tag, step, description, render, args)
        self._pending.append(job)

    def wait(self) -> None:
        """Block until every image handed to the writer thread is written (errors are raised here)."""
        while self._pending:
            self.cost["writing_seconds"] += self._pending.popleft().result()

    def _close(self) -> None:
        if self._pool is not None:
            try:
                self.wait()
            finally:
                self._pool.shutdown()
                self._pool = None


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
        loggers = _image_loggers(trainer)
        log_image(loggers, f"{self.prefix}/confusion_matrix", image, trainer.global_step)
        log_text(loggers, f"{self.prefix}/report", "\n".join(rows), trainer.global_step)
        self.metrics = None
