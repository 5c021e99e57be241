"""The tab's routes under /data/plugin/attention/: `runs` (every run, its examples and their steps), `page` (one
example's page at one step), `static/<name>.js` (the tab's script and the page's modules). Data comes from
TensorBoard's data provider, so the Rust data server (`--load_fast=auto`, the default) and the Python loader both
serve it; whatever goes wrong is answered in one line, never raised into TensorBoard."""

from __future__ import annotations

import json
from typing import Any

from tensorboard import errors as tb_errors
from tensorboard import plugin_util
from tensorboard.backend import http_util
from tensorboard.data import provider
from tensorboard.plugins import base_plugin
from werkzeug import wrappers

from .page import render, static_file
from .summary import PLUGIN_NAME, PageError, read_page

EVERY = 1 << 30  # downsample: every step TensorBoard kept (`--samples_per_plugin=attention=0` keeps them all)
HINT = (
    "No attention pages in {run}: the attention-maps callback logs them at each step it draws the maps "
    "(docs/loggers.md)."
)


class AttentionPlugin(base_plugin.TBPlugin):
    """The ATTENTION tab: each logged example's interactive page, by run, example and step."""

    plugin_name = PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext) -> None:
        self._provider = context.data_provider

    def get_plugin_apps(self) -> dict[str, Any]:
        routes = {"/runs": self._serve_runs, "/page": self._serve_page, "/static/*": self._serve_static}
        return {route: wrappers.Request.application(serve) for route, serve in routes.items()}

    def is_active(self) -> bool:
        return False  # active where a run holds the plugin's data: TensorBoard asks the data provider

    def frontend_metadata(self) -> base_plugin.FrontendMetadata:
        return base_plugin.FrontendMetadata(es_module_path="/static/index.js", tab_name="Attention")

    def _sequences(self, request: wrappers.Request, runs: list[str] | None = None, tags: list[str] | None = None):
        return self._provider.read_blob_sequences(
            plugin_util.context(request.environ),
            experiment_id=plugin_util.experiment_id(request.environ),
            plugin_name=PLUGIN_NAME,
            downsample=EVERY,
            run_tag_filter=provider.RunTagFilter(runs=runs, tags=tags),
        )

    def _serve_runs(self, request: wrappers.Request) -> wrappers.Response:
        """{"runs": [{"run", "examples": [{"tag", "steps"}], "hint"}]}: every run, a hint where it has no page."""
        ctx, eid = plugin_util.context(request.environ), plugin_util.experiment_id(request.environ)
        names = sorted(run.run_name for run in self._provider.list_runs(ctx, experiment_id=eid))
        found = self._sequences(request)
        runs = []
        for run in names:
            tags = found.get(run, {})
            examples = [{"tag": tag, "steps": [d.step for d in tags[tag]]} for tag in sorted(tags)]
            runs.append({"run": run, "examples": examples, "hint": "" if examples else HINT.format(run=run)})
        return http_util.Respond(request, {"runs": runs}, "application/json")

    def _serve_page(self, request: wrappers.Request) -> wrappers.Response:
        """The page of ?run=&tag=&step=, or one line saying why not (the tab shows it in the page's place)."""
        run, tag, step = (request.args.get(k) for k in ("run", "tag", "step"))
        if run is None or tag is None or step is None or not (step.isascii() and step.isdigit()):
            return _line(request, f"page?run={run}&tag={tag}&step={step}: give a run, a tag and a step (a number)")
        where = f"{tag} at step {step} of {run}"
        try:
            data = self._sequences(request, [run], [tag]).get(run, {}).get(tag, [])
            kept = [d for d in data if d.step == int(step)]
            if not kept or not kept[-1].values:
                return _line(request, f"no page of {where}: pick a step the tab lists", code=404)
            key = kept[-1].values[0].blob_key
            blob = self._provider.read_blob(plugin_util.context(request.environ), blob_key=key)
            html = render(read_page(blob))
        except PageError as e:
            return _line(request, f"the page of {where} cannot be read: {e}", code=422)
        except (tb_errors.PublicError, OSError, KeyError, TypeError, ValueError) as e:
            return _line(request, f"the page of {where} cannot be shown: {e}", code=500)
        return http_util.Respond(request, html, "text/html")

    def _serve_static(self, request: wrappers.Request) -> wrappers.Response:
        name = request.path.rpartition("/static/")[2]
        body = static_file(name)
        if body is None:
            return _line(request, f"{json.dumps(name)}: no such file (the tab serves its scripts only)", code=404)
        return http_util.Respond(request, body, "text/javascript")


def _line(request: wrappers.Request, message: str, code: int = 400) -> wrappers.Response:
    """One line of plain text: what the tab shows in the page's place."""
    return http_util.Respond(request, " ".join(message.split()) + "\n", "text/plain", code=code)
