"""`AttentionMapLogger`: every head's attention on a few fixed texts, in every image logger, as the model trains:
`attention/example_{i}/layer_{l}` (the heads of layer l, then their mean), `.../rollout`, `.../text`, the same for
`attention/text_{j}/...` (the `texts` given) and `attention/examples`, a table of the texts and predictions."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import TensorBoardLogger

from ..analysis.methods import TEXT_METHOD
from ..analysis.pages import page_methods, quick_words
from ..files import atomic_write, shown
from ..inference import infer
from ..plotting import AttentionGrid, ReviewText, RolloutBars, attention_rollout, pooled_rollout
from ..plotting.html import render_page
from ..plotting.page_data import page_data
from ..plotting.scales import DEFAULT_SCALE, MAP_KINDS, check_kind, check_scale, map_shares
from ..plotting.windows import key_window, window_labels
from ..plotting.words import POOLED_ROW
from .console import plural
from .examples import Example, Logged, choose_examples, label_names, maps_of, pooling_of, table_cell
from .page_summary import log_page
from .sinks import ImageWriter, image_loggers, log_text
from .text_view import check_text_method, text_rows

log = logging.getLogger(__name__)


class AttentionMapLogger(Callback):
    """Every `every_n_epochs` validation epochs and at the end of fit, the maps of `num_examples` fixed examples
    and the `texts` given (settings: docs/attention.md); with `html`, their pages at the end of fit. Figures are
    drawn once, then only their cells; `background`: drawn and written on a thread of their own."""

    def __init__(
        self,
        num_examples: int = 4,
        every_n_epochs: int = 1,
        texts: Sequence[str] | None = None,
        max_tokens: int = 24,
        split: str = "validation",
        mean: bool = True,
        rollout: bool = True,
        html: bool = True,
        background: bool = False,
        tag: str = "attention",
        scale: str = DEFAULT_SCALE,
        text: bool = True,
        text_heads: int = 0,
        kind: str = "weight",
        text_method: str | None = TEXT_METHOD,
    ) -> None:
        self.texts = list(texts or [])
        if num_examples < 0 or (num_examples == 0 and not self.texts):
            raise ValueError(
                f"num_examples={num_examples} and no texts: nothing to show; set num_examples >= 1, "
                "or switch the callback off with callbacks.attention_maps=null"
            )
        if every_n_epochs < 1:
            raise ValueError(f"every_n_epochs={every_n_epochs}: must be >= 1")
        if max_tokens < 2:
            raise ValueError(f"max_tokens={max_tokens}: must be >= 2 ([CLS] and a word)")
        if text_heads < 0:
            raise ValueError(f"text_heads={text_heads}: must be >= 0 (0: no head paragraphs)")
        self.scale, self.kind, self.text, self.text_heads = check_scale(scale), check_kind(kind), text, text_heads
        self.text_method = check_text_method(text_method)
        self.num_examples, self.every_n_epochs, self.max_tokens = num_examples, every_n_epochs, max_tokens
        self.split, self.mean, self.rollout, self.html, self.tag = split, mean, rollout, html, tag
        self.writer = ImageWriter(background=background)
        self.examples: list[Example] = []
        self.figures: dict[str, tuple[list[int], AttentionGrid, RolloutBars | None]] = {}  # per example: window
        self.views: dict[str, ReviewText] = {}  # each example's text view
        self.last: list[Logged] = []  # what the interactive pages show
        self.pages: list[Path] = []  # the interactive pages written at the end of fit
        self._pages: tuple[tuple[int | None, bool] | None, list] = (None, [])  # (step, without module), page data
        self.validations = 0  # validation epochs run, sanity check excluded
        self.last_logged_step: int | None = None
        self.cost: dict[str, Any] = {"logs": 0, "images": 0, "seconds": 0.0}  # logged at the end of fit

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        dm = trainer.datamodule  # type: ignore[attr-defined]  # Lightning sets it, undeclared
        if getattr(dm, "tokenizer", None) is None:
            log.warning("AttentionMapLogger: the datamodule has no tokenizer; no attention maps")
            return
        if trainer.fast_dev_run:  # type: ignore[attr-defined]  # Lightning sets it, undeclared
            log.info("no attention maps in a fast_dev_run (it logs nothing)")
            return
        if not image_loggers(trainer.loggers):
            log.warning("AttentionMapLogger: no logger that takes images (TensorBoard, MLflow, W&B); no attention maps")
            return
        labelled = getattr(pl_module, "predicts_labels", True)  # a masked language model (pretraining) does not
        self.examples = choose_examples(dm, self.split, self.num_examples, self.texts, labelled)
        self.figures, self.views = {}, {}
        heads = pl_module.hparams.get("num_heads")
        if self.examples and heads:  # drawn here, on the training thread: on the writer thread it ran 5x slower
            start = time.perf_counter()
            names = label_names(trainer, pl_module, pl_module.hparams.get("num_classes", 2))
            for example in self.examples:  # a long text's window is known at its first logged step
                if len(example.ids) <= self.max_tokens:
                    tokens = [dm.tokenizer.id_to_token(int(t)) for t in example.ids]
                    self._figures(example, tokens, list(range(len(tokens))), heads, names, pooling_of(pl_module))
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
            start = time.perf_counter()  # the pages' words and weight x norm maps count as the maps' cost
            self.write_pages(Path(trainer.default_root_dir) / "attention", pooling_of(pl_module), pl_module)
            self.cost["seconds"] += time.perf_counter() - start
        if self.cost["logs"]:
            images, steps = plural(self.cost["images"], "image"), plural(self.cost["logs"], "step")
            own = f", {self.writer.seconds:.2f} s on their own thread" if self.writer.background else ""
            log.info("%s at %s, %.2f s on the training thread%s", images, steps, self.cost["seconds"], own)

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self.writer.close()  # the images of the steps logged so far are written, not dropped

    def state_dict(self) -> dict[str, Any]:
        return {"validations": self.validations}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.validations = state_dict.get("validations", 0)

    def log_maps(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Run the model on the examples (`infer`: eval mode, no gradients) and log their images and table."""
        writers = image_loggers(trainer.loggers) if trainer.is_global_zero else []  # other ranks hold no writer
        if not self.examples or not writers:
            return
        start = time.perf_counter()
        dm, step = trainer.datamodule, trainer.global_step  # type: ignore[attr-defined]  # Lightning sets it, undeclared
        results = infer(pl_module, [e.ids for e in self.examples], need_weights=True)
        drawn = infer(pl_module, [e.ids for e in self.examples], need_norms=True) if self.kind == "norm" else results
        labelled = getattr(pl_module, "predicts_labels", True)
        names = label_names(trainer, pl_module, len(results[0].probabilities))
        pooling = pooling_of(pl_module)
        table = ["| tag | text | true label | prediction (p) |", "|---|---|---|---|"]
        self.last, images = [], 0
        for example, result, drawn_from in zip(self.examples, results, drawn, strict=True):
            tokens = [dm.tokenizer.id_to_token(int(t)) for t in example.ids]  # all of them: the page shows them
            pred = int(result.probabilities.argmax())
            said = f"{names[pred]} (p={result.probabilities[pred]:.2f})" if labelled else "-"
            truth = names[example.label] if example.label is not None else "-"
            quoted = f"\u201c{example.text}\u201d (true label: {truth})"
            description = f"{example.name}: {quoted} \u00b7 maps: {MAP_KINDS[self.kind]}"  # TensorBoard shows the first
            at = f"{self.tag}/{example.name}"
            table.append(f"| {example.name} | {table_cell(example.text)} | {table_cell(truth)} | {table_cell(said)} |")
            layers = map_shares(maps_of(drawn_from), self.kind)  # each (H, T, T): weights, or weight x norm shares
            norms = maps_of(drawn_from) if self.kind == "norm" else None  # the page's map switch
            caption = f"{quoted}; pred: {said} at step {step}"
            logged = Logged(example.name, tokens, maps_of(result), caption, norms=norms, ids=example.ids)
            # what the page's words explain: the class predicted (a language model's pages have none)
            self.last.append(replace(logged, predicted=pred, class_name=names[pred] if labelled else ""))
            shares = pooled_rollout(attention_rollout(layers), pooling)  # (T,)
            keep = key_window(shares, self.max_tokens)
            grid, bars = self._figures(example, tokens, keep, layers[0].shape[0], names, pooling)
            for layer, weights in enumerate(layers):
                maps = weights[:, keep][:, :, keep]  # (H, n, n)
                if self._with_mean(len(maps)):
                    maps = np.concatenate([maps, maps.mean(axis=0, keepdims=True)])  # (H + 1, n, n)
                status = f"layer {layer} of {len(layers)} \u00b7 step {step} \u00b7 pred: {said}"
                self.writer.send(writers, f"{at}/layer_{layer}", step, description, grid.render, maps, status)
            if bars is not None and len(layers) > 1:  # a 1-layer rollout is that layer's mean: drawn already
                status = f"what {POOLED_ROW[pooling]} reads through {plural(len(layers), 'layer')} \u00b7 step {step}"
                self.writer.send(writers, f"{at}/rollout", step, description, bars.render, shares[keep], status)
            images += len(layers) + (bars is not None and len(layers) > 1)
            if self.text and labelled:
                view, pooled, labels = self._text_view(example, tokens, pl_module, layers, shares, pred, names)
                status = f"step {step} \u00b7 pred: {said} \u00b7 true: {truth}"
                self.writer.send(writers, f"{at}/text", step, description, view.render, pooled, labels, status)
                images += 1
        log_text(writers, f"{self.tag}/examples", "\n".join(table), step)
        self.last_logged_step = step
        tensorboard = [lg.experiment for lg in writers if isinstance(lg, TensorBoardLogger)] if self.html else []
        for name, data in self.page_data(pooling, pl_module) if tensorboard else []:  # the ATTENTION tab's pages
            for experiment in tensorboard:
                log_page(experiment, f"{self.tag}/{name}", data, step)
        self.cost["logs"], self.cost["images"] = self.cost["logs"] + 1, self.cost["images"] + images
        self.cost["seconds"] += time.perf_counter() - start

    def wait(self) -> None:
        """Block until every image handed to the writer thread is written (errors are raised here)."""
        self.writer.wait()

    def write_pages(self, folder: Path, pooling: str = "cls", module: Any = None) -> list[Path]:
        """Each example's interactive page as last logged, `<folder>/<example>.html` (`page_data`'s)."""
        pages = self.page_data(pooling, module)
        self.pages = [atomic_write(folder / f"{name}.html", render_page(data)) for name, data in pages]
        log.info("interactive attention views of %s in %s", plural(len(self.pages), "example"), shown(folder))
        return self.pages

    def page_data(self, pooling: str = "cls", module: Any = None) -> list[tuple[str, dict[str, Any]]]:
        """Each example's page data as last logged, by its name (its page and the ATTENTION tab show it); with the
        `module`, with the map switch and the word attributions (opening on the text method, as predict.py's).
        Made once per logged step: the tab's pages at the last step are the files' pages."""
        if self._pages[0] != (self.last_logged_step, module is None):
            pages = [
                (
                    e.name,
                    page_data(
                        e.tokens,
                        e.attentions,
                        title=e.name,
                        caption=e.caption,
                        pooling=pooling,
                        norms=e.norms if e.norms is not None or norms is None else maps_of(norms),
                        **words,
                    ),
                )
                for e, norms, words in zip(self.last, self._norms(module), self._words(module), strict=True)
            ]
            self._pages = ((self.last_logged_step, module is None), pages)
        return self._pages[1]

    def _norms(self, module: Any) -> list[Any]:
        """The norm-weighted maps of the examples that lack them (one pass; None each without a module)."""
        lacking = [e for e in self.last if e.norms is None]
        if module is None or not lacking:
            return [None] * len(self.last)
        rows = iter(infer(module, [e.ids for e in lacking], need_norms=True))
        return [next(rows) if e.norms is None else None for e in self.last]

    def _words(self, module: Any) -> list[dict[str, Any]]:
        """Each page's word attributions, for the class predicted (analysis/pages.py), in one batch; without a
        module (or the examples' classes: a language model's), the methods' names alone."""
        if module is None or not all(e.class_name for e in self.last):
            return [page_methods() for _ in self.last]
        names = {e.predicted: e.class_name for e in self.last}
        net = getattr(module, "net", module)
        return quick_words(net, [e.ids for e in self.last], [e.predicted for e in self.last], names)

    def _with_mean(self, heads: int) -> bool:
        return self.mean and heads > 1  # one head's mean is a copy of it

    def _figures(
        self, example: Example, tokens: list[str], keep: list[int], heads: int, names: list[str], pooling: str
    ) -> tuple[AttentionGrid, RolloutBars | None]:
        """The example's grid and rollout bars for the tokens `keep`, drawn once (again when the window moves)."""
        if self.figures.get(example.name, ([],))[0] != keep:
            title = example.title(names, keep, pooling)
            panels = [f"head {h}" for h in range(heads)] + (["mean of heads"] if self._with_mean(heads) else [])
            kept, rollout = window_labels(tokens, keep), f"{title} \u00b7 attention rollout"
            n = len(tokens)  # the uniform scale's n: the whole text, not the window
            grid = AttentionGrid(kept, panels, title, status=True, scale=self.scale, kind=self.kind, length=n)
            bars = (
                RolloutBars(kept, rollout, status=True, scale=self.scale, kind=self.kind, length=n)
                if self.rollout
                else None
            )
            for figure in (grid, bars) if bars is not None else (grid,):
                figure.prepare()
            self.figures[example.name] = (keep, grid, bars)
        return self.figures[example.name][1:]

    def _text_view(
        self, example: Example, tokens: list[str], module: Any, layers: list, shares: Any, pred: int, names: list
    ) -> tuple[ReviewText, np.ndarray, list[str]]:
        """The example's text view (made at its first logged step) and the rows and labels it renders now; its
        attribution explains the second class of two on every card (one meaning of blue), else the class predicted."""
        pooling = pooling_of(module)
        explained = len(names) - 1 if len(names) == 2 else pred  # two classes: the same class on every card
        pooled, labels, scored = text_rows(
            module,
            example.ids,
            layers,
            pooling=pooling,
            heads=self.text_heads,
            shares=shares,
            method=self.text_method,
            predicted=explained,
            class_name=names[explained],
        )
        if example.name not in self.views:
            title, scale, kind = example.title(names, None, pooling), self.scale, self.kind
            view = ReviewText(
                tokens, len(pooled), title, status=True, pooling=pooling, scale=scale, kind=kind, signed=scored
            )
            self.views[example.name] = view
        return self.views[example.name], pooled, labels
