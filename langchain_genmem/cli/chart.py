"""The ``genmem explain`` chart: each retrieved memory's weighted score components as bars.

One horizontal bar per memory, best at the top, split into its weighted recency, relevance
and importance, with each part's value inside it and the total at its end. Labels hold the
rank and node id, so two memories with the same words stay two rows. Chinese (and any CJK)
text renders with Noto Sans CJK SC, shipped by the ``mplfonts`` package of the ``plot``
extra (SIL Open Font License); a system CJK font is used when that package is absent.
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_genmem.cli.render import relevance_formula
from langchain_genmem.cli.reports import effective_gains, number
from langchain_genmem.core.errors import ValidationError
from langchain_genmem.core.extras import require_extra

if TYPE_CHECKING:
    from langchain_genmem.retrieval.weighted import WeightedRetrieval

# What the output's suffix selects; anything else is refused before any work.
FORMATS = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".svg": "svg", ".pdf": "pdf"}
BASE_FONT = "DejaVu Sans"  # matplotlib's own font: Latin, digits, ×
CJK_FONT_FILE = "NotoSansCJKsc-Regular.otf"  # in mplfonts/fonts/
SYSTEM_CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans SC", "WenQuanYi Zen Hei", "SimHei")
COLORS = ("#4c72b0", "#55a868", "#c44e52")
LABEL_CHARS = 34  # description characters in a row label (CJK counts double)
MIN_INSIDE = 0.22  # segments narrower than this share of the widest bar get no number


def chart_format(output: Path) -> str:
    """The image format an output file's suffix asks for.

    Args:
        output: the file to write.

    Returns:
        The matplotlib format name.

    Raises:
        ValidationError: a suffix that is not .png, .jpg, .jpeg, .svg or .pdf.
    """
    fmt = FORMATS.get(output.suffix.lower())
    if fmt is None:
        allowed = ", ".join(FORMATS)
        msg = f"--output: cannot tell the image format of {output.name!r}; end it in {allowed}"
        raise ValidationError(msg, field="--output")
    return fmt


def require_plotting() -> None:
    """Refuse a chart when matplotlib is missing, naming the extra to install.

    Raises:
        ConfigurationError: matplotlib is not installed (the ``plot`` extra).
    """
    require_extra("matplotlib", "plot", "explain -o (a chart)")


def checked_output(output: Path) -> str:
    """Refuse an output the chart cannot go to, before any work; nothing is created.

    Args:
        output: the file to write.

    Returns:
        The matplotlib format name (:func:`chart_format`).

    Raises:
        ValidationError: an unknown suffix, or a folder that does not exist (a typo in
            it must not leave new folders behind).
        ConfigurationError: matplotlib is not installed.
    """
    fmt = chart_format(output)
    require_plotting()
    folder = output.parent
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        msg = f"--output: the folder {folder} {what}; create it first or write elsewhere"
        raise ValidationError(msg, field="--output")
    return fmt


def save_explain_png(
    rows: Sequence[Mapping[str, Any]],
    retriever: WeightedRetrieval,
    title: str,
    output: Path,
) -> None:
    """Save stacked horizontal bars of each memory's weighted score components.

    Despite its name the format follows the suffix (PNG, JPEG, SVG or PDF).

    Args:
        rows: rows from :func:`~langchain_genmem.cli.reports.retrieve_rows`, best first.
        retriever: the retriever that ranked them (for its weights).
        title: the chart's title.
        output: the file to write.

    Raises:
        ConfigurationError: matplotlib is not installed.
        ValidationError: an unknown suffix, a folder that does not exist, or the file
            cannot be written (names the file).
    """
    fmt = checked_output(output)
    _write(explain_figure(rows, retriever, title), output, fmt)


def explain_figure(
    rows: Sequence[Mapping[str, Any]], retriever: WeightedRetrieval, title: str
) -> Any:
    """The chart of :func:`save_explain_png` as a matplotlib Figure (nothing written).

    Args:
        rows: rows from :func:`~langchain_genmem.cli.reports.retrieve_rows`, best first.
        retriever: the retriever that ranked them (for its weights).
        title: the chart's title.

    Returns:
        The figure, on an Agg canvas.

    Raises:
        ConfigurationError: matplotlib is not installed.
    """
    require_plotting()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fonts = font_family()
    fig = Figure(figsize=(11, 1.6 + 0.5 * max(len(rows), 1)), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    _bars(ax, rows, effective_gains(retriever), fonts)
    label = "score = Σ gain × normalised component"
    if relevance := relevance_formula(retriever, rows):
        label = f"{label}\n{relevance}"
    ax.set_xlabel(label, fontfamily=fonts)
    ax.set_title(title, loc="left", fontfamily=fonts, pad=28)
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), ncol=3, frameon=False,
              prop={"family": fonts})
    for text in ax.get_yticklabels():
        text.set_fontfamily(fonts)
    return fig


def _bars(
    ax: Any, rows: Sequence[Mapping[str, Any]], gains: Mapping[str, float], fonts: list[str]
) -> None:
    positions = list(range(len(rows)))[::-1]  # best on top
    left = [0.0] * len(rows)
    widest = max([sum(g * r[n] for n, g in gains.items()) for r in rows] + [1e-9])
    for (name, gain), color in zip(gains.items(), COLORS, strict=True):
        widths = [gain * r[name] for r in rows]
        bars = ax.barh(positions, widths, left=left, color=color, height=0.7,
                       label=f"{number(gain)} × {name}")
        shown = [f"{w:.2f}" if w >= MIN_INSIDE * widest else "" for w in widths]
        ax.bar_label(bars, labels=shown, label_type="center", color="white", fontsize=8)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    for y, total in zip(positions, left, strict=True):
        ax.text(total + widest * 0.01, y, f"{total:.2f}", va="center", fontsize=9,
                fontweight="bold", fontfamily=BASE_FONT)  # digits: no CJK bold needed
    ax.set_xlim(0, widest * 1.1)
    ax.set_yticks(positions, [_label(i, r) for i, r in enumerate(rows, start=1)], fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)


def _label(place: int, row: Mapping[str, Any]) -> str:
    return f"{place}. {row['node_id']}  {_cut(str(row['description']), LABEL_CHARS)}"


def _cut(text: str, width: int) -> str:
    """Cut a text to about ``width`` Latin characters (a CJK character counts as two)."""
    used = 0
    for i, ch in enumerate(text):
        used += 2 if ord(ch) >= 0x2E80 else 1
        if used > width:
            return text[:i] + "…"
    return text


def _write(fig: Any, output: Path, fmt: str) -> None:
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Glyph.*missing")
            fig.savefig(output, format=fmt, dpi=110)
    except OSError as e:
        msg = f"--output: cannot write {output} ({e.strerror or e})"
        raise ValidationError(msg, field="--output") from None


@cache
def font_family() -> list[str]:
    """Fonts to draw with, in fallback order: matplotlib's own, then one that covers Chinese.

    Returns:
        Family names for ``fontfamily=``; the CJK one is registered from mplfonts' bundled
        file when that package is installed, else taken from the system when present.
    """
    from matplotlib import font_manager

    spec = importlib.util.find_spec("mplfonts")  # located, not imported: it changes rcParams
    if spec is not None and spec.origin is not None:
        bundled = Path(spec.origin).parent / "fonts" / CJK_FONT_FILE
        if bundled.is_file():
            font_manager.fontManager.addfont(str(bundled))
            return [BASE_FONT, font_manager.FontProperties(fname=str(bundled)).get_name()]
    present = {f.name for f in font_manager.fontManager.ttflist}
    return [BASE_FONT, *(name for name in SYSTEM_CJK_FONTS if name in present)]
