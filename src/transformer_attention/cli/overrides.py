"""An override Hydra cannot compose, as one line that names the key and a fix that works when pasted.

Hydra refuses an unknown key, a renamed one, a value of the wrong type, a `+` on a key that exists or an option a
group lacks in four to six lines that never say what to type instead. `catch_composition_errors` (called before
Hydra runs) lets Hydra's own error reach this process's exception hook (`HYDRA_FULL_ERROR`, Hydra's documented
switch, set until the config has composed: `release` takes it back, so a task's errors are reported as Hydra
reports them), and the hook prints `config error: <override>: <why>: e.g. <fix>`. The fix is applied to the config
composed without the bad override and checked as a run would be (`check_groups`), so pasting it works; where the
check refuses it, its own line says why. Keys renamed since the last release are named by their new names.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from ..checks import closest
from ..errors import ConfigError
from .config import check_groups
from .console import FLAGS_WITH_VALUES
from .rules import check_task_keys

# old key (or the start of old keys) -> its new names, the first the composed config has wins
RENAMED = {
    "analysis": ("analyses", "callbacks.model_analysis.analyses"),  # a group now: analysis.* are the settings
    "explain": ("analysis",),
    "model.bigram_buckets": ("model.ngram_buckets",),
}
_ABSENT = object()
_STATE: dict[str, bool] = {}


def catch_composition_errors(argv: Sequence[str]) -> None:
    """Until `release`, Hydra's composition errors reach the exception hook, which names the override and its fix
    in one line (left to Hydra when the user set HYDRA_FULL_ERROR: they asked for its whole trace)."""
    if os.environ.get("HYDRA_FULL_ERROR") or _STATE:
        return
    os.environ["HYDRA_FULL_ERROR"] = "1"
    _STATE["set"] = True
    previous = sys.excepthook

    def hook(kind: type[BaseException], err: BaseException, tb: Any) -> None:
        try:
            line = explain(err, argv) if _STATE.get("set") else None
        except Exception:  # noqa: BLE001 - no explanation rather than a second error: Hydra's message below
            line = None
        if line is not None:
            sys.stderr.write(f"config error: {line}\n")
        elif _is_hydra_error(err):  # what Hydra itself prints without HYDRA_FULL_ERROR
            sys.stderr.write(f"{err}\n" + (f"{err.__cause__}\n" if err.__cause__ is not None else ""))
        else:
            previous(kind, err, tb)

    sys.excepthook = hook


def release() -> None:
    """The config composed: Hydra reports a task's errors its own way again."""
    if _STATE.pop("set", False):
        os.environ.pop("HYDRA_FULL_ERROR", None)


def _is_hydra_error(err: BaseException) -> bool:
    return isinstance(err, HydraException | OmegaConfBaseException)


def explain(err: BaseException, argv: Sequence[str], depth: int = 0) -> str | None:
    """`<override>: <why>: e.g. <fix>` for the override of `argv` that `err` (Hydra's composition error) is about;
    None when it cannot tell which one or why."""
    if not _is_hydra_error(err) or depth > 8:
        return None
    parser = OverridesParser.create()
    try:
        parsed = [(arg, parser.parse_override(arg)) for arg in overrides_of(argv)]
    except Exception:  # noqa: BLE001 - check_command_line names an unparsable override before Hydra runs
        return None
    found = culprit(err, parsed)
    if found is None:
        return None
    arg, override = found
    rest = [a for a, o in parsed if a is not arg and not o.is_sweep_override()]
    try:
        base = compose(argv, rest)
    except Exception as other:  # noqa: BLE001 - another override is bad too: name that one
        return explain(other, [a for a in argv if a is not arg], depth + 1)
    if override.is_sweep_override() or override.package:
        return None
    return describe(err, arg, override, base, Path(sys.argv[0]).stem)


def culprit(err: BaseException, parsed: list[tuple[str, Any]]) -> tuple[str, Any] | None:
    """The override `err` is about: the one its text quotes, whose key it names, or whose group lacks the option."""
    cause = err.__cause__
    text = f"{err} {cause or ''}"
    full_key = getattr(cause, "full_key", None) or getattr(err, "full_key", None)
    missing = getattr(err, "missing_cfg_file", None)
    for arg, override in parsed:
        key = override.key_or_group
        if f"override {override.input_line}" in text or (full_key and (key + ".").startswith(full_key + ".")):
            return arg, override
        if f"'{key}'" in text or (missing and missing.rsplit("/", 1)[0] == key):
            return arg, override
    return None


def describe(err: BaseException, arg: str, override: Any, base: DictConfig, task: str) -> str | None:
    """Why `override` (the command line's `arg`) does not compose on `base`, and the fix."""
    key, value = override.key_or_group, arg.partition("=")[2]
    if task == "pretrain":
        try:
            check_task_keys(task, [arg])
        except ConfigError as refusal:
            return str(refusal)
    for old, news in RENAMED.items():
        if key == old or (key.startswith(old + ".") and old != "analysis"):
            new = next((n for n in news if _select(base, n) is not _ABSENT), None)
            if new is not None:
                renamed = new + key[len(old) :]
                fix = f"{renamed}={_as_node(value, _select(base, renamed))}"
                return f"{arg}: {old} is now {new}{fix_of(base, fix, task)}"
    if (options := getattr(err, "options", None)) is not None:
        near = closest(value, options)
        fix = f": did you mean {key}={near}?" if near else f": the options are {', '.join(options)}"
        return f"{arg}: the {key} group has no option {value}{fix}"
    current = _select(base, key)
    if override.is_add() and current is not _ABSENT:
        return f"{arg}: {key} is in the config already, so it takes no +{fix_of(base, f'{key}={value}', task)}"
    if current is not _ABSENT:
        what = kind_of(current, f"{err} {err.__cause__ or ''}")
        return f"{arg}: {key} takes {what}, not {value}{fix_of(base, f'{key}={_shown(current)}', task)}"
    return unknown_key(arg, key, value, base, task)


def unknown_key(arg: str, key: str, value: str, base: DictConfig, task: str) -> str | None:
    """A key the config does not have: the nearest key where it is put, or a class's keyword argument added."""
    parts = key.split(".")
    depth = next(i for i in range(len(parts), -1, -1) if _select(base, ".".join(parts[:i])) is not _ABSENT)
    where, missing = ".".join(parts[:depth]), parts[depth] if depth < len(parts) else parts[-1]
    node = _select(base, where) if where else base
    if not isinstance(node, DictConfig):
        return None
    known = [str(k) for k in node if not str(k).startswith("_") and str(k) != "hydra"]
    near = closest(missing, known)
    place = where or "the config"
    if near is not None:
        fixed = ".".join([*parts[:depth], near, *parts[depth + 1 :]])
        fix = fix_of(base, f"{fixed}={value}", task)
        mean = f"{fix.removeprefix(': e.g. ')}?" if fix.startswith(": e.g. ") else f"{fixed}?{fix}"
        return f"{arg}: {place} has no key {missing}: did you mean {mean}"
    target = node.get("_target_") if depth == len(parts) - 1 else None
    if target is not None:
        fix = fix_of(base, f"+{key}={value}", task)
        return f"{arg}: {place} has no key {missing} (its keys: {', '.join(known)}); for {target}, add it{fix}"
    return f"{arg}: {place} has no key {missing}: its keys are {', '.join(known)}"


def fix_of(base: DictConfig, fix: str, task: str) -> str:
    """`: e.g. <fix>` (quoted for the shell where it holds brackets or spaces) when `fix` on `base` passes the run's
    checks, else `; <the check's line>`, whose own fix is written as added where `fix` adds its key."""
    cfg = base.copy()
    try:
        override = OverridesParser.create().parse_override(fix)
        with open_dict(cfg):
            OmegaConf.update(cfg, override.key_or_group, override.value(), merge=False, force_add=True)
        check_groups(cfg)
        check_task_keys(task, [fix])
    except ConfigError as refusal:
        message = str(refusal)
        if override.is_add():
            added = override.key_or_group
            for quote in ("", "'"):
                message = message.replace(f"e.g. {quote}{added}=", f"e.g. {quote}+{added}=")
        return f"; {message}"
    except Exception:  # noqa: BLE001 - the fix does not even compose: say nothing rather than something wrong
        return ""
    return f": e.g. {shell_quoted(fix)}"


def shell_quoted(arg: str) -> str:
    return f"'{arg}'" if any(c in arg for c in '[]{}()* ,;&|<>$"!?') else arg


def kind_of(current: Any, error: str) -> str:
    """What a key whose value is `current` takes, in words (Hydra's error text where the value is null)."""
    if isinstance(current, bool) or "valid bool" in error:
        return "true or false"
    if isinstance(current, int) or "to Integer" in error:
        return "a whole number"
    if isinstance(current, float) or "to Float" in error:
        return "a number"
    if isinstance(current, ListConfig | list):
        return "a list"
    return "a word" if isinstance(current, str) else "a value"


def _shown(value: Any) -> str:
    """A value as an override writes it."""
    if isinstance(value, ListConfig | list):
        return "[" + ",".join(_shown(v) for v in value) + "]"
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def _as_node(value: str, node: Any) -> str:
    """`value` as the node it goes to takes it: a word into a list is a one-item list."""
    return f"[{value}]" if isinstance(node, ListConfig) and not value.startswith("[") else value


def _select(cfg: DictConfig, key: str) -> Any:
    if not key:
        return cfg
    try:
        return OmegaConf.select(cfg, key, default=_ABSENT, throw_on_missing=False)
    except Exception:  # noqa: BLE001 - a key through a value that is no node
        return _ABSENT


def overrides_of(argv: Sequence[str]) -> list[str]:
    """The overrides of a command line: its arguments, less Hydra's flags and their values."""
    return [a for i, a in enumerate(argv) if not (a.startswith("-") or (i and argv[i - 1] in FLAGS_WITH_VALUES))]


def config_name(argv: Sequence[str]) -> str:
    """The entry's config: `-cn`/`--config-name`'s, else the script's name (train.py composes conf/train.yaml)."""
    for i, arg in enumerate(argv[:-1]):
        if arg in ("-cn", "--config-name"):
            return argv[i + 1]
    return Path(sys.argv[0]).stem


def compose(argv: Sequence[str], overrides: list[str]) -> DictConfig:
    """The entry's config with `overrides`, composed as Hydra composed it (its search path, after its failure)."""
    if GlobalHydra().is_initialized():
        return hydra_compose(config_name=config_name(argv), overrides=overrides)
    conf = Path(sys.argv[0]).resolve().parent / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        return hydra_compose(config_name=config_name(argv), overrides=overrides)
