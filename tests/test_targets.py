"""Every value that a rule or a library refuses is one `config error:` line naming the key, before any data is read.
The rules refuse their values before torch is even imported (a bad value fails in about a second); every `_target_`
a user can change is then tried (the optimiser and its schedule built on a dummy parameter, the Trainer's,
callbacks' and loggers' arguments bound to their signatures), so a value nobody wrote a rule for is named too. A fix
that a message suggests is itself a valid config."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from conftest import TINY, entry_env, run_entry, run_warm
from test_config import conf  # noqa: F401 - the fixture
from test_fail_early import one_line

from transformer_attention.cli.config import check_config
from transformer_attention.errors import ConfigError
from transformer_attention.training.targets import try_group, try_optimization, try_signature

NO_TORCH = "import sys\nraise ImportError('torch imported before the config was refused')\n"

BEFORE_TORCH = [  # (entry, overrides, what the line says)
    ("train.py", "model.optimizer.weight_decay=-1", "model.optimizer.weight_decay=-1 must be a number >= 0"),
    ("train.py", "+model.optimizer.betas=[2,0.9]", "model.optimizer.betas=[2,0.9] must be two numbers in [0, 1)"),
    ("train.py", "trainer.accumulate_grad_batches=0", "trainer.accumulate_grad_batches=0 must be a whole number >= 1"),
    ("train.py", "trainer.gradient_clip_val=-1", "trainer.gradient_clip_val=-1 must be a number >= 0"),
    (
        "train.py",
        "model.init_from=pretrain pretrain.method=skipgram pretrain.skipgram.dim=17",
        "pretrain.skipgram.dim=17 but model.d_model=64",
    ),
    ("pretrain.py", "pretrain.optimizer.weight_decay=-1", "pretrain.optimizer.weight_decay=-1 must be a number"),
    ("pretrain.py", "+pretrain.optimizer.betas=[2,0.9]", "pretrain.optimizer.betas=[2,0.9] must be two numbers"),
    ("pretrain.py", "pretrain.trainer.accumulate_grad_batches=0", "pretrain.trainer.accumulate_grad_batches=0 must"),
    ("pretrain.py", "pretrain.trainer.gradient_clip_val=-1", "pretrain.trainer.gradient_clip_val=-1 must be a"),
    ("pretrain.py", "pretrain.method=skipgram pretrain.skipgram.dim=16", "pretrain.skipgram.dim=16 but model.d_model"),
    ("pretrain.py", "trainer.max_epochs=1", "trainer.max_epochs=1 sets the fine-tuning's trainer"),
    ("pretrain.py", "logger=csv", "logger=csv sets the fine-tuning's logger, which pretrain.py does not run"),
]


def left_runs(log_dir: Path) -> list[Path]:
    """The run folders under `log_dir` (train's and pretrain's)."""
    return [run for task in ("train", "pretrain") for run in (log_dir / task / "runs").glob("*")]


@pytest.mark.parametrize(("script", "overrides", "says"), BEFORE_TORCH)
def test_a_refused_value_is_one_line_before_torch_and_its_fix_composes(conf, tmp_path, script, overrides, says):  # noqa: F811, E501
    """The entry point refuses with torch made unimportable (so: before torch, before any data), leaves no run
    folder, and the config with the fix the line suggests instead of the bad value passes the same check."""
    fake = tmp_path / "no_torch" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(NO_TORCH)
    env = {**entry_env(), "PYTHONPATH": str(fake.parent)}
    log_dir = tmp_path / "out"
    given = shlex.split(overrides)
    proc = run_entry(script, *given, f"paths.log_dir={log_dir}", check=False, env=env)
    line = one_line(proc, "config error")
    assert says in line, line
    assert not left_runs(log_dir), "a run folder was left"
    bad = line.removeprefix("config error: ").split()[0].lstrip("+").split("=", 1)[0]  # the key the line names
    quoted, bare = re.search(r"e\.g\. (?:'([^']+)'|([^ ,)]+))", line).groups()  # the first fix the line names
    fix = quoted or bare
    kept = [o for o in given if o.lstrip("+").split("=", 1)[0] != bad]
    task = script.removesuffix(".py")
    check_config(conf(*kept, fix, config_name=task), task=task)


def test_a_value_no_rule_knows_is_named_by_the_library_that_refuses_it():
    """Values only the library checks: named by key, with the library's reason, before any data."""
    sgd = {"_target_": "torch.optim.SGD", "_partial_": True, "lr": 0.1, "nesterov": True}  # nesterov needs momentum
    with pytest.raises(ConfigError, match=r"model\.optimizer\.nesterov=True: torch\.optim\.SGD refuses it \(Nesterov"):
        try_optimization(sgd, None, prefix="model.")
    step = {"_target_": "torch.optim.lr_scheduler.StepLR", "_partial_": True, "step_size": 10}  # takes no total_steps
    with pytest.raises(ConfigError, match=r"model\.scheduler \(torch\.optim\.lr_scheduler\.StepLR\) refused its"):
        try_optimization(None, step, prefix="model.")
    with pytest.raises(ConfigError, match=r"pretrain\.optimizer\.lrr is not an argument of torch\.optim\.AdamW: did"):
        try_optimization({"_target_": "torch.optim.AdamW", "_partial_": True, "lrr": 0.1}, None, prefix="pretrain.")
    try_optimization({"_target_": "torch.optim.AdamW", "_partial_": True, "lr": 0.1}, None, prefix="model.")  # fine


def test_trainer_callbacks_and_loggers_are_bound_to_their_signatures_nested_targets_too():
    trainer = {"_target_": "lightning.pytorch.trainer.Trainer", "max_epoch": 3}
    with pytest.raises(ConfigError, match=r"trainer\.max_epoch is not an argument of .*Trainer: did you mean "):
        try_signature(trainer, "trainer.")
    profiler = {"_target_": "lightning.pytorch.profilers.SimpleProfiler", "dir_path": "x"}
    with pytest.raises(ConfigError, match=r"pretrain\.trainer\.profiler\.dir_path is not an argument"):
        try_signature({"_target_": "lightning.pytorch.trainer.Trainer", "profiler": profiler}, "pretrain.trainer.")
    callbacks = {"ckpt": {"_target_": "lightning.pytorch.callbacks.ModelCheckpoint", "every_n_epoch": 2}, "off": None}
    with pytest.raises(ConfigError, match=r"callbacks\.ckpt\.every_n_epoch .* did you mean callbacks\.ckpt\.every_n_"):
        try_group(callbacks, "callbacks.")
    with pytest.raises(ConfigError, match=r"logger\.tb\._target_=no\.such\.Logger: no such class"):
        try_group({"tb": {"_target_": "no.such.Logger"}}, "logger.")
    try_signature({"_target_": "lightning.pytorch.trainer.Trainer", "max_epochs": 3, "profiler": None}, "trainer.")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("script", "override", "says"),
    [
        ("train.py", "+pretrain.trainer.max_epoch=2", "pretrain.trainer.max_epoch is not an argument"),
        ("train.py", "+model.optimizer.foo=1", "model.optimizer.foo is not an argument of torch.optim.AdamW"),
        ("pretrain.py", "+pretrain.callbacks.model_checkpoint.every_n_epoch=1", "every_n_epoch is not an argument"),
    ],
)
def test_a_target_refused_at_the_task_start_reads_no_data_and_leaves_nothing(tmp_path, script, override, says):
    """train.py model.init_from=pretrain tries its pretraining's targets too, whether or not that pretraining runs:
    nothing is tokenized, cached or pretrained, and no run folder is left."""
    log_dir = tmp_path / "out"
    args = [*TINY, "model.init_from=pretrain"] if script == "train.py" else []
    proc = run_warm(script, *args, override, f"paths.log_dir={log_dir}", check=False)
    line = one_line(proc, "config error")
    assert says in line, line
    assert "tokenizing" not in proc.stdout + proc.stderr and not (log_dir / ".cache").exists()  # no data read
    assert not left_runs(log_dir)  # nor a run folder left


def test_the_rules_and_the_try_out_agree_on_the_defaults(conf):  # noqa: F811
    """The shipped configs pass both: every rule, and every target tried."""
    for name in ("train", "pretrain"):
        cfg = conf(config_name=name)
        check_config(cfg, task=name)
        for prefix, node in (("model.", cfg.model), ("pretrain.", cfg.pretrain)):
            try_optimization(node.get("optimizer"), node.get("scheduler"), prefix=prefix)
        try_signature(cfg.trainer, "trainer.")
        try_signature(cfg.pretrain.trainer, "pretrain.trainer.")
        for group in ("callbacks", "logger"):
            try_group(cfg[group], f"{group}.")
            try_group(cfg.pretrain[group], f"pretrain.{group}.")
