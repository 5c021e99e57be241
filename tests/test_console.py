"""A console a person reads: each log line once, short (time, source, the level where it is not INFO), no vendor
tips, no warnings or progress bars the project's own set-up causes; the config as what a run changes; a text
Hydra cannot parse refused in one line that names the quoting that works. The run's log file keeps every line."""

from __future__ import annotations

import json
import logging
import re
import shlex
from collections import Counter

import lightning.pytorch  # noqa: F401  (its handlers exist before the test looks)
import pytest
import yaml
from conftest import ROOT, TINY, run_dirs, run_entry
from omegaconf import OmegaConf

from transformer_attention.callbacks.console import plural, seconds
from transformer_attention.cli.config import check_config
from transformer_attention.cli.console import ConsoleHandler, FileOnly, ShortFormat, fit
from transformer_attention.cli.entry import check_command_line
from transformer_attention.cli.tree import print_config_tree
from transformer_attention.compat import DropTips, quiet_console
from transformer_attention.errors import ConfigError

LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d (\w+)( [A-Z]+)?: (.*)$")  # the console's: time, source, level if not INFO
FILE_LINE = re.compile(r"^\[[\d\- :,]+\]\[([\w.]+)\]\[(\w+)\] - (.*)$")  # the log file's: Hydra's format


def test_a_run_prints_each_line_once(tmp_path):
    proc = run_entry("train.py", *TINY, f"paths.log_dir={tmp_path / 'outputs'}")
    out = proc.stdout + proc.stderr
    messages = [m.group(3) for line in out.splitlines() if (m := LOG_LINE.match(line))]
    lightning = [m for line in out.splitlines() if (m := LOG_LINE.match(line)) and m.group(1) == "lightning"]
    assert lightning, out  # Lightning's lines are there, in the console's format
    repeated = {text: n for text, n in Counter(messages).items() if n > 1}
    assert not repeated, repeated
    assert not [
        line for line in out.splitlines() if line.startswith(("INFO: ", "WARNING: "))
    ]  # Lightning's own handler
    assert out.count(" console: model: ") == 1 and out.count(" trainable), ") == 1  # the model summary once
    assert "Tip:" not in out and "litlogger" not in out
    assert "deprecated" not in out.lower()
    assert "GPU available" in out and "final metrics" in out  # the useful lines stay
    assert "Seed set to" not in out and "Restoring states" not in out  # what only the file needs
    (run,) = run_dirs(tmp_path / "outputs")
    kept = (run / "train.log").read_text()
    for text in ("GPU available", "Seed set to", "Restoring states", "] - model: "):  # the file keeps every line
        assert text in kept, text
    assert all(FILE_LINE.match(line) for line in kept.splitlines() if line.startswith("[20"))


def test_quiet_console_is_idempotent_and_leaves_a_bare_session_alone():
    root = logging.getLogger()
    saved = root.handlers[:]
    try:
        root.handlers = []  # e.g. a notebook: Lightning's own handler is the only one that prints
        before = logging.getLogger("lightning").handlers[:]
        quiet_console()
        assert logging.getLogger("lightning").handlers == before
        root.addHandler(logging.NullHandler())
        quiet_console()
        quiet_console()
        assert not [h for h in logging.getLogger("lightning").handlers if type(h) is logging.StreamHandler]
        rank_zero = logging.getLogger("lightning.pytorch.utilities.rank_zero")
        assert sum(isinstance(f, DropTips) for f in rank_zero.filters) == 1
        tip = logging.LogRecord("x", logging.INFO, "f", 1, "\U0001f4a1 Tip: try this product", None, None)
        assert not DropTips().filter(tip)
        assert DropTips().filter(logging.LogRecord("x", logging.INFO, "f", 1, "GPU available: False", None, None))
    finally:
        root.handlers = saved


# ---- the config: what a run changes, the whole tree in its folder ----------------------------------------
def composed(*overrides: str, config_name: str = "train", return_hydra: bool = False):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            return compose(config_name, overrides=list(overrides), return_hydra_config=return_hydra)
    finally:
        GlobalHydra.instance().clear()


LONG = "/tmp/" + "a-folder-with-a-long-name/" * 8 + "logs"  # longer than any terminal line


def test_the_console_shows_what_a_run_changes_and_they_compose_back(tmp_path, capsys):
    """Each printed change is a `key: value` line that, given back as overrides to the defaults, composes the same
    config (nothing missing, nothing extra); the whole tree goes to the file, named on a line of its own."""
    overrides = [
        "experiment=toy",
        "model.num_heads=8",
        "tags=[a,b]",
        "callbacks.lr_monitor=null",
        f"paths.log_dir={LONG}",
    ]
    cfg, defaults = composed(*overrides), composed()
    print_config_tree(cfg, save_to=tmp_path / "config_tree.log", unused=("pretrain",), defaults=defaults)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("config: what this run changes") and "console.tree=full" in lines[0]
    assert lines[-1] == f"config: all of it in {tmp_path / 'config_tree.log'}"
    printed = [line.strip() for line in lines[1:-1]]
    assert {"model.num_heads: 8", "tags: [a, b]", "callbacks.lr_monitor: null", f"paths.log_dir: {LONG}"} <= set(
        printed
    ), printed
    assert "trainer.accelerator: cpu" not in printed  # experiment=toy's trainer=cpu changes no value: not shown
    again = composed(*[line.replace(": ", "=", 1) for line in printed])
    assert OmegaConf.to_container(again, resolve=False) == OmegaConf.to_container(cfg, resolve=False)
    assert not [line for line in lines if line != line.rstrip()]
    assert print_lines_of(capsys, composed(), defaults) == ["config: the defaults (console.tree=full prints all of it)"]


@pytest.mark.parametrize("overrides", [[], ["model.num_heads=8"]])
def test_a_run_given_no_overrides_is_the_defaults_without_composing_them(overrides, monkeypatch, capsys):
    """A Hydra run given no overrides is its entry's defaults: the tree says so and HPARAMS checks no column, without
    composing the defaults again; a run given overrides still compares against the composed defaults."""
    from hydra.core.hydra_config import HydraConfig

    from transformer_attention.cli import tree
    from transformer_attention.training import hparams

    composes = []
    defaults = composed()

    def default_config():
        composes.append(1)
        return defaults

    monkeypatch.setattr(tree, "default_config", default_config)
    monkeypatch.setattr(hparams, "default_config", default_config)
    cfg = composed(*overrides)
    with_hydra = composed(*overrides, return_hydra=True)
    OmegaConf.set_readonly(with_hydra.hydra, False)
    with_hydra.hydra.overrides.task = list(overrides)
    previous = HydraConfig.instance().cfg
    HydraConfig.instance().set_config(with_hydra)
    try:
        print_config_tree(cfg)
        differ = hparams.differing_keys({"model.num_heads": cfg.model.num_heads, "seed": cfg.seed})
    finally:
        HydraConfig.instance().cfg = previous
    first = capsys.readouterr().out.splitlines()[0]
    if overrides:
        assert first.startswith("config: what this run changes") and differ == ["model.num_heads"]
        assert composes
    else:
        assert first == "config: the defaults (console.tree=full prints all of it)" and differ == []
        assert not composes


def print_lines_of(capsys, cfg, defaults) -> list[str]:
    print_config_tree(cfg, defaults=defaults)
    return capsys.readouterr().out.splitlines()


def test_the_whole_tree_is_plain_yaml_each_setting_once_each_path_on_one_line(tmp_path, capsys):
    cfg = composed("console.tree=full", f"paths.log_dir={LONG}")
    print_config_tree(cfg, save_to=tmp_path / "config_tree.log", unused=("pretrain",))
    shown, saved = capsys.readouterr().out, (tmp_path / "config_tree.log").read_text()
    assert shown.startswith("data:\n") and "\npretrain:" not in shown and "\npretrain:" in saved
    for text in (shown, saved):
        assert text.count("ig_steps: 32") == 1  # the analysis settings once; the callback points at them
        assert "settings: ${analysis}" in text
        assert f"log_dir: {LONG}\n" in text  # never wrapped
        assert not [line for line in text.splitlines() if line != line.rstrip()]
    tree = yaml.safe_load(saved)
    assert tree["model"]["num_heads"] == 4 and tree["console"]["tree"] == "full"
    assert OmegaConf.to_container(cfg.analysis) == tree["analysis"]


# ---- texts on the command line -----------------------------------------------------------------------------
TEXTS = ["the plot is thin, but the acting is great", "it's not bad", "фильм хороший, 映画は良い"]


def documented(key: str, text: str) -> str:
    """The quoting docs/using-models.md gives, as typed in a shell."""
    return f'"{key}=\\"{text}\\""' if "'" in text else f"'{key}=\"{text}\"'"


@pytest.mark.parametrize("text", TEXTS)
def test_a_text_quoted_as_documented_reaches_predict_whole(text):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    typed = documented("text", text)
    assert typed in (ROOT / "docs" / "using-models.md").read_text()  # the guide shows this very command line
    (arg,) = shlex.split(typed)  # what the shell hands over
    check_command_line(["ckpt_path=model.ckpt", arg])  # passes
    assert OverridesParser.create().parse_override(arg).value() == text
    assert composed("ckpt_path=x", arg, config_name="predict").text == text


@pytest.mark.parametrize("text", TEXTS)
def test_a_text_hydra_cannot_parse_is_one_line_naming_the_quoting_that_works(text):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    for args in ([f"text={text}"], ["ckpt_path=x", *f"text={text}".split(" ")]):  # shell-quoted, or not at all
        with pytest.raises(SystemExit) as stop:
            check_command_line(args)
        message = str(stop.value.code)
        assert "\n" not in message and message.startswith("override error: "), message
        fix = message.rsplit(": ", 1)[1]
        assert fix == documented("text", text), message
        (arg,) = shlex.split(fix)
        assert OverridesParser.create().parse_override(arg).value() == text


def test_lists_flags_and_sweeps_pass_the_command_line_check():
    check_command_line(["-m", "model.num_heads=2,4", 'texts=["a, b", "c"]', "--config-name", "train", "+x=1"])
    check_command_line(["--cfg", "job", "model.d_model=64", "~callbacks.early_stopping", "--info", "plugins"])
    check_command_line(["hparams_search=optuna", "model.dropout=interval(0.1,0.5)", "model.num_heads=2,4"])
    with pytest.raises(SystemExit, match="quote each text inside the list"):
        check_command_line(["texts=[it's, fine]"])


def test_predict_refuses_an_unquoted_text_in_one_line_before_any_work(tmp_path):
    proc = run_entry("predict.py", "ckpt_path=nothing.ckpt", "text=it's not bad", cwd=tmp_path, check=False)
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr.strip() == (
        'override error: "text=it\'s not bad": Hydra cannot read it unquoted; put the text in double quotes, '
        'escaped for the shell: "text=\\"it\'s not bad\\""'
    )
    assert proc.stderr.strip() in (ROOT / "docs" / "using-models.md").read_text()  # the guide shows this very line


# ---- Trainer settings people set, without "+" ------------------------------------------------------------
def test_common_trainer_settings_override_without_plus_and_stay_checked():
    import inspect

    from lightning.pytorch import Trainer

    from transformer_attention.training.targets import try_run_groups

    defaults = inspect.signature(Trainer).parameters
    own = OmegaConf.to_container(composed().trainer)
    added = ("max_steps", "max_time", "gradient_clip_algorithm", "val_check_interval", "num_sanity_val_steps")
    for key in (*added, "detect_anomaly", "overfit_batches", "accumulate_grad_batches", "limit_val_batches"):
        assert own[key] == defaults[key].default, key  # present, with Lightning's own default
    set_ = ["trainer.accumulate_grad_batches=4", "trainer.gradient_clip_algorithm=value", "trainer.max_steps=20"]
    set_ += ["trainer.val_check_interval=0.5", "trainer.num_sanity_val_steps=0", "trainer.max_time=00:00:10:00"]
    cfg = composed(*set_)
    check_config(cfg)
    try_run_groups(OmegaConf.to_container(cfg.trainer), {}, {}, prefix="")
    for bad, named in [
        ("trainer.gradient_clip_algorithm=clip", "must be norm or value"),
        ("trainer.max_steps=-2", "whole number >= -1"),
        ("trainer.num_sanity_val_steps=1.5", "whole number >= -1"),
    ]:
        with pytest.raises(ConfigError, match=named):
            check_config(composed(bad))


# ---- small helpers of the console ----------------------------------------------------------------------
def test_seconds_and_plurals_read_right():
    times = [seconds(x) for x in (0.0, 0.04, 0.4, 9.94, 12.4, 270)]
    assert times == ["<0.01 s", "0.04 s", "0.40 s", "9.9 s", "12 s", "4.5 min"]
    assert [plural(n, "batch") for n in (0, 1, 7)] == ["0 batches", "1 batch", "7 batches"]


def test_short_format_names_the_source_and_only_an_unusual_level():
    fmt = ShortFormat()
    record = logging.LogRecord("transformer_attention.callbacks.console", logging.INFO, "f", 1, "epoch 1", None, None)
    assert re.fullmatch(r"\d\d:\d\d:\d\d console: epoch 1", fmt.format(record))
    record = logging.LogRecord("lightning.pytorch.utilities.rank_zero", logging.WARNING, "f", 1, "hm", None, None)
    assert re.fullmatch(r"\d\d:\d\d:\d\d lightning WARNING: hm", fmt.format(record))
    assert not FileOnly().filter(logging.LogRecord("x", logging.INFO, "f", 1, "TPU available: False", None, None))
    # a line that names its source first is not prefixed with it again (`skipgram: skip-gram: ...`)
    name = "transformer_attention.pretraining.skipgram"
    record = logging.LogRecord(name, logging.INFO, "f", 1, "skip-gram: epoch 1/10", None, None)
    assert re.fullmatch(r"\d\d:\d\d:\d\d skip-gram: epoch 1/10", fmt.format(record))
    record = logging.LogRecord(name, logging.WARNING, "f", 1, "skip-gram: no texts", None, None)
    assert re.fullmatch(r"\d\d:\d\d:\d\d WARNING skip-gram: no texts", fmt.format(record))


PATH = "/tmp/pytest-of-someone/pytest-12/popen-gw0/test_a_run0/outputs/train/runs/2026-12-06_06-59-28-266530/an"


@pytest.mark.parametrize("width", [40, 80, 120])
@pytest.mark.parametrize(
    "text",
    [
        "07:00:14 analysis:   method      compr.   suff.    AOPC   AUPRC  tok F1   s/text   (compr., suff.: "
        "mean over k = 10, 20, 50%)",
        f"07:00:02 attention_maps: interactive attention views of 4 examples in {PATH}",
        f"config: all of it in {PATH}/config_tree.log\n  short line\n" + "word " * 40,
    ],
)
def test_console_lines_fit_the_terminal_breaking_between_words_only(text, width):
    """A line over the terminal's width is broken between words, never inside one or inside a path: every line
    fits but one that is a single word (a path longer than the terminal, alone on its line); the words, in order,
    are the text's."""
    lines = fit(text, width).split("\n")
    assert all(len(line) <= width or len(line.split()) == 1 for line in lines), lines
    assert " ".join(" ".join(lines).split()) == " ".join(text.split())  # no word cut, lost or added
    assert fit(text, None) == text  # not a terminal (a file, a pipe): lines stay whole
    for line in text.split("\n"):
        if len(line) <= width:
            assert line in lines  # a line that fits is left as it is


def test_the_same_warning_twice_shows_once_on_the_console(capsys):
    """Two readers of the same data (the pretraining's and the classifier's) warn the same; the console says it
    once, other warnings and every info line as often as they come."""
    handler = ConsoleHandler()
    handler.setFormatter(ShortFormat())

    def record(text: str, level: int) -> logging.LogRecord:
        return logging.LogRecord("transformer_attention.data.splits", level, "f", 1, text, None, None)

    warn, other = record("validation carved from train", logging.WARNING), record("another", logging.WARNING)
    info = record("data toy: reading its texts", logging.INFO)
    for record in (warn, info, warn, info, other):
        handler.handle(record)
    said = [line.split(": ", 1)[1] for line in capsys.readouterr().out.splitlines()]
    assert said == ["validation carved from train", *[info.getMessage()] * 2, "another"]


def test_a_run_resumed_in_place_hears_nothing_of_its_own_checkpoints(tmp_path):
    """Lightning's "exists and is not empty" about the run's own checkpoints/ is silenced; about any other folder
    it still speaks (a dirpath a user set)."""
    import warnings

    from transformer_attention.training.checkpoint import expect_checkpoints

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        expect_checkpoints(tmp_path / "run")
        warnings.warn(f"Checkpoint directory {tmp_path / 'run' / 'checkpoints'} exists and is not empty.", stacklevel=1)
        warnings.warn(f"Checkpoint directory {tmp_path / 'other'} exists and is not empty.", stacklevel=1)
    assert [str(w.message) for w in caught] == [f"Checkpoint directory {tmp_path / 'other'} exists and is not empty."]


# ---- third-party progress bars -----------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_reading_a_file_draws_no_progress_bar_in_a_captured_run(tmp_path, capfd, suffix):
    import datasets

    from transformer_attention.data.sources import load_columns

    rows = [{"text": f"review number {i}", "label": i % 2} for i in range(20)]
    path = tmp_path / f"reviews{suffix}"
    if suffix == ".csv":
        path.write_text("text,label\n" + "".join(f"{r['text']},{r['label']}\n" for r in rows))
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    datasets.enable_progress_bars()  # as a fresh process has them
    raw, _ = load_columns("local", None, {"train": str(path)}, "text", "label")
    assert raw["train"]["text"] == [r["text"] for r in rows]
    captured = capfd.readouterr()
    assert "Generating" not in captured.err + captured.out and "it/s" not in captured.err


def test_the_first_epoch_line_after_a_mid_epoch_resume_gives_that_epochs_time(monkeypatch, caplog):
    """A fit resumed in the middle of an epoch starts no epoch (Lightning skips on_train_epoch_start): the first line
    times the epoch from the resumed fit's start, not from whenever the clock began (2,177 s in the issue)."""
    from types import SimpleNamespace

    from transformer_attention.callbacks import console

    times = [1000.0, 1002.5]  # the clock when the resumed fit starts and when its first epoch ends
    monkeypatch.setattr(console.time, "perf_counter", lambda: times.pop(0) if len(times) > 1 else times[0])
    monkeypatch.setattr(console.LineProgress, "_metrics", lambda self, trainer, module: "train/loss 0.5")
    trainer = SimpleNamespace(max_epochs=5, current_epoch=2, global_step=7)
    bar = console.LineProgress()
    with caplog.at_level(logging.INFO, logger=console.__name__):
        bar.on_train_start(trainer, None)  # then straight to the epoch's end, as after a mid-epoch resume
        bar.on_train_epoch_end(trainer, None)
    assert "epoch 3/5, step 7, 2.5 s | train/loss 0.5" in caplog.text
