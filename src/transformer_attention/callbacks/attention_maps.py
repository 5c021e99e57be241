"""`AttentionMapLogger`: every head's attention on a few fixed texts, in TensorBoard (and any other image
logger), as the model trains.

Tags written (examples and layers count from 0, layer l is `ClassifierOutput.attentions[l]`):

    attention/example_{i}/layer_{l}        image: a panel per head of layer l, then their mean, query x key
    attention/example_{i}/rollout          image: each input token's share in the pooled vector, all layers
    attention/text_{j}/...                 the same for AttentionMapLogger(texts=[...])
    attention/examples                     text: a table of tag, text, true label and prediction

Shapes: H heads, T an example's tokens, n = min(T, max_tokens) the tokens shown.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
from lightning.pytorch.callbacks import Callback

from ..files import shown
from ..inference import infer
from ..plotting import AttentionGrid, RolloutBars, attention_rollout, pooled_rollout, save_attention_html
from ..plotting.style import MAX_TOKENS
from .console import plural
from .examples import Example, Logged, choose_examples, label_names, table_cell
from .sinks import ImageWriter, image_loggers, log_text

log = logging.getLogger(__name__)


class AttentionMapLogger(Callback):
    """Every `every_n_epochs` validation epochs, logs each head's attention on fixed examples as images, and
    the attention rollout of each (tags in this module's docstring), at the global step; the examples' texts,
    true labels and predictions go to the TEXT tab.

    The examples are chosen once, at fit start: `num_examples` from the validation split (`pick_examples`),
    plus any `texts` of your own (tagged `text_{j}`, e.g. a negated review). Only they go through the model,
    in eval mode and without gradients (`infer`); the sanity check is skipped. The end of fit is logged too
    when the last validation was not, so the image slider always ends at the trained model; with `html`, each
    example's interactive page is written then too (`<run>/attention/<example>.html`).

    Cheap by design: each example's figure (labels, titles, colour bar) is drawn once, at fit start, then
    every step only writes its cells (`AttentionGrid.render`); one image per layer holds all heads and their
    mean (`mean=True`), on the one 0-1 colour scale. With `background=True` the images are drawn, encoded and
    written on a thread of their own (`ImageWriter`): that pays where cores are spare; on 2 busy cores it cost
    more CPU than it saved (benchmarks/maps.py).
    """

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
        self.writer = ImageWriter(background=background)
        self.examples: list[Example] = []
        self.figures: dict[str, tuple[AttentionGrid, RolloutBars | None]] = {}  # drawn once per example
        self.last: list[Logged] = []  # what the interactive pages show
        self.pages: list[Path] = []  # the interactive pages written at the end of fit
        self.validations = 0  # validation epochs run, sanity check excluded
        self.last_logged_step: int | None = None
        self.cost = {"logs": 0, "images": 0, "seconds": 0.0}  # logged at the end of fit

    # ---- fit -----------------------------------------------------------------------------------
    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        dm = trainer.datamodule
        if getattr(dm, "tokenizer", None) is None:
            log.warning("AttentionMapLogger: the datamodule has no tokenizer; no attention maps")
            return
        if trainer.fast_dev_run:
            log.info("attention maps: none in a fast_dev_run (it logs nothing)")
            return
        if not image_loggers(trainer.loggers):
            log.warning("AttentionMapLogger: no logger that takes images (TensorBoard, MLflow, W&B); no attention maps")
            return
        labelled = getattr(pl_module, "predicts_labels", True)  # a masked language model (pretraining) does not
        self.examples = choose_examples(dm, self.split, self.num_examples, self.texts, labelled)
        self.figures = {}
        heads = pl_module.hparams.get("num_heads")
        if self.examples and heads:  # drawn here, on the training thread: on the writer thread it ran 5x slower
            start = time.perf_counter()
            names = label_names(trainer, pl_module, pl_module.hparams.get("num_classes", 2))
            for example in self.examples:
                tokens = [dm.tokenizer.id_to_token(int(t)) for t in example.ids[: self.max_tokens]]
                self._figures(example.name, tokens, heads, example.title(names, self.max_tokens))
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
        self.writer.close()
        if self.html and self.last and trainer.is_global_zero:
            self.write_pages(Path(trainer.default_root_dir) / "attention")
        if self.cost["logs"]:
            own = f", {self.writer.seconds:.2f} s on their own thread" if self.writer.background else ""
            log.info(
                "attention maps: %s at %s, %.2f s on the training thread%s",
                *(plural(self.cost["images"], "image"), plural(self.cost["logs"], "step"), self.cost["seconds"], own),
            )

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self.writer.close()  # the images of the steps logged so far are written, not dropped

    def state_dict(self) -> dict[str, Any]:
        return {"validations": self.validations}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.validations = state_dict.get("validations", 0)

    # ---- the maps --------------------------------------------------------------------------------
    def log_maps(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Run the model on the chosen examples (`infer`: eval mode, no gradients) and log every layer's
        map of each, its rollout and the table of examples."""
        writers = image_loggers(trainer.loggers) if trainer.is_global_zero else []  # other ranks hold no writer
        if not self.examples or not writers:
            return
        start = time.perf_counter()
        dm, step = trainer.datamodule, trainer.global_step
        rows = infer(pl_module, [e.ids for e in self.examples], need_weights=True)
        labelled = getattr(pl_module, "predicts_labels", True)
        names = label_names(trainer, pl_module, len(rows[0].probabilities))
        pooling = pl_module.hparams.get("pooling", "cls")
        table = ["| tag | text | true label | prediction (p) |", "|---|---|---|---|"]
        self.last = []
        for example, row in zip(self.examples, rows, strict=True):
            n = min(len(example.ids), self.max_tokens)
            tokens = [dm.tokenizer.id_to_token(int(t)) for t in example.ids]  # all of them: the page shows them
            pred = int(row.probabilities.argmax())
            said = f"{names[pred]} (p={row.probabilities[pred]:.2f})" if labelled else "-"
            truth = names[example.label] if example.label is not None else "-"
            quoted = f"\u201c{example.text}\u201d (true label: {truth})"
            description = f"{example.name}: {quoted}"  # the same at every step: TensorBoard shows the first
            table.append(f"| {example.name} | {table_cell(example.text)} | {table_cell(truth)} | {table_cell(said)} |")
            layers = row.attentions  # each (H, T, T)
            self.last.append(Logged(example.name, tokens, layers, f"{quoted}; pred: {said} at step {step}"))
            title = example.title(names, self.max_tokens)
            grid, bars = self._figures(example.name, tokens[:n], heads=layers[0].shape[0], title=title)
            for layer, weights in enumerate(layers):
                maps = weights[:, :n, :n].numpy()  # (H, n, n)
                if self._with_mean(len(maps)):
                    maps = np.concatenate([maps, maps.mean(axis=0, keepdims=True)])  # (H + 1, n, n)
                status = f"layer {layer} of {len(layers)} \u00b7 step {step} \u00b7 pred: {said}"
                tag = f"{self.tag}/{example.name}/layer_{layer}"
                self.writer.send(writers, tag, step, description, grid.render, maps, status)
            if bars is not None:
                shares = pooled_rollout(attention_rollout(layers), pooling)[:n]  # (n,)
                what = "[CLS]" if pooling == "cls" else "the mean of the tokens"
                through = f"{len(layers)} layer{'s' if len(layers) > 1 else ''}"
                status = f"what {what} reads through {through} \u00b7 step {step}"
                tag = f"{self.tag}/{example.name}/rollout"
                self.writer.send(writers, tag, step, description, bars.render, shares, status)
        log_text(writers, f"{self.tag}/examples", "\n".join(table), step)
        self.last_logged_step = step
        self.cost["logs"] += 1
        self.cost["images"] += len(self.examples) * (len(rows[0].attentions) + (1 if self.rollout else 0))
        self.cost["seconds"] += time.perf_counter() - start

    def wait(self) -> None:
        """Block until every image handed to the writer thread is written (errors are raised here)."""
        self.writer.wait()

    def write_pages(self, folder: Path) -> list[Path]:
        """The interactive attention view (hover a token, pick a layer and heads, the rollout) of each example
        as last logged: `<folder>/<example>.html`, self-contained, opens offline."""
        self.pages = [
            save_attention_html(folder / f"{e.name}.html", e.tokens, e.attentions, title=e.name, caption=e.caption)
            for e in self.last
        ]
        log.info("attention maps: interactive views of %s in %s", plural(len(self.pages), "example"), shown(folder))
        return self.pages

    def _with_mean(self, heads: int) -> bool:
        """The mean panel beside the heads: asked for, and not a copy of the one head."""
        return self.mean and heads > 1

    def _figures(self, name: str, tokens: list[str], heads: int, title: str) -> tuple[AttentionGrid, Any]:
        """The example's grid and rollout bars, built once (at fit start, or at its first logged step)."""
        if name not in self.figures:
            panels = [f"head {h}" for h in range(heads)] + (["mean of heads"] if self._with_mean(heads) else [])
            grid = AttentionGrid(tokens, panels, title, status=True)
            bars = RolloutBars(tokens, f"{title} \u00b7 attention rollout", status=True) if self.rollout else None
            grid.prepare()
            if bars is not None:
                bars.prepare()
            self.figures[name] = (grid, bars)
        return self.figures[name]
