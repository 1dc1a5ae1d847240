"""The one HTML page shell every page of the project is written in: the leaderboard
(:mod:`pipeline.report.render.html`), the suite board (:mod:`pipeline.report.suite.render`) and
the release site (:mod:`pipeline.release.site`).

A page is self-contained: its CSS is inline (:data:`CSS`, then the page's own rules), its images
are ``data:`` URIs (:func:`data_uri`, :func:`figure`), so it opens from ``file://`` or any static
host with nothing beside it. Text goes in through :func:`escape`.
"""

from __future__ import annotations

import base64
import html

# Every page's rules; a page appends its own (html_page's css), which come later and so win.
CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.25rem;
       color: #1b1f24; background: #fff; max-width: 1320px; }
h1 { font-size: 1.3rem; margin: 0 0 .25rem; }
h2 { font-size: 1.05rem; margin: 1.5rem 0 .5rem; }
a { color: #0969da; }
nav { margin: 0 0 .75rem; }
code { font-family: ui-monospace, monospace; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: .25rem .45rem; border-bottom: 1px solid #d0d7de; text-align: left;
         vertical-align: top; }
th { background: #f6f8fa; border-bottom: 2px solid #8c959f; font-size: 13px; }
td.num, th.num { text-align: right; }
.muted { color: #57606a; }
.notes { color: #57606a; font-size: 13px; padding-left: 1.2rem; }
img, figure svg { max-width: 100%; height: auto; }
figure { margin: 0 0 1rem; }
figure img { border: 1px solid #d0d7de; }
figcaption { font-size: 12px; color: #57606a; }
"""

# a local image's file suffix -> its media type (the images a page embeds)
IMAGE_TYPES = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg",
               ".jpeg": "image/jpeg"}


def escape(text: object) -> str:
    """``text`` (``str()`` of it) as HTML text or an attribute value: ``& < > " '`` escaped."""
    return html.escape(str(text), quote=True)


def data_uri(data: bytes, media_type: str = "image/png") -> str:
    """``data`` as a ``data:`` URI (base64), for an ``<img src>``."""
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def figure(caption: str, data: bytes, media_type: str = "image/png") -> str:
    """A ``<figure>``: the image (embedded), ``caption`` as its alt text and its caption."""
    return (f'<figure><img alt="{escape(caption)}" src="{data_uri(data, media_type)}">'
            f"<figcaption>{escape(caption)}</figcaption></figure>")


def html_page(title: str, body: str, css: str = "", head: str = "") -> str:
    """The whole page: ``<title>`` ``title`` (escaped here), a ``<style>`` of :data:`CSS` then
    ``css`` (the page's own rules), ``head`` (more of ``<head>``, as HTML) and ``body`` (HTML,
    the content of ``<body>``: the page writes its own heading)."""
    extra = f"\n{head}" if head else ""
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)}</title>
<style>{CSS}{css}</style>{extra}
</head>
<body>
{body}
</body>
</html>
"""
