"""Bad input a careless user types, each refused in one line before any work: the line names the key and a fix that,
pasted into a shell, composes and passes the run's checks; no run folder is left; and a config refused as it is
composed is refused before torch is imported (so before any data, model or checkpoint is touched), which holds
however busy the cores are."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import ROOT, entry_env
from test_config import conf  # noqa: F401 - the fixture
from test_fail_early import one_line

from transformer_attention.cli.config import check_config, read_words
from transformer_attention.errors import ConfigError
from transformer_attention.model import config as model_config
from transformer_attention.model.config import check_encoder


def shell(script: str, *args: str, log_dir: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python <script> args...` through bash, as a person types it (each arg as written, shell quoting included)."""
    line = f"{shlex.quote(sys.executable)} {ROOT / script} {' '.join(args)} paths.log_dir={log_dir}"
    env = env or entry_env()
    return subprocess.run(["bash", "-c", line], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def without_torch(tmp_path_factory) -> dict[str, str]:
    """An environment in which `import torch` fails loudly: a refusal that still comes as its one line there came
    before torch, so before any data, model or checkpoint work."""
    folder = tmp_path_factory.mktemp("no_torch")
    (folder / "torch").mkdir()
    (folder / "torch" / "__init__.py").write_text("raise ImportError('torch was imported before the refusal')\n")
    env = entry_env()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(folder), env.get("PYTHONPATH", "")) if p)
    return env


def refused(script: str, *args: str, log_dir: Path, env: dict[str, str] | None = None) -> str:
    """The one `config error:` line of a refused command (in `env`, default the user's); no run folder is left."""
    proc = shell(script, *args, log_dir=log_dir, env=env)
    line = one_line(proc, "config error")
    assert not log_dir.exists(), sorted(log_dir.rglob("*"))
    return line


def test_without_torch_an_accepted_run_fails_on_importing_it(tmp_path: Path, without_torch: dict[str, str]):
    """The check below can fail: a run that passes the config checks imports torch and fails there."""
    proc = shell("train.py", "trainer.max_epochs=1", log_dir=tmp_path / "out", env=without_torch)
    assert proc.returncode != 0 and "torch was imported before the refusal" in proc.stdout + proc.stderr


# (script, what the user typed, what the line must say, the fix it must give)
COMPOSITION = [
    ("pretrain.py", "trainer.max_epochs=1", "the pretraining's is pretrain.trainer", "pretrain.trainer.max_epochs=1"),
    ("pretrain.py", "+trainer.max_epochs=1", "the pretraining's is pretrain.trainer", "pretrain.trainer.max_epochs=1"),
    ("train.py", "model.ngram_buckets=abc", "model.ngram_buckets takes a whole number, not abc",
     "model.ngram_buckets=0"),
    ("train.py", "model.ngram_max=2.5", "model.ngram_max takes a whole number, not 2.5", "model.ngram_max=2"),
    ("train.py", "analysis.normalized=maybe", "analysis.normalized takes true or false, not maybe",
     "analysis.normalized=true"),
    ("evaluate.py", "analysis.target=null", "analysis.target takes a word, not null", "analysis.target=predicted"),
    # Hydra's own message, on one line: it names the key and the fix
    ("train.py", "+trainer.accumulate_grad_batches=2", "An item is already at 'trainer.accumulate_grad_batches'",
     "'++trainer.accumulate_grad_batches=2'"),
    ("train.py", "'model.optimizer.betas=[0.8,0.9]'", "model.optimizer has no key betas",
     "'+model.optimizer.betas=[0.8,0.9]'"),
    ("train.py", "trainer.max_epoch=3", "trainer has no key max_epoch", "trainer.max_epochs=3"),
    ("train.py", "sed=3", "the config has no key sed", "seed=3"),
    ("train.py", "modle.num_heads=2", "the config has no key modle", "model.num_heads=2"),
    ("train.py", "data=imbd", "the data group has no option imbd", "data=imdb"),
]  # fmt: skip


@pytest.mark.parametrize(("script", "typed", "says", "fix"), COMPOSITION, ids=[c[1] for c in COMPOSITION])
def test_an_override_hydra_refuses_is_one_line_with_a_fix_that_works(
    tmp_path: Path,
    conf,  # noqa: F811
    without_torch: dict[str, str],
    script: str,
    typed: str,
    says: str,
    fix: str,  # noqa: F811
):
    line = refused(script, "ckpt_path=none.ckpt", typed, log_dir=tmp_path / "out", env=without_torch)
    assert says in line and fix in line, line
    pasted = subprocess.run(  # the fix, pasted: the shell and Hydra take it
        ["bash", "-c", f"{sys.executable} {ROOT / script} ckpt_path=none.ckpt {fix} --cfg job --package _global_"],
        cwd=ROOT, env=entry_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert pasted.returncode == 0, pasted.stderr[-2000:]
    (unquoted,) = shlex.split(fix)
    check_config(conf(unquoted, config_name=script.removesuffix(".py"), resolve=False))  # and the run's checks


def test_a_sweep_refused_as_it_composes_leaves_no_folder(tmp_path: Path):
    proc = shell("train.py", "-m", "model.num_head=2,4", log_dir=tmp_path / "out")
    assert "did you mean 'model.num_heads=2,4'?" in one_line(proc, "config error")
    assert not (tmp_path / "out").exists()


def test_true_and_false_where_a_class_name_is_expected_are_the_words_they_spell(conf):  # noqa: F811
    for typed, word in (("true", "true"), ("false", "false"), ("True", "true")):
        cfg = conf(f"analysis.target={typed}")
        check_config(cfg)
        read_words(cfg)
        assert cfg.analysis.target == word


@pytest.mark.parametrize(
    ("override", "says"),
    [
        ("callbacks.model_analysis.normalized=maybe", "callbacks.model_analysis.normalized='maybe' must be true or"),
        ("callbacks.attention_maps.text_heads=abc", "callbacks.attention_maps.text_heads='abc' must be a whole"),
        ("+analysis.nope=1", "analysis.nope is not a setting of the analyses"),
    ],
)
def test_a_callbacks_argument_of_the_wrong_type_is_named(conf, override: str, says: str):  # noqa: F811
    with pytest.raises(ConfigError, match=says.replace("(", r"\(")):
        check_config(conf(override))


def test_an_ngram_table_larger_than_a_share_of_memory_is_refused_with_its_size(monkeypatch):
    monkeypatch.setattr(model_config, "memory_bytes", lambda: 8 * 10**9)
    with pytest.raises(ValueError, match=r"model.ngram_buckets=10000000 makes a 2.6 GB n-gram table .* 8.0 GB"):
        check_encoder({"ngram_buckets": 10_000_000, "d_model": 64}, prefix="model.")
    check_encoder({"ngram_buckets": 131072, "d_model": 64}, prefix="model.")  # 34 MB: fine
    with pytest.raises(ValueError, match=r"e\.g\. model\.ngram_buckets=(\d+)") as err:
        check_encoder({"ngram_buckets": 10**9, "d_model": 4096}, prefix="model.")
    fix = int(str(err.value).rsplit("=", 1)[1])
    check_encoder({"ngram_buckets": fix, "d_model": 4096}, prefix="model.")  # the fix it names fits


def test_an_ngram_table_beyond_the_machine_is_refused_before_any_data(tmp_path: Path, without_torch: dict[str, str]):
    line = refused("train.py", "model.ngram_buckets=1000000000000", log_dir=tmp_path / "out", env=without_torch)
    assert "model.ngram_buckets=1000000000000 makes a 256000.0 GB n-gram table" in line


# ---- a checkpoint that cannot work: refused as it is loaded, before any text or data is read ----------------------
@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    """A tiny classifier's checkpoint as it is, with a NaN weight, and with a tokenizer whose pattern blows up."""
    from test_checkpoint import save_like_lightning, tiny_module
    from tokenizers import Regex, Tokenizer, pre_tokenizers

    folder = tmp_path_factory.mktemp("ckpts")
    nan = tiny_module()
    with torch.no_grad():
        nan.net.head.weight[0, 0] = float("nan")
    risky = tiny_module()
    tok = Tokenizer.from_str(risky.tokenizer_json)
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("(a+)+$"), behavior="isolated")  # a panic on 40 a's and a '!'
    risky.hparams["tokenizer"] = risky.tokenizer_json = tok.to_str()
    return {
        name: save_like_lightning(module, folder / f"{name}.ckpt")
        for name, module in (("good", tiny_module()), ("nan", nan), ("risky", risky))
    }


@pytest.mark.parametrize("script", ["predict.py", "evaluate.py"])
def test_weights_that_are_not_finite_are_refused_in_one_line(tmp_path: Path, checkpoints, script: str):
    text = ["text=good"] if script == "predict.py" else []
    proc = shell(script, f"ckpt_path={checkpoints['nan']}", *text, log_dir=tmp_path / "out")
    line = one_line(proc, "checkpoint error")
    assert f"checkpoint {checkpoints['nan']} holds weights that are not finite numbers (NaN or inf: net.head" in line
    assert not (tmp_path / "out").exists()


def test_a_tokenizer_pattern_that_can_blow_up_is_refused_naming_the_checkpoint(tmp_path: Path, checkpoints):
    proc = shell("predict.py", f"ckpt_path={checkpoints['risky']}", f"'text=\"{'a' * 40}!\"'", log_dir=tmp_path / "out")
    line = one_line(proc, "checkpoint error")
    assert f"checkpoint {checkpoints['risky']}'s tokenizer has a pattern that repeats a repetition, '(a+)+$'" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("target", ["neutral", "1"])
def test_a_class_the_checkpoint_lacks_is_refused_before_any_data(tmp_path: Path, checkpoints, target: str):
    proc = shell(
        "evaluate.py",
        f"ckpt_path={checkpoints['good']}",
        "analyses=[faithfulness]",
        f"analysis.target={target}",
        "data.toy_size=100000",
        log_dir=tmp_path / "out",
    )
    line = one_line(proc, "config error")
    assert f"analysis.target='{target}' is not a class: use predicted, true or one of negative, positive" in line
    assert not (tmp_path / "out").exists()
    assert "data toy" not in proc.stdout + proc.stderr  # refused before the data's line: 100k texts unread


# ---- a folder that cannot be written: named with its setting before anything is made ------------------------------
@pytest.fixture
def read_only(tmp_path: Path):
    """A folder this process cannot write: a read-only bind mount for root (whom permissions do not stop), else one
    without write permission."""
    folder = tmp_path / "locked"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    if subprocess.run(["mount", "--bind", "-o", "ro", str(folder), str(folder)], capture_output=True).returncode:
        pytest.skip("root without mount: no folder here that this process cannot write")
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


@pytest.mark.parametrize(
    ("script", "key"),
    [("train.py", "hydra.run.dir"), ("predict.py", "hydra.run.dir"), ("train.py", "paths.cache_dir")],
)
def test_a_folder_that_cannot_be_written_is_one_line_naming_its_setting(
    tmp_path: Path, read_only: Path, checkpoints, script: str, key: str
):
    log_dir = tmp_path / "out"
    inputs = [f"ckpt_path={checkpoints['good']}", "text=good"] if script == "predict.py" else ["data=rotten_tomatoes"]
    proc = shell(script, *inputs, f"{key}={read_only / 'run'}", log_dir=log_dir)
    line = one_line(proc, "disk error")
    assert line.startswith(f"disk error: {key}={read_only / 'run'} cannot be written ({read_only} is ")
    assert not log_dir.exists() and not list(read_only.iterdir())
    fix = line.rsplit("e.g. ", 1)[1]
    assert fix.startswith(f"{key}=") and os.access(Path(fix.split("=", 1)[1]).parent.parent, os.W_OK)


def test_a_folder_of_extra_texts_without_data_files_is_named_as_extra_texts(tmp_path: Path):
    from transformer_attention.pretraining.settings import PretrainConfig

    folder = tmp_path / "texts"
    folder.mkdir()
    for i in range(2):
        (folder / f"{i}.txt").write_text(f"an unlabelled review {i}\n")
    line = refused("pretrain.py", f"'pretrain.extra_texts=[{folder}]'", log_dir=tmp_path / "out")
    assert f"pretrain.extra_texts: '{folder}' holds no train.* data file" in line and "0.txt, 1.txt" in line
    assert "data.path" not in line
    texts = [json.dumps({"text": p.read_text()}) for p in sorted(folder.glob("*.txt"))]
    (folder / "train.jsonl").write_text("\n".join(texts) + "\n")  # what the line says to do
    PretrainConfig.from_values({"extra_texts": [str(folder)]})
