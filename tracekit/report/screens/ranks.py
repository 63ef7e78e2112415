"""The ranks report: several traces of one dataset compared (tracekit/analysis/ranks/compare.py).

Renders the ranks JSON document (``RanksResult.to_json()``) as sections (per-rank × phase table,
straggler steps, communication per phase with its exposed part), the heat map of step time by
rank × step, and whole Markdown / HTML / text documents. Used by ``tracekit analyze`` and
``tracekit report`` on a dataset of several traces. A dataset of several jobs
(tracekit/analysis/ranks/jobs.py) gives a document with ``jobs`` and ``comparisons`` (one ranks
document per job of ≥ 2 traces): the jobs are listed first, then each comparison's sections under
"Job N:" titles. See docs/scale.md.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracekit.report import fmt
from tracekit.report.plots.figures import Plot
from tracekit.report.plots.canvas import MissingPlotData, figure
from tracekit.report.formats import html, markdown
from tracekit.report.formats.text import render_document
from tracekit.report.sections import communication
from tracekit.report.sections.blocks import Section, Table

if TYPE_CHECKING:
    from matplotlib.figure import Figure

HEATMAP_TITLE = "Step time by rank × step"
MAX_STRAGGLER_ROWS = 20


def comparisons(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The ranks documents in ``doc``: its ``comparisons`` (several jobs), else ``doc`` itself when it
    compares ranks (one job), else none."""
    if "comparisons" in doc:
        return list(doc["comparisons"])
    return [doc] if "per_rank" in doc else []


def jobs_line(doc: dict[str, Any]) -> str:
    """One line: how many jobs, and per job its traces, compared as ranks or alone, and why."""
    jobs = doc.get("jobs") or []
    if not jobs:
        return ""
    parts = []
    for j in jobs:
        ids = j["traces"]
        pairs = j.get("paired") or []
        stage = (
            f"; {j['key'].get('stage')} stage, paired with "
            + ", ".join(f"job {p['job']} ({p['stage']})" for p in pairs)
            if pairs
            else ""
        )
        if j.get("compared"):
            parts.append(f"job {j['id']}: {fmt.count(len(ids), 'trace')} compared as ranks ({j['why']}{stage})")
        else:
            parts.append(f"job {j['id']}: {ids[0]} alone, not compared" + (f" ({stage[2:]})" if stage else ""))
    return f"{fmt.count(len(jobs), 'job')}: " + "; ".join(parts) + "."


def jobs_sections(doc: dict[str, Any]) -> list[Section]:
    """The jobs of the dataset: one row per job (traces, compared or alone, the shared key)."""
    jobs = doc.get("jobs") or []
    rows = [
        [
            str(j["id"]),
            ", ".join(j["traces"]),
            "compared as ranks" if j.get("compared") else "alone",
            *(str(j["key"].get(k) or fmt.DASH) for k in ("device", "format")),
            fmt.count(j["key"].get("world_size")),
            *(str(j["key"].get(k) or fmt.DASH) for k in ("family", "steps")),
        ]
        for j in jobs
    ]
    table = Table(["job", "traces", "compared", "device", "format", "world size", "file name", "steps"], rows)
    lead = [
        jobs_line(doc),
        "Traces are grouped into jobs by format, device, world size, backend, step structure and file name "
        "(rank number aside); ranks are compared only within a job (docs/scale.md, Jobs).",
    ]
    lead += [f"Not compared: {f['trace_id']}: {f['error']}" for f in doc.get("failed") or []]
    return [Section("Jobs", lead, [table], "jobs")]


def all_sections(doc: dict[str, Any]) -> list[Section]:
    """The jobs (when several, or when any trace is alone), then each job's ranks sections."""
    docs = comparisons(doc)
    if "comparisons" not in doc:
        out = sections(doc)
        if doc.get("jobs"):
            out[0].paragraphs.insert(0, jobs_line(doc))
        return out
    out = jobs_sections(doc)
    for c in docs:
        job = c.get("job")
        for sec in sections({**c, "failed": []}):
            out.append(Section(f"Job {job}: {sec.title}", sec.paragraphs, sec.tables, f"{sec.anchor}-job-{job}"))
    return out


def summary(doc: dict[str, Any]) -> list[str]:
    """Headline sentences: how many ranks, the worst step and who made it slow."""
    n = len(doc["traces"])
    out = [f"{fmt.count(n, 'trace')} compared (ranks from {doc['ranks_from']})."]
    w = doc.get("worst_step")
    if w and w.get("ranks", 0) > 1:
        text = (
            f"Slowest step: step {w['step']} ({w.get('name')}, phase {w.get('phase')}) on rank {w['slowest_rank']}: "
            f"{fmt.value('max_ns', w['max_ns'])} vs median {fmt.value('median_ns', w['median_ns'])} across "
            f"{fmt.count(w['ranks'], 'rank')} ({fmt.ratio(w['ratio'])})."
        )
        if w.get("op_class"):
            text += f" Most excess device time: {w['op_class']} ({fmt.signed_duration(w.get('op_class_excess_ns'))})"
            if w.get("idle_excess_ns") is not None:
                text += f"; idle {fmt.signed_duration(w['idle_excess_ns'])} vs the others"
            if w.get("idle_cause"):
                cause, excess = w["idle_cause"].replace("_", " "), fmt.signed_duration(w.get("idle_cause_excess_ns"))
                text += f", most of it {cause} ({excess})"
            text += "."
        if w.get("idle_top"):
            text += f" Its largest idle culprit: {w['idle_top']}."
        out.append(text)
    strag = [s for s in doc["stragglers"] if s.get("straggler")]
    if strag:
        top = Counter(s["slowest_rank"] for s in strag).most_common(3)
        out.append(
            f"{fmt.count(len(strag), 'straggler step')} (slowest rank ≥ 1.1× the median): "
            + ", ".join(f"rank {r} slowest in {c}" for r, c in top)
            + "."
        )
    for f in doc.get("failed") or []:
        out.append(f"Not compared: {f['trace_id']}: {f['error']}")
    return out


def _per_rank(doc: dict[str, Any]) -> Table:
    """The per-rank × phase table: window, busy time and share, steps, median step, bound and why."""
    return Table(
        ["rank", "phase", "window", "busy", "busy %", "steps", "median step", "bound", "reason"],
        [
            [
                str(r["rank"]),
                r["phase"],
                fmt.value("span_ns", r.get("span_ns")),
                fmt.value("busy_ns", r.get("busy_ns")),
                fmt.percent(r.get("busy_ratio"), 0),
                fmt.count(r.get("step_count") or 0),
                fmt.value("step_median_ns", r.get("step_median_ns")),
                str(r.get("bound") or fmt.DASH),
                str(r.get("reason") or ""),
            ]
            for r in doc["per_rank"]
        ],
        "Per rank × phase",
        collapsed=len(doc["per_rank"]) > 24,
    )


STRAGGLER_HEADERS = ["step", "name", "phase", "ranks", "slowest rank", "max", "median", "max/median"]
STRAGGLER_HEADERS += ["op class (excess)", "idle (excess)", "idle cause (excess)"]


def _stragglers(doc: dict[str, Any]) -> Table:
    """The steps with the largest max/median step time across ranks (at most MAX_STRAGGLER_ROWS)."""
    rows = sorted(doc["stragglers"], key=lambda s: -(s.get("ratio") or 0))[:MAX_STRAGGLER_ROWS]
    return Table(
        STRAGGLER_HEADERS,
        [
            [
                str(s["step"]),
                str(s.get("name")),
                str(s.get("phase")),
                str(s["ranks"]),
                str(s["slowest_rank"]),
                fmt.value("max_ns", s["max_ns"]),
                fmt.value("median_ns", s["median_ns"]),
                fmt.ratio(s.get("ratio")),
                f"{s.get('op_class') or fmt.DASH} ({fmt.signed_duration(s.get('op_class_excess_ns'))})",
                f"{fmt.value('idle_ns', s.get('idle_ns'))} ({fmt.signed_duration(s.get('idle_excess_ns'))})",
                f"{(s.get('idle_cause') or fmt.DASH).replace('_', ' ')} "
                f"({fmt.signed_duration(s.get('idle_cause_excess_ns'))})",
            ]
            for s in rows
        ],
        f"Steps by max/median step time across ranks (top {len(rows)})",
    )


def sections(doc: dict[str, Any]) -> list[Section]:
    """Ranks, per-rank × phase, stragglers, communication — renderer-neutral."""
    traces = Table(
        ["rank", "trace id", "device", "source"],
        [[str(t["rank"]), t["trace_id"], str(t.get("device") or fmt.DASH), t["source"]] for t in doc["traces"]],
        collapsed=len(doc["traces"]) > 12,
    )
    comm = Table(
        ["rank", *communication.HEADERS],
        [[str(c["rank"]), *communication.cells(c)] for c in doc["communication"]],
        "Communication kernels (NCCL/RCCL) per phase; exposed = not overlapped by compute on the device; "
        "moved = the input messages the trace states, bandwidth = moved / those kernels' time",
        collapsed=len(doc["communication"]) > 24,
    )
    comm_note = [] if doc["communication"] else ["No communication kernels (NCCL / RCCL collectives) in these traces."]
    return [
        Section("Ranks", summary(doc), [traces], "ranks"),
        Section("Per rank and phase", [], [_per_rank(doc)], "per-rank"),
        Section(
            "Stragglers",
            [
                "Step k is the k-th step of every rank in time order (phase units, else ProfilerStep#N); "
                "step time is its window on the host clock."
            ],
            [_stragglers(doc)],
            "stragglers",
        ),
        Section("Communication", comm_note, [comm] if doc["communication"] else [], "communication"),
    ]


def heatmap(doc: dict[str, Any]) -> "Figure":
    """Step time (ms) by rank (rows) × step (columns); raises MissingPlotData without steps."""
    cells = doc.get("step_time") or []
    if not cells:
        raise MissingPlotData("step heat map: no steps (no phase units and no ProfilerStep#N regions)")
    ranks = sorted({c["rank"] for c in cells})
    steps = sorted({c["step"] for c in cells})
    ri = {r: i for i, r in enumerate(ranks)}
    grid = [[float("nan")] * len(steps) for _ in ranks]
    for c in cells:
        grid[ri[c["rank"]]][c["step"]] = c["step_ns"] / 1e6
    fig = figure(min(14.0, 4 + 0.25 * len(steps)), min(12.0, 2 + 0.3 * len(ranks)))
    ax = fig.add_subplot()
    im = ax.imshow(grid, aspect="auto", cmap="viridis", interpolation="nearest")
    ax.set_xlabel("step (k-th step of each rank)")
    ax.set_ylabel("rank")
    ax.set_yticks(range(len(ranks)), [str(r) for r in ranks] if len(ranks) <= 64 else None)
    fig.colorbar(im, ax=ax, label="step time (ms)")
    worst = doc.get("worst_step")
    if worst and worst.get("ranks", 0) > 1:
        ax.scatter([worst["step"]], [ri[worst["slowest_rank"]]], marker="s", s=80, facecolors="none", edgecolors="red")
    ax.set_title(HEATMAP_TITLE)
    return fig


def figures(doc: dict[str, Any]) -> list[Plot]:
    """One heat map per compared job (named ``ranks_heatmap`` when the document is one job's)."""
    out = []
    several = "comparisons" in doc
    for c in comparisons(doc):
        name = f"ranks_heatmap_job{c.get('job')}" if several else "ranks_heatmap"
        title = f"{HEATMAP_TITLE} (job {c.get('job')})" if several else HEATMAP_TITLE
        try:
            out.append(Plot(name, title, heatmap(c)))
        except MissingPlotData as exc:
            out.append(Plot(name, title, None, str(exc)))
    return out


def render_text(doc: dict[str, Any], markdown: bool = False) -> str:
    """Plain-text tables (``tracekit analyze``) or Markdown."""
    if markdown:
        return render_md(doc, None, None, "")
    title = f"tracekit analyze: {doc.get('dataset', '')} ({fmt.count(len(doc['traces']), 'trace')})"
    return render_document(title, [], all_sections(doc))


def render_md(doc: dict[str, Any], figs: list[Plot] | None, plot_dir: Path | None, prefix: str) -> str:
    text = markdown.render_document(f"tracekit ranks report: {doc.get('dataset', '')}", [], all_sections(doc))
    return text + ("\n" + "\n".join(markdown.plot_lines(figs, plot_dir, prefix)).rstrip() + "\n" if figs else "")


def render_html(doc: dict[str, Any], figs: list[Plot] | None) -> str:
    return html.page(f"tracekit ranks report: {doc.get('dataset', '')}", all_sections(doc), figs)
