"""``cbench site RELEASES -o SITE``: static HTML of one or more releases, for ``file://`` or
any static host (no server, no network: every asset is in the page or beside it).

``index.html`` lists the releases (newest first) and the diff between each and the one before
it. Each release has a page (``<name>/index.html``: where it came from, its cell counts, links)
and under it:

- one page per task (``task-<dataset>.html``): the release's own sortable, filterable
  leaderboard page with its figures (``reports/leaderboard.html``, self-contained), with a link
  back;
- the aggregate page (``aggregate.html``): the ranks across conditions (``ranks.csv``: mean
  rank, IQM, win rate, tier), the pairs (``pairs.csv``) and the critical-difference diagram;
- one page per loss (``loss-<name>.html``): its settings with the headline numbers and their
  intervals over seeds, and its cost (training seconds of its cells).

``diff-<a>--<b>.html`` is :func:`pipeline.release.diff.to_markdown`'s content as HTML.

The front page opens with the findings, before the list of releases: a Markdown document given
with ``--findings`` (``docs/FINDINGS.md``: each claim's verdict and its evidence), its local
images embedded, and the table of every paper claim the releases decided or left open (each
release's ``reports/summary.json``: setting, claim, verdict, seeds, the reason where one is
given).
"""

from __future__ import annotations

import json
import re
import shutil
from html import unescape
from pathlib import Path

import pandas as pd

from pipeline.metrics import METRICS, lookup
from pipeline.release.bundle import REPORTS, Release, ReleaseError, read_release, read_table
from pipeline.release.diff import Diff, diff, interval_of, side
from pipeline.report.render.page import IMAGE_TYPES, data_uri, escape, html_page

# the site's own rules, after the shell's (pipeline.report.render.page.CSS)
_CSS = """
table { margin: .5rem 0 1.25rem; }
code { background: #f6f8fa; padding: 0 .2rem; }
section.findings { border-bottom: 2px solid #d0d7de; margin: 1rem 0 1.25rem; }
"""


def _page(title: str, body: str, back: str | None = None) -> str:
    nav = f'<nav><a href="{escape(back)}">← back</a></nav>\n' if back else ""
    return html_page(title, f"{nav}<h1>{escape(title)}</h1>\n{body}", _CSS)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "x"


def _table(frame: pd.DataFrame, columns: list[str] | None = None) -> str:
    columns = columns or list(frame.columns)
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    rows = []
    for _, row in frame.iterrows():
        cells = []
        for c in columns:
            v = row[c]
            numeric = isinstance(v, int | float) and not isinstance(v, bool)
            text = "–" if numeric and pd.isna(v) else (f"{v:.4g}" if isinstance(v, float) else v)
            td = '<td class="num">' if numeric else "<td>"
            cells.append(f"{td}{escape(text)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _csv(release: Release, name: str) -> pd.DataFrame:
    return read_table(release.path / REPORTS, name)


def _task(release: Release) -> str:
    """The task's name: the dataset every cell of the release was trained on."""
    params = release.path / "params.resolved.yaml"
    found = re.search(r"^data:\n(?:  .*\n)*?  name: (\S+)", params.read_text(encoding="utf-8"),
                      re.M) if params.is_file() else None
    return found.group(1) if found else "grid"


def _interval_text(row: pd.Series, metric: str) -> str:
    m, mean, interval = lookup(metric), row.get(f"{metric}_mean"), interval_of(row, metric)
    if mean is None or pd.isna(mean):
        return "–"
    return m.text(mean) if interval is None else \
        f"{m.text(mean)} [{m.text(interval[0])}, {m.text(interval[1])}]"


def _loss_page(release: Release, loss: str, board: pd.DataFrame, back: str) -> str:
    rows = board[board["loss"] == loss]
    metrics = [c.removesuffix("_mean") for c in board.columns
               if c.endswith("_mean") and c.removesuffix("_mean") in METRICS]
    settings = [c for c in ("objective", "arch", "k", "tau", "tau_schedule", "n", "embed_dim",
                            "batch_size", "n_seeds", "failed") if c in rows.columns]
    shown = rows[settings].copy()
    for m in metrics:
        shown[lookup(m).header] = [_interval_text(r, m) for _, r in rows.iterrows()]
    cells = [c for c in release.cells if c["config"].get("loss") == loss]
    seconds = [c["cost"]["wall_seconds"] for c in cells if c["cost"]["wall_seconds"] is not None]
    cost = (f"<p>{len(cells)} cells; training time {sum(seconds):.1f} s in all, median "
            f"{pd.Series(seconds).median():.2f} s a cell "
            f"({escape(', '.join(sorted({c['cost']['hardware'] for c in cells})))}).</p>"
            if seconds else f"<p>{len(cells)} cells; no training time recorded.</p>")
    body = (f"{cost}<h2>Settings</h2><p class=muted>mean [interval over seeds] of each "
            f"headline metric</p>{_table(shown)}")
    return _page(f"{release.name}: loss {loss}", body, back)


def _aggregate_page(release: Release, back: str) -> str:
    ranks, pairs = _csv(release, "ranks.csv"), _csv(release, "pairs.csv")
    svg = release.path / REPORTS / "plots" / "critical_difference.svg"
    figure = (f"<figure>{svg.read_text(encoding='utf-8').split('?>', 1)[-1]}</figure>"
              if svg.is_file() else "<p>No critical-difference diagram in this release.</p>")
    body = (("<h2>Ranks across conditions</h2>" + _table(ranks)) if len(ranks) else
            "<p>No ranks (one loss, or no blocks to rank over).</p>")
    body += "<h2>Critical-difference diagram</h2>" + figure
    if len(pairs):
        body += "<h2>Pairs</h2>" + _table(pairs)
    return _page(f"{release.name}: all losses", body, back)


def _release_page(release: Release, task: str, losses: list[str]) -> str:
    m = release.manifest
    counts = ", ".join(f"{v} {k}" for k, v in m.get("cells", {}).items())
    links = [f'<li><a href="task-{_slug(task)}.html">task: {escape(task)}</a> '
             "(the leaderboard: sort, filter, open a row)</li>",
             '<li><a href="aggregate.html">all losses: ranks, tiers, the CD diagram</a></li>']
    links += [f'<li><a href="loss-{_slug(loss)}.html">loss: {escape(loss)}</a></li>'
              for loss in losses]
    body = (f"<p>commit <code>{escape(m.get('git_commit'))}</code>, profile "
            f"<code>{escape(m.get('profile') or 'none')}</code>, created "
            f"{escape(m.get('created'))}; cells: {escape(counts)}.</p>"
            f"<ul>{''.join(links)}</ul>"
            '<p><a href="REPRODUCE.md">how to reproduce it</a> · '
            '<a href="results.json">results.json</a> · <a href="MANIFEST.json">manifest</a></p>')
    return _page(f"Release {release.name}", body, "../index.html")


def _diff_page(d: Diff, a: str, b: str) -> str:
    parts = [f"<p>{len(d.added)} cells added, {len(d.removed)} removed, {len(d.retrained)} "
             f"retrained by other code; {len(d.moved)} headline numbers moved beyond their "
             f"interval over seeds, {d.unchanged_numbers} did not.</p>"]
    if d.moved:
        frame = pd.DataFrame([{"setting": m.setting, "metric": lookup(m.metric).label,
                               "before": m.a, "after": m.b} for m in d.moved])
        parts.append("<h2>Moved</h2>" + _table(frame))
    if d.retrained:
        frame = pd.DataFrame(d.retrained, columns=["cell", "version before", "version after"])
        parts.append("<h2>Retrained by other code</h2>" + _table(frame))
    for title, items in (("Added cells", d.added), ("Removed cells", d.removed)):
        if items:
            parts.append(f"<h2>{title}</h2><p>{escape(', '.join(items))}</p>")
    if d.tiers:
        parts.append("<h2>Tiers</h2>" + _table(pd.DataFrame(d.tiers,
                                                             columns=["loss", "before", "after"])))
    if d.order:
        parts.append(f"<h2>Order</h2><p>before: {escape(' > '.join(d.order[0]))}<br>"
                     f"after: {escape(' > '.join(d.order[1]))}</p>")
    return _page(f"Diff {a} → {b}", "".join(parts), "index.html")


def _embed_images(body: str, folder: Path) -> str:
    """Each ``<img src>`` that names a local file (relative to ``folder``) as a data URI, so the
    page needs nothing beside it; other sources are left as they are."""
    def embed(match: re.Match[str]) -> str:
        src = unescape(match.group(1))
        path = folder / src
        kind = IMAGE_TYPES.get(path.suffix.lower())
        if "://" in src or src.startswith("data:") or kind is None or not path.is_file():
            return match.group(0)
        return f'src="{data_uri(path.read_bytes(), kind)}"'
    return re.sub(r'src="([^"]+)"', embed, body)


def findings_html(path: Path) -> str:
    """A findings document (Markdown with tables) as HTML, its local images embedded."""
    from markdown_it import MarkdownIt

    if not path.is_file():
        raise ReleaseError(f"--findings {path}: no such file (a Markdown document, e.g. "
                           "docs/FINDINGS.md)")
    rendered = MarkdownIt("commonmark").enable("table").render(path.read_text(encoding="utf-8"))
    return _embed_images(rendered, path.parent)


CLAIM_COLUMNS = ("release", "setting", "claim", "verdict", "seeds", "reason", "trained enough")
_TRAINED = {True: "yes", False: "no"}  # an image claim's trained-enough check; "" where none


def claims_table(releases: list[Release]) -> pd.DataFrame:
    """Every paper claim of the releases (``reports/summary.json``'s ``paper_claims``), one row
    each in :data:`CLAIM_COLUMNS`; empty where no release has one."""
    rows = []
    for r in releases:
        summary = r.path / REPORTS / "summary.json"
        claims = (json.loads(summary.read_text(encoding="utf-8")).get("paper_claims", [])
                  if summary.is_file() else [])
        rows += [{"release": r.name, **{k: c.get(k, "") for k in CLAIM_COLUMNS[1:-1]},
                  "trained enough": _TRAINED.get(c.get("trained_enough"), "")} for c in claims]
    return pd.DataFrame(rows, columns=list(CLAIM_COLUMNS))


def _front(releases: list[Release], findings: Path | None) -> str:
    """What the front page shows before the list of releases: the findings, then the claims."""
    parts = [f'<section class="findings">{findings_html(findings)}</section>'] if findings else []
    claims = claims_table(releases)
    if len(claims):
        parts.append("<h2>Paper claims in these releases</h2><p class=muted>verdicts over seeds "
                     "(held, contradicted, unresolved with its reason, or undertrained); each "
                     "release's reports/paper_tables.md has the intervals</p>" + _table(claims))
    return "".join(parts)


def _with_back_link(page: str, back: str) -> str:
    """The release's leaderboard page with a link back to the release, after ``<body…>``."""
    link = f'<nav style="margin:0 0 .75rem"><a href="{escape(back)}">← release</a></nav>'
    return re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + link, page, count=1)


def build_site(release_paths: list[Path], out: Path, findings: Path | None = None) -> Path:
    """Write the site for the releases at ``release_paths`` into ``out``; returns its index.
    ``findings``: a Markdown document the front page shows first (see the module's text)."""
    releases = sorted((read_release(p) for p in release_paths),
                      key=lambda r: (str(r.manifest.get("created", "")), r.name))
    if not releases:
        raise ReleaseError("no releases to build a site from (pass release folders, or the "
                           "folder that holds them)")
    front = _front(releases, findings)  # before any file is written: a bad path stops here
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for r in releases:
        folder = out / _slug(r.name)
        folder.mkdir(exist_ok=True)
        for name in ("REPRODUCE.md", "results.json", "MANIFEST.json"):
            shutil.copyfile(r.path / name, folder / name)
        board = _csv(r, "leaderboard.csv")
        losses = sorted(board["loss"].unique()) if "loss" in board else []
        task = _task(r)
        source = r.path / REPORTS / "leaderboard.html"
        task_page = (_with_back_link(source.read_text(encoding="utf-8"), "index.html")
                     if source.is_file() else _page(task, "<p>No HTML leaderboard.</p>",
                                                    "index.html"))
        (folder / f"task-{_slug(task)}.html").write_text(task_page, encoding="utf-8")
        (folder / "aggregate.html").write_text(_aggregate_page(r, "index.html"),
                                               encoding="utf-8")
        for loss in losses:
            (folder / f"loss-{_slug(loss)}.html").write_text(
                _loss_page(r, loss, board, "index.html"), encoding="utf-8")
        (folder / "index.html").write_text(_release_page(r, task, losses), encoding="utf-8")
        counts = r.manifest.get("cells", {})
        rows.append(f'<tr><td><a href="{_slug(r.name)}/index.html">{escape(r.name)}</a></td>'
                    f"<td>{escape(r.manifest.get('created'))}</td>"
                    f"<td><code>{escape(r.manifest.get('git_commit'))}</code></td>"
                    f'<td>{escape(task)}</td><td class="num">{counts.get("total", 0)}</td>'
                    f'<td class="num">{counts.get("failed", 0)}</td></tr>')
    diffs = []
    for before, after in zip(releases, releases[1:], strict=False):
        name = f"diff-{_slug(before.name)}--{_slug(after.name)}.html"
        d = diff(side(before.path), side(after.path))
        (out / name).write_text(_diff_page(d, before.name, after.name), encoding="utf-8")
        diffs.append(f'<li><a href="{name}">{escape(before.name)} → '
                     f"{escape(after.name)}</a>: "
                     f"{'changes' if d.changed else 'no change'}</li>")
    body = front + ("<h2>Releases</h2>" if front else "") + (
            "<table><thead><tr><th>release</th><th>created</th><th>commit</th><th>task</th>"
            f"<th>cells</th><th>failed</th></tr></thead><tbody>{''.join(reversed(rows))}"
            "</tbody></table>")
    if diffs:
        body += f"<h2>Between releases</h2><ul>{''.join(reversed(diffs))}</ul>"
    index = out / "index.html"
    index.write_text(_page("contrastive-bench releases", body), encoding="utf-8")
    return index


def release_folders(paths: list[Path]) -> list[Path]:
    """Release folders among ``paths``: each a release, or a folder of releases."""
    found: list[Path] = []
    for p in paths:
        if (p / "MANIFEST.json").is_file():
            found.append(p)
        elif p.is_dir():
            found += sorted(q for q in p.iterdir() if (q / "MANIFEST.json").is_file())
        else:
            raise ReleaseError(f"{p}: not a release or a folder of releases")
    return found
