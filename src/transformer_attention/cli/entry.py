"""`start(task, main)` runs an entry's `hydra.main` function: a command line Hydra cannot read or compose ends in
one line naming the override and a fix that works when pasted (a text it cannot parse: the quoting that works):
exit status 1. Hydra raises its errors here while its switch HYDRA_FULL_ERROR is set: until the config is made."""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import BooleanNode, FloatNode, IntegerNode, ListConfig, OmegaConf, StringNode
from omegaconf.errors import OmegaConfBaseException, ValidationError

from ..checks import as_list_example, closest
from ..errors import ConfigError
from ..pretraining.settings import check_overrides
from .rundir import CLAIMS, give_up
from .tree import as_override, plain

GRAMMAR = "https://hydra.cc/docs/advanced/override_grammar/basic/"
TEXT_KEYS = ("text", "texts", "notes")  # keys whose values are free text: the quoting hint names them
FLAGS_WITH_VALUES = (  # Hydra's flags that take a word after them
    *("-cn", "--config-name", "-cp", "--config-path", "-cd", "--config-dir", "-c", "--cfg", "-p", "--package"),
    *("-i", "--info", "--experimental-rerun"),
)
KINDS: dict[type, str] = {IntegerNode: "a whole number", FloatNode: "a number", BooleanNode: "true or false"}
KINDS.update({StringNode: "a word", ListConfig: "a list"})
HELD: list[bool] = []  # whether HYDRA_FULL_ERROR is this process's, set until the config has composed


def start(task: str, main: Callable[[], Any]) -> None:
    """Run `main`, the `hydra.main` function of `task`'s entry, on this process's command line."""
    overrides = check_command_line(sys.argv[1:])
    if not os.environ.get("HYDRA_FULL_ERROR"):  # set by the user: Hydra's whole trace, as asked
        os.environ["HYDRA_FULL_ERROR"] = "1"
        HELD.append(True)
    try:
        if task == "pretrain":
            check_overrides(overrides)  # before Hydra, which refuses `+trainer.max_epochs=1` itself
        main()
    except (HydraException, OmegaConfBaseException, ConfigError) as err:
        if not HELD and not isinstance(err, ConfigError):
            raise
        for folder in list(CLAIMS):  # a sweep's, claimed before its jobs composed
            give_up(folder)
        line = err if isinstance(err, ConfigError) else refusal(err, overrides)
        raise SystemExit(f"config error: {line}") from None
    finally:
        release()


def release() -> None:
    """The config has composed: a task's errors are Hydra's to report again."""
    if HELD:
        HELD.clear()
        os.environ.pop("HYDRA_FULL_ERROR", None)


def check_command_line(args: Sequence[str]) -> list[str]:
    """The overrides of `args` (less Hydra's flags); one that Hydra cannot parse, or a text that a comma makes a
    sweep, ends the command in one line naming the quoting that works."""
    multirun, overrides = any(a in ("-m", "--multirun") for a in args), []
    for i, arg in enumerate(args):
        if arg.startswith("-") or (i and args[i - 1] in FLAGS_WITH_VALUES):
            continue
        try:
            override = OverridesParser.create().parse_override(arg)
        except HydraException:  # with the words the shell split off its value: text=it's not bad
            first = max((j for j in range(i + 1) if "=" in args[j] and not args[j].startswith("-")), default=i)
            end = next((j for j in range(i + 1, len(args)) if "=" in args[j] or args[j][:1] == "-"), len(args))
            why = "the shell split it into words" if end > first + 1 else "Hydra cannot read it unquoted"
            raise SystemExit(unreadable(" ".join(args[first:end]), why)) from None
        # a sweep of other keys is left to Hydra: a config may set hydra.mode=MULTIRUN (hparams_search=optuna)
        if override.is_sweep_override() and not multirun and override.key_or_group.split(".")[-1] in TEXT_KEYS:
            raise SystemExit(unreadable(arg, "a comma makes it a sweep (-m)"))
        overrides.append(arg)
    return overrides


def unreadable(arg: str, why: str) -> str:
    """One line: the override, why Hydra cannot take it, and the same quoted as the shell and Hydra need."""
    key, _, value = arg.partition("=")
    name = key.lstrip("+~").split("@")[0].split(".")[-1]  # a text key's: `text`, `callbacks.attention_maps.texts`
    value = value.strip().strip("'\"") if name != "texts" else value.strip()
    if "'" in value:  # the shell's single quotes cannot hold an apostrophe: its double quotes, Hydra's escaped
        quoted, how = f'"{key}=\\"{value}\\""', "in double quotes, escaped for the shell"
    else:
        quoted, how = f"'{key}=\"{value}\"'", "in double quotes, inside single quotes for the shell"
    if value.startswith("["):
        fix = f'quote each text inside the list: \'{key}=["first text", "second, text"]\''
    elif name in TEXT_KEYS:
        fix = f"put the text {how}: {quoted}"
    else:
        fix = f"put the value {how}: {quoted} (the override grammar: {GRAMMAR})"
    return f"override error: {arg!r}: {why}; {fix}"


def refusal(err: BaseException, overrides: Sequence[str]) -> str:
    """`<override>: <why>: <fix>` for the override that Hydra's composition error `err` is about, from what the
    error holds (the group and its options, the key and its node); else Hydra's own message, on one line."""
    cause: Any = err.__cause__
    group, _, option = str(getattr(err, "missing_cfg_file", None) or "").rpartition("/")
    for arg in overrides:
        key, value = OverridesParser.create().parse_override(arg).key_or_group, arg.partition("=")[2]
        if key == group and (options := getattr(err, "options", None)) is not None:
            options = [o for o in options if o != "schema"]  # the structured schema a group starts from
            near = closest(option, options)
            fix = f"did you mean {key}={near}?" if near else f"the options are {', '.join(options)}"
            return f"{arg}: the {key} group has no option {option}: {fix}"
        full_key, node = getattr(cause, "full_key", None), getattr(cause, "parent_node", None)
        if full_key is None or node is None or not f"{key}.".startswith(f"{full_key}."):
            continue
        if isinstance(cause, ValidationError) or isinstance(node, ListConfig):  # a value of the wrong type
            return f"{arg}: {wrong_type(cause, key, value)}"
        where, _, missing = full_key.rpartition(".")  # a key its node lacks: the nearest, else the node's keys
        known = [str(k) for k in node if not str(k).startswith("_") and str(k) != "hydra"]
        if near := closest(missing, known):
            fix = shell_quoted(f"{where}.{near}{key[len(full_key) :]}={value}".lstrip("."))
            return f"{arg}: {where or 'the config'} has no key {missing}: did you mean {fix}?"
        target = node.get("_target_") if key == full_key else None  # its class takes more arguments
        add = f"; for {target}, add it: e.g. {shell_quoted(f'+{arg}')}" if target else ""
        return f"{arg}: {where or 'the config'} has no key {missing} (its keys: {', '.join(known)}){add}"
    return " ".join(f"{err} {cause or ''}".split()).split(" Config search path:")[0]


def wrong_type(cause: Any, key: str, value: str) -> str:
    """`<key> takes <kind>, not <value>: e.g. <fix>` for a value Hydra cannot hold at `key`: one word where a list
    belongs is offered as the one-item list meant, where its items fit; else the value the config holds."""
    listed = isinstance(cause.parent_node, ListConfig)  # a mapping given for a list: the list itself refused it
    child = cause.parent_node if listed else cause.child_node
    what = next((w for kind, w in KINDS.items() if isinstance(child, kind)), "another value")
    now = plain(
        child if listed else OmegaConf.select(cause.parent_node, str(cause.key), throw_on_resolution_failure=False)
    )
    meant = None
    if isinstance(child, ListConfig) and not listed:
        meant = as_list_example(value, fits=lambda items: fits(cause.parent_node, str(cause.key), items))
    return f"{key} takes {what}, not {value}: e.g. {shell_quoted(f'{key}={meant or as_override(now)}')}"


def fits(node: Any, key: str, items: list[str]) -> bool:
    """Whether the list `items` fits `node[key]`'s type (its items checked as the config's schema checks them)."""
    trial = copy.deepcopy(node)
    try:
        trial[key] = items
    except (ValidationError, ValueError):
        return False
    return True


def shell_quoted(arg: str) -> str:
    return f"'{arg}'" if any(c in arg for c in '[]{}()* ,;&|<>$"!?') else arg
