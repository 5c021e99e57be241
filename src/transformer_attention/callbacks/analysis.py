"""`ModelAnalysis`: at the end of fit, which heads matter, how faithful each attribution is, in `<run>/analysis/`
and every image logger (`keep_analysis`, evaluate.py's too), `analysis/{heads,pruning,faithfulness,summary}`."""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import lightning as L
from hydra.core.hydra_config import HydraConfig
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import Logger

from ..analysis.faithfulness import passes as faithfulness_passes
from ..analysis.heads import passes as heads_passes
from ..analysis.plan import HEADS_SPLIT, Plan, analysis_settings, plan
from ..analysis.run import Analysis, run_analyses
from ..analysis.settings import check_analyses, check_method_names
from ..analysis.write import images, summary, text_table, write_files
from ..checks import is_number
from ..data.toy import deciding_words_for
from ..errors import ConfigError
from ..files import shown
from ..inference import probabilities
from ..model.classifier import TransformerClassifier
from .console import seconds
from .interrupt import evaluate_command, resume_command, stop_on_signals
from .sinks import image_loggers, log_image, log_text

log = logging.getLogger(__name__)

COMMAND_WIDTH = 100  # a printed command longer than this goes on to further lines (a console line stays readable)
WARM_ROWS = 64  # run before the estimate's timed pass: a cold first pass took 2.4x a warm one

READING = (
    "comprehensiveness: p(predicted class) minus p after removing a method's top k% words (higher: it found words "
    "the prediction needs); sufficiency: p minus p with only those words (lower: they suffice); AOPC: the mean "
    "drop as words are removed in the method's order, 0 to 100% in steps of 10 (higher is better). random is the "
    "floor a method should beat."
)


def keep_analysis(result: Analysis, folder: Path, loggers: Sequence[Logger], step: int, label: str = "") -> None:
    """What the analyses found, as figures, JSON and table in `folder` and figures and tables in the `loggers` at
    `step`; `label` (which weights were analysed) goes in the figures' titles."""
    drawn = images(result, label)
    write_files(result, folder, drawn)
    loggers = image_loggers(loggers)
    for name, image in drawn.items():
        log_image(loggers, f"analysis/{name}", image, step)
    if result.faithfulness is not None:
        per_k = "Each k's values, with standard errors: faithfulness.md in the run's analysis folder."
        log_text(loggers, "analysis/faithfulness", f"{text_table(result)}\n\n{READING} {per_k}", step)
    log_text(loggers, "analysis/summary", "\n".join(f"    {line}" for line in summary(result)), step)


def classifier_of(pl_module: L.LightningModule) -> TransformerClassifier:
    """The TransformerClassifier a module trains, its `net` (ClassifierModule's; LightningModule declares none)."""
    return cast(TransformerClassifier, pl_module.net)


# what the end of fit scores: attention and its norm-weighted form, the decompositions and the references (IG and
# leave-one-out) and the random floor; ALTI, value zeroing, the norm rollout, gradient x input: evaluate.py's
FIT_END_METHODS = (
    "attention", "rollout", "attention_norm", "decompx", "attnlrp", "integrated_gradients", "leave_one_out", "random",
)  # fmt: skip


class ModelAnalysis(Callback):
    """At the end of fit, on the best checkpoint: head importance and faithfulness on the validation split
    (`settings`: conf/analysis), skipped, with the evaluate.py command that runs it, when it would cost more than
    `max_cost` times the fit (None: always run). `methods`: unless `analysis.methods` names them (null: all)."""

    def __init__(
        self,
        analyses: Sequence[str] = ("heads", "faithfulness"),
        settings: Mapping[str, Any] | None = None,
        max_cost: float | None = 0.25,
        normalized: bool = False,
        methods: Sequence[str] | None = FIT_END_METHODS,
    ) -> None:
        self.names = check_analyses(list(analyses), key="callbacks.model_analysis.analyses")
        self.settings = analysis_settings(settings)
        self.settings.normalized = self.settings.normalized and normalized
        if self.settings.methods is None and methods is not None:  # analysis.methods, when given, wins
            self.settings.methods = check_method_names(list(methods), "callbacks.model_analysis.methods")
        if max_cost is not None and (not is_number(max_cost) or max_cost <= 0):
            raise ConfigError(
                f"callbacks.model_analysis.max_cost={max_cost!r} must be a positive share of the fit's time "
                "(null: always run): e.g. callbacks.model_analysis.max_cost=0.1"
            )
        self.max_cost = max_cost
        self.plan: Plan | None = None
        self.started = 0.0
        self.result: Analysis | None = None
        self.cost: dict[str, float] = {}  # estimated and spent seconds, the fit's, after the end of fit

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.started = time.perf_counter()
        dm = trainer.datamodule  # type: ignore[attr-defined]  # Lightning sets it, undeclared
        splits = getattr(dm, "splits", {})
        if not self.names or getattr(dm, "tokenizer", None) is None or HEADS_SPLIT not in splits:
            self.plan = None
            return
        sizes = {name: len(data) for name, data in splits.items()}
        self.plan = plan(self.names, self.settings, sizes, split=HEADS_SPLIT)  # a ConfigError before training

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.plan is None or not trainer.is_global_zero or trainer.interrupted:
            return
        fit_seconds = time.perf_counter() - self.started
        dm = trainer.datamodule  # type: ignore[attr-defined]  # Lightning sets it, undeclared
        saved, fit = self.saved_checkpoint(trainer), seconds(fit_seconds)
        again = (lambda: self.command(shown(saved))) if saved is not None else resume_command  # noqa: E731
        # Lightning's own SIGTERM handler is gone once the fit has ended: a stop from here on says what to run
        what = "the end-of-fit analysis, before the test (the fit's checkpoints and metrics are saved)"
        with stop_on_signals(lambda: what, again=again):
            estimate = self.estimate(classifier_of(pl_module), dm.splits)
            self.cost = {"fit_seconds": fit_seconds, "estimated_seconds": estimate}
            if self.max_cost is not None and estimate > self.max_cost * fit_seconds:
                self.skipped(trainer, saved, estimate, fit_seconds)
                return
            start = time.perf_counter()
            net, weights = self.kept_model(trainer, pl_module)
            self.result = run_analyses(
                net,
                self.plan,
                splits=dm.splits,
                tokenizer=dm.tokenizer,
                label_names=dm.label_names,
                deciding_words=deciding_words_for(dm),
            )
        self.result.settings["weights"] = weights
        folder = Path(trainer.default_root_dir) / "analysis"
        keep_analysis(self.result, folder, trainer.loggers, trainer.global_step, label=weights)
        spent = self.cost["seconds"] = time.perf_counter() - start
        for line in summary(self.result):
            log.info("%s", line)
        share = 100 * spent / max(fit_seconds, 1e-9)
        said = f"{seconds(spent)}, {share:.0f}% of the fit's {fit} (estimated {seconds(estimate)}), of {weights}"
        log.info("model analysis: %s:\n  %s", said, shown(folder))

    def skipped(self, trainer: L.Trainer, saved: Path | None, estimate: float, fit_seconds: float) -> None:
        """Say that the analysis is skipped as too long, and the command that runs it on the saved checkpoint."""
        if saved is None:
            fast_dev_run = trainer.fast_dev_run  # type: ignore[attr-defined]  # Lightning sets it, undeclared
            why = "a fast_dev_run saves none" if fast_dev_run else "this run saved none"
            log.info("model analysis skipped: it needs a checkpoint and %s (python evaluate.py analyses=...)", why)
            return
        share = estimate / max(fit_seconds, 1e-9)
        cost = f"about {seconds(estimate)}, {share:.2f}x the fit's {seconds(fit_seconds)}"
        limit = f"callbacks.model_analysis.max_cost={self.max_cost}"
        command = self.command(shown(saved), width=COMMAND_WIDTH)
        log.info("model analysis skipped: %s, more than %s; to run it:\n  %s", cost, limit, command)

    @staticmethod
    def kept_model(trainer: L.Trainer, pl_module: L.LightningModule) -> tuple[TransformerClassifier, str]:
        """The best checkpoint's weights in a copy of the module's net (else the net as fit ends), and which."""
        best = getattr(trainer.checkpoint_callback, "best_model_path", "") or ""
        if not best or not Path(best).is_file():
            return classifier_of(pl_module), "the weights at the end of fit"
        state = trainer.strategy.load_checkpoint(best, weights_only=True)["state_dict"]
        net = copy.deepcopy(classifier_of(pl_module))
        net.load_state_dict({k.removeprefix("net."): v for k, v in state.items() if k.startswith("net.")})
        return net, f"the best checkpoint {Path(best).name}"

    @staticmethod
    def saved_checkpoint(trainer: L.Trainer) -> Path | None:
        """The checkpoint the analyses can run on later: the best one, else a last.ckpt (None: none saved)."""
        best = getattr(trainer.checkpoint_callback, "best_model_path", "") or ""
        candidates = [Path(best)] if best else []
        candidates += [Path(d) / "last.ckpt" for c in trainer.checkpoint_callbacks if (d := getattr(c, "dirpath", ""))]
        return next((path for path in candidates if path.is_file()), None)

    def command(self, ckpt: str, width: int | None = None) -> str:
        """The evaluate.py command that runs the same analyses on `ckpt` (which records its data), with this run's
        `analysis.*` and seed overrides; it tests the checkpoint too. `width`: in lines of about that many
        characters, continued with backslashes."""
        kept = []
        if HydraConfig.initialized():
            given = HydraConfig.get().overrides.task
            kept = [o for o in given if o.lstrip("+~").startswith(("analysis.", "seed="))]
        analyses = f"analyses=[{','.join(self.names)}]"  # quoted: [ ] are a shell's globs (zsh refuses them)
        return evaluate_command(ckpt, analyses, "analysis.split=validation", *kept, width=width)

    def estimate(self, net: TransformerClassifier, splits: Mapping[str, Any]) -> float:
        """Seconds the planned analyses would take: a timed warm pass over the validation rows gives the seconds a
        token, times the passes each analysis says it makes (`passes`, a backward counted as two forwards)."""
        s, chosen = self.settings, self.plan
        assert chosen is not None  # on_fit_end estimates a run that has a plan
        rows = list(splits[HEADS_SPLIT].ids)
        probabilities(net, rows[:WARM_ROWS], batch_size=s.batch_size)  # a cold first pass took 2.4x a warm one
        start = time.perf_counter()
        probabilities(net, rows, batch_size=s.batch_size)
        per_token = (time.perf_counter() - start) / max(1, sum(len(r) for r in rows))
        tokens = 0.0
        for name in chosen.names:
            picked, _ = chosen.rows(name, splits)
            if name == "heads":
                passes = heads_passes(len(picked), num_layers=net.config.num_layers, num_heads=net.config.num_heads)
            else:
                passes = faithfulness_passes(
                    picked,
                    k=s.k,
                    methods=s.methods,
                    ig_steps=s.ig_steps,
                    normalized=s.normalized,
                    classes=net.head.out_features,
                )
            tokens += passes.cost * sum(len(r) for r in picked) / max(1, len(picked))
        return tokens * per_token
