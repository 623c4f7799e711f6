"""SVG drawn on the server: state bars, the DAG of a run, the Gantt of its attempts.

Shapes carry ``data-task`` and a ``st-<state>`` class, so live updates recolour them without
another layout; each has a ``<title>`` (its accessible name). Text is escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache

from markupsafe import Markup, escape

from tickwork.core.layout import Layout, Spacing, layout
from tickwork.core.model import Attempt, Job, TaskRun
from tickwork.dashboard.states import GLYPHS, label
from tickwork.dashboard.words import duration

BAR_WIDTH = 360
BAR_HEIGHT = 22


def state_bars(counts: Mapping[str, int], title: str) -> Markup:
    """Horizontal bars, one per state, scaled to the largest count."""
    rows = [(s, n) for s, n in sorted(counts.items(), key=lambda kv: -kv[1]) if n]
    top = max((n for _, n in rows), default=1)
    height = max(len(rows), 1) * (BAR_HEIGHT + 6)
    parts = [
        f'<svg class="bars" viewBox="0 0 {BAR_WIDTH + 200} {height}" role="img" '
        f'aria-label="{escape(title)}">'
    ]
    if not rows:
        parts.append('<text x="0" y="16" class="muted">no runs</text>')
    for i, (state, n) in enumerate(rows):
        y = i * (BAR_HEIGHT + 6)
        width = max(2.0, BAR_WIDTH * n / top)
        parts.append(
            f"<g><title>{escape(label(state))}: {n}</title>"
            f'<text x="0" y="{y + 16}" class="lbl">{GLYPHS.get(state, "")} {escape(label(state))}'
            f"</text>"
            f'<rect x="130" y="{y}" width="{width:.1f}" height="{BAR_HEIGHT}" '
            f'class="fill st-{escape(state)}"/>'
            f'<text x="{136 + width:.1f}" y="{y + 16}" class="num">{n}</text></g>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


@lru_cache(maxsize=256)
def _cached_layout(names: tuple[str, ...], edges: tuple[tuple[str, ...], ...]) -> Layout:
    # Keyed by the DAG's shape: live updates and other runs of the job never lay out again.
    return layout(names, dict(zip(names, edges, strict=True)), Spacing())


def dag(task_runs: Sequence[TaskRun], run_id: str) -> Markup:
    """A run's DAG, each task coloured by its state; a click opens its log."""
    nodes = [(tr.task_name, tuple(tr.upstream), str(tr.state), tr.attempt) for tr in task_runs]
    return _dag(nodes, f"Task graph of run {run_id}", link=True)


def dag_of_job(job: Job) -> Markup:
    """A job's DAG as defined (no states)."""
    nodes = [(t.name, tuple(t.upstream), "pending", 0) for t in job.tasks]
    return _dag(nodes, f"Task graph of job {job.name}", link=False)


def _dag(nodes: Sequence[tuple[str, tuple[str, ...], str, int]], title: str, link: bool) -> Markup:
    names = tuple(n[0] for n in nodes)
    shape = _cached_layout(names, tuple(n[1] for n in nodes))
    by_name = {n[0]: n for n in nodes}
    s = Spacing()
    parts = [
        f'<svg class="dag" width="{shape.width:.0f}" height="{shape.height:.0f}" '
        f'viewBox="0 0 {shape.width:.0f} {shape.height:.0f}" role="img" '
        f'aria-label="{escape(title)}">'
    ]
    for path in shape.edges:
        parts.append(f'<path class="edge" d="{_curve(path.points)}"/>')
    for name, placed in shape.nodes.items():
        _, _, state, attempt = by_name[name]
        text = name if len(name) <= 18 else name[:17] + "…"
        said = f"{name}, attempt {attempt}, {label(state)}" if link else name
        open_tag = f'<a href="?task={escape(name)}#log"' if link else "<g"
        close_tag = "</a>" if link else "</g>"
        parts.append(
            f'{open_tag} data-task="{escape(name)}" class="node st-{escape(state)}" '
            f'data-state="{escape(state)}"><title>{escape(said)}</title>'
            f'<rect x="{placed.x:.1f}" y="{placed.y:.1f}" width="{s.node_width:.0f}" '
            f'height="{s.node_height:.0f}" rx="5" class="fill"/>'
            f'<text x="{placed.x + 8:.1f}" y="{placed.y + 20:.1f}" class="g">'
            f"{GLYPHS.get(state, '') if link else ''}</text>"
            f'<text x="{placed.x + 26:.1f}" y="{placed.y + 20:.1f}">{escape(text)}</text>'
            f"{close_tag}"
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _curve(points: Sequence[tuple[float, float]]) -> str:
    """A smooth path through ``points``: horizontal tangents at each, as layered graphs read."""
    (x0, y0), *rest = points
    d = [f"M{x0:.1f},{y0:.1f}"]
    px, py = x0, y0
    for x, y in rest:
        mid = (px + x) / 2
        d.append(f"C{mid:.1f},{py:.1f} {mid:.1f},{y:.1f} {x:.1f},{y:.1f}")
        px, py = x, y
    return " ".join(d)


GANTT_WIDTH = 760
GANTT_ROW = 22
GANTT_LABEL = 160


def gantt(task_runs: Sequence[TaskRun], attempts: Sequence[Attempt], now: datetime) -> Markup:
    """One row per task: a hatched queued segment, then a bar per attempt (finished attempts
    from the history, the current one reaching ``now`` while it runs)."""
    bars = _gantt_bars(task_runs, attempts, now)
    starts = [b[1] for b in bars] + [tr.queued_at for tr in task_runs if tr.queued_at]
    if not starts:
        return Markup('<p class="muted">Nothing has started yet.</p>')
    t0 = min(starts)
    t1 = max([b[2] for b in bars] + [t0])
    span = max((t1 - t0).total_seconds(), 0.001)
    scale = (GANTT_WIDTH - GANTT_LABEL - 10) / span
    height = len(task_runs) * GANTT_ROW + 24
    parts = [
        f'<svg class="gantt" width="{GANTT_WIDTH}" height="{height}" '
        f'viewBox="0 0 {GANTT_WIDTH} {height}" role="img" '
        f'aria-label="Gantt of attempts, {escape(duration(span))} in all">'
    ]
    row = {tr.task_name: i for i, tr in enumerate(task_runs)}
    for tr in task_runs:
        y = row[tr.task_name] * GANTT_ROW
        parts.append(f'<text x="0" y="{y + 15}" class="lbl">{escape(tr.task_name[:22])}</text>')
        if tr.queued_at and tr.started_at and tr.started_at > tr.queued_at:
            x = GANTT_LABEL + (tr.queued_at - t0).total_seconds() * scale
            w = max(2.0, (tr.started_at - tr.queued_at).total_seconds() * scale)
            parts.append(
                f'<rect x="{x:.1f}" y="{y + 4}" width="{w:.1f}" height="14" class="queued-seg">'
                f"<title>{escape(tr.task_name)} waited {escape(duration(w / scale))}</title></rect>"
            )
    for name, start, end, state, attempt in bars:
        y = row[name] * GANTT_ROW
        x = GANTT_LABEL + (start - t0).total_seconds() * scale
        w = max(2.0, (end - start).total_seconds() * scale)
        took = duration((end - start).total_seconds())
        parts.append(
            f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="16" '
            f'class="fill st-{escape(state)}" data-task="{escape(name)}">'
            f"<title>{escape(name)}, attempt {attempt}, {escape(label(state))}, {took}</title>"
            "</rect>"
        )
    parts.append(
        f'<text x="{GANTT_LABEL}" y="{height - 4}" class="muted">0</text>'
        f'<text x="{GANTT_WIDTH - 10}" y="{height - 4}" text-anchor="end" class="muted">'
        f"{escape(duration(span))}</text></svg>"
    )
    return Markup("".join(parts))


def _gantt_bars(
    task_runs: Sequence[TaskRun], attempts: Sequence[Attempt], now: datetime
) -> list[tuple[str, datetime, datetime, str, int]]:
    names = {tr.id: tr.task_name for tr in task_runs}
    bars = [
        (names[a.task_run_id], a.started_at, a.finished_at, str(a.state), a.attempt)
        for a in attempts
        if a.started_at is not None and a.task_run_id in names
    ]
    recorded = {(a.task_run_id, a.attempt) for a in attempts}
    for tr in task_runs:
        if tr.started_at is None or (tr.id, tr.attempt) in recorded:
            continue
        end = tr.finished_at or now
        bars.append((tr.task_name, tr.started_at, end, str(tr.state), tr.attempt))
    return bars
