"""Entry points started warm: `python tests/warm_entries.py` imports the libraries every entry imports (torch,
Lightning, torchmetrics, matplotlib, TensorBoard, Hydra: most of an entry's start on 2 cores), then forks a fresh
process per request that runs `python <entry>.py args...` as a shell would (its argv, working folder, environment,
stdout and stderr, exit status). For the runs a test needs but does not examine as processes: a test of the start
itself (imports, threads, OpenMP's wait, signals) runs its entry cold (conftest's run_entry).

The protocol, one JSON line each way on the server's stdin and stdout: a request {script, args, cwd, env, stdout,
stderr} (the last two: files for the child's output); the answers {"pid": n}, then {"rc": exit status}."""

from __future__ import annotations

import json
import os
import sys

# what every entry imports, here once (the environment's switches read at import were the server's, entry_env())
PRELOADED = ("torch", "lightning.pytorch", "torchmetrics", "torch.utils.tensorboard", "matplotlib", "PIL.Image")
PRELOADED += ("hydra", "omegaconf", "tokenizers", "captum.attr")


def run_child(request: dict, channels: list[int]) -> None:
    """In the forked child: become `python <script> args...` and exit with its status."""
    import atexit
    import runpy
    import threading
    import traceback

    for fd in channels:
        os.close(fd)
    for fd, name in ((1, "stdout"), (2, "stderr")):
        out = os.open(request[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, fd)
        os.close(out)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    script = request["script"]
    sys.argv = [script, *request["args"]]
    sys.path[0] = os.path.dirname(script)  # as `python <script>` puts the script's folder first
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:  # what the interpreter does with it at the end of a script
        if stop.code is None or isinstance(stop.code, int):
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - an uncaught error: its traceback, status 1, as a script ends
        traceback.print_exc()
        code = 1
    try:  # the interpreter's own end: threads joined, exit functions, streams flushed
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def serve() -> None:
    for name in PRELOADED:
        __import__(name)
    requests, answers = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)  # nothing a child writes by accident reaches the protocol
    with os.fdopen(requests, "r") as incoming, os.fdopen(answers, "w") as outgoing:
        for line in incoming:
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                run_child(request, [requests, answers])
            outgoing.write(json.dumps({"pid": pid}) + "\n")
            outgoing.flush()
            _, status = os.waitpid(pid, 0)
            outgoing.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
            outgoing.flush()


if __name__ == "__main__":
    serve()
