"""SVG screenshots whose words stay apart in every SVG viewer.

Rich writes a screenshot as one absolutely placed `<text>` per run of equally styled cells, with
spaces as `&#160;`, and without `xml:space="preserve"`. Viewers that follow SVG's default space
rules (librsvg's `rsvg-convert`, ImageMagick, resvg) strip the leading and trailing spaces of each
`<text>`, so a run that starts with spaces is drawn that many cells to the left, against the run
before it: "Plan  4 steps" showed as "Plan4 steps", "`customer_id` lost" as "customer_idlost".
Browsers keep the spaces, and a terminal never had the problem: it draws cells, not runs.

Two things keep the words apart: `preserve_spaces` marks the whole picture `xml:space="preserve"`
(the app's `export_screenshot` applies it), and the app's own labels put a separating space at
the end of a styled run, never at the start of the next (a stripped trailing space moves nothing,
since the next run has its own position).
"""

from __future__ import annotations

SVG_OPEN = "<svg "


def preserve_spaces(svg: str) -> str:
    """`svg` with `xml:space="preserve"` on its root element (once; unchanged if already there)."""
    head, found, rest = svg.partition(SVG_OPEN)
    if not found or rest.startswith('xml:space="preserve"'):
        return svg
    return f'{head}{SVG_OPEN}xml:space="preserve" {rest}'
