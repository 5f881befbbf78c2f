"""The page-wide layout checks of an `attnlab report` page, in headless Chromium (the browser
tests import them: tests/test_report_browser.py's check_page runs them on every page it makes,
tests/test_report_axes.py on its own pages).

layout_problems(b) resizes the page's window to each of WIDTHS and lists, on every svg:
  - a text whose bounding box leaves its svg (clipped), or a chart wider than the window;
  - a tick label (text.tick: data-axis x, y or colour, data-value) overlapping another text;
  - ticks that are not round: on a linear axis evenly spaced values by 1, 2 or 5 times a
    power of ten, each a multiple of that step; on a log axis each 1, 2 or 5 times a power of
    ten; a label that does not read as its value;
  - on a line chart (svg.chart with data-y-scale), ticks not where their values are: their
    positions off a line (linear axis) or a line in log10 of the value (log axis);
  - an accuracy chart (ACCURACY) whose y axis is not exactly 0 to 1 or whose curves leave it.
"""
import math

WIDTHS = (1000, 1280, 2000)
ACCURACY = ("train_token_acc", "train_exact", "heldout_token_acc", "heldout_exact")

# In the page: every svg's box, its texts (their boxes and, for ticks, axis and value) and,
# for a line chart, its scale and its lines' points in the viewport.
SVGS = """(() => {
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  return [...document.querySelectorAll("svg")].filter((s) => s.getBoundingClientRect().width > 0).map((s) => {
    const m = s.getScreenCTM();
    const at = (x, y) => { const p = new DOMPoint(x, y).matrixTransform(m); return [p.x, p.y]; };
    return {
      chart: s.dataset.chart || s.dataset.scatter || s.getAttribute("class") || "svg", box: box(s),
      yScale: s.dataset.yScale || null, colourScale: s.dataset.scale || null, named: !!s.dataset.xNames,
      texts: [...s.querySelectorAll("text")].filter((t) => t.textContent.trim()).map((t) => ({
        text: t.textContent, box: box(t), tick: t.classList.contains("tick"), axis: t.dataset.axis || null,
        value: t.dataset.value === undefined ? null : Number(t.dataset.value) })),
      lines: [...s.querySelectorAll("polyline")].map((l) => l.getAttribute("points").split(" ").filter(Boolean)
        .map((xy) => at(...xy.split(",").map(Number)))),
    };
  });
})()"""


def overlap(a, b):
    return min(a[2], b[2]) - max(a[0], b[0]) > 0.5 and min(a[3], b[3]) - max(a[1], b[1]) > 0.5


def is_round(v):
    """1, 2 or 5 times a power of ten."""
    if v <= 0:
        return False
    m = v / 10 ** math.floor(math.log10(v) + 1e-9)
    return any(abs(m - k) < 1e-6 for k in (1, 2, 5, 10))


def line_fit(xs, ys):
    """The largest distance of (xs, ys) from their least-squares line."""
    n, mx, my = len(xs), sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    k = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0
    return max(abs(y - (my + k * (x - mx))) for x, y in zip(xs, ys)) if n else 0


def tick_problems(svg, axis, ticks, log):
    """The ticks of one axis: round values, evenly spaced, labelled by their values, and
    (line charts, colour bars) placed at their values."""
    what, out = f"{svg['chart']} {axis} axis ticks {[t['text'] for t in ticks]}", []
    values = [t["value"] for t in ticks]
    numeric = not (axis == "x" and svg["named"])
    if numeric and not all(_reads_as(t["text"], t["value"]) for t in ticks):
        out.append(f"{what}: a label is not its value {values}")
    if len(values) < 2:
        return out
    if log:
        if not all(is_round(v) for v in values):
            out.append(f"{what}: not 1, 2 or 5 times a power of ten")
    else:
        steps = [b - a for a, b in zip(values, values[1:])]
        step = steps[0]
        even = all(abs(s - step) <= 1e-9 * max(abs(step), 1e-300) for s in steps)
        multiple = all(abs(v / step - round(v / step)) < 1e-6 for v in values) if step > 0 else False
        if not (even and step > 0 and is_round(step) and multiple):
            out.append(f"{what}: not evenly spaced round values (steps {steps})")
    placed = svg["yScale"] if axis in ("x", "y") else svg["colourScale"]
    if placed and numeric:
        where = [(t["box"][1] + t["box"][3]) / 2 if axis == "y" else (t["box"][0] + t["box"][2]) / 2 for t in ticks]
        keys = [math.log10(v) for v in values] if log else values
        if line_fit(keys, where) > 0.75:
            out.append(f"{what}: not placed in proportion to their values (at {[round(w, 1) for w in where]})")
    return out


def _reads_as(text, value):
    try:
        return abs(float(text) - value) <= 1e-9 * max(abs(value), 1e-300)
    except ValueError:
        return False


def svg_problems(svg, width):
    out, (left, top, right, bottom) = [], svg["box"]
    for t in svg["texts"]:
        x0, y0, x1, y1 = t["box"]
        if x0 < left - 0.5 or x1 > right + 0.5 or y0 < top - 0.5 or y1 > bottom + 0.5:
            out.append(f"{svg['chart']}: text {t['text']!r} leaves its svg (clipped) at width {width}")
    if svg["yScale"] or svg["colourScale"]:
        if right > width + 0.5:
            out.append(f"{svg['chart']}: wider than the {width} px window (right edge {right:.0f})")
    texts = svg["texts"]
    for i, a in enumerate(texts):
        for b in texts[i + 1:]:
            if (a["tick"] or b["tick"]) and overlap(a["box"], b["box"]):
                out.append(f"{svg['chart']}: tick label {a['text']!r} overlaps {b['text']!r} at width {width}")
    for axis in ("x", "y", "colour"):
        ticks = [t for t in texts if t["tick"] and t["axis"] == axis]
        if ticks:
            log = (svg["yScale"] == "log" and axis == "y") or (svg["colourScale"] == "log" and axis == "colour")
            out += tick_problems(svg, axis, ticks, log)
    if svg["chart"] in ACCURACY:
        out += accuracy_problems(svg)
    return out


def accuracy_problems(svg):
    """An accuracy chart: a linear y axis from exactly 0 to 1, every curve within it."""
    ys = [t for t in svg["texts"] if t["tick"] and t["axis"] == "y"]
    values = [t["value"] for t in ys]
    if svg["yScale"] != "linear" or not values or min(values) != 0 or max(values) != 1:
        return [f"{svg['chart']}: accuracy axis {svg['yScale']} {values}, not 0 to 1"]
    mid = {t["value"]: (t["box"][1] + t["box"][3]) / 2 for t in ys}
    top, bottom = mid[1], mid[0]
    off = [y for line in svg["lines"] for _, y in line if not top - 1 <= y <= bottom + 1]
    return [f"{svg['chart']}: curve points outside the 0-1 axis at {off[:3]}"] if off else []


def layout_problems(b, height=2400):
    """The layout checks at each of WIDTHS (the window back at 1280 x height after)."""
    out = []
    for width in WIDTHS:
        b.resize(width, height)
        for svg in b.evaluate(SVGS):
            out += svg_problems(svg, width)
    b.resize(1280, height)
    return sorted(set(out), key=out.index)
