"""The data settings' value rules (data/settings.py): one function for ReviewDataModule and the config
pre-check, each rule naming the key, the value and the fix, importable without torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from transformer_attention.data import DataError, ReviewDataModule, check_data_settings
from transformer_attention.errors import UserError

GOOD = {
    "batch_size": 2,
    "vocab_size": 100,
    "toy_size": 10,
    "eval_batch_size": None,
    "max_length": 2,
    "num_workers": 0,
    "val_fraction": 0.5,
}


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("batch_size", 0, "data.batch_size=0 must be a whole number >= 1: e.g. data.batch_size=2"),
        ("vocab_size", 1.5, "data.vocab_size=1.5 must be a whole number >= 1: e.g. data.vocab_size=2"),
        ("toy_size", True, "data.toy_size=True must be a whole number >= 1"),
        ("eval_batch_size", 0, "data.eval_batch_size=0 must be a whole number >= 1"),
        (
            "max_length",
            1,
            "data.max_length=1 must be a whole number >= 2 (the [CLS] token and one word): e.g. data.max_length=128",
        ),
        ("max_length", "64", "data.max_length='64' must be a whole number >= 2"),
        ("num_workers", -1, "data.num_workers=-1 must be 0 (load in the main process) or more"),
        ("val_fraction", 1.0, "data.val_fraction=1.0 must be in (0, 1): e.g. data.val_fraction=0.1"),
        ("val_fraction", 0, "data.val_fraction=0 must be in (0, 1)"),
    ],
)
def test_each_rule_names_the_key_value_and_fix(key, value, message):
    with pytest.raises(DataError) as err:
        check_data_settings({**GOOD, key: value}, prefix="data.")
    assert str(err.value).startswith(message)
    assert isinstance(err.value, UserError) and err.value.kind == "data error"
    with pytest.raises(DataError, match=rf"^{key}="):  # no prefix: the key as a Python argument
        check_data_settings({key: value})


def test_good_and_absent_values_pass():
    check_data_settings(GOOD, prefix="data.")
    check_data_settings({"eval_batch_size": 64, "num_workers": 4, "max_length": 512}, prefix="data.")
    check_data_settings({})  # a partial config: what is absent is not checked


def test_the_datamodule_checks_its_arguments_with_the_same_rules():
    with pytest.raises(DataError, match=r"^data.max_length=1 must be a whole number >= 2 \(the \[CLS\] token"):
        ReviewDataModule(max_length=1)
    with pytest.raises(DataError, match=r"^data.val_fraction=1.5 must be in \(0, 1\)"):
        ReviewDataModule(val_fraction=1.5)
    with pytest.raises(DataError, match=r"^data.eval_batch_size=-2 must be a whole number >= 1"):
        ReviewDataModule(eval_batch_size=-2)


def test_importing_the_rules_imports_no_heavy_package():
    code = (
        "import sys\n"
        "from transformer_attention.data.settings import check_data_settings\n"
        "from transformer_attention.data import DataError, check_data_settings as again\n"
        "heavy = {'torch', 'lightning', 'datasets', 'numpy', 'tokenizers', 'omegaconf', 'hydra'}\n"
        "print(sorted(heavy & {name.split('.')[0] for name in sys.modules}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert proc.stdout.strip() == "[]"
