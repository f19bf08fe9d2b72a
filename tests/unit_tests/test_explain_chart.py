"""The `genmem explain` chart: Chinese renders, the legend stays off the bars, rows are told
apart, every bar carries its numbers."""

from __future__ import annotations

import warnings
from datetime import datetime

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream, SimulationClock
from langchain_genmem.cli.chart import explain_figure, font_family
from langchain_genmem.cli.reports import retrieve_rows

matplotlib = pytest.importorskip("matplotlib")
SAME = "玛丽亚在霍布斯咖啡馆和克劳斯讨论他那篇关于城市化进程中低收入群体住房问题的论文"


@pytest.fixture
def figure():
    stream = MemoryStream("玛丽亚", embeddings=DeterministicFakeEmbedding(size=16),
                          clock=SimulationClock(datetime(2023, 2, 13, 18)))
    stream.add_many(
        [{"type": "event", "description": SAME, "poignancy": 5,
          "created": datetime(2023, 2, 13, h)} for h in (9, 10, 11)]
        + [{"type": "thought", "description": "玛丽亚很期待情人节派对", "poignancy": 8}]
    )
    retriever = GenerativeAgentsRetriever(stream=stream, k=4, update_access=False)
    rows = retrieve_rows(retriever, "克劳斯的论文", 4, None)
    fig = explain_figure(rows, retriever, "玛丽亚: 克劳斯的论文")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.canvas.draw()
    return fig, rows, [str(w.message) for w in caught]


def test_chinese_text_has_glyphs(figure) -> None:
    fig, _, caught = figure
    assert not [m for m in caught if "missing" in m], caught
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    cjk = [f for f in font_manager.fontManager.ttflist if f.name in font_family()[1:]]
    assert cjk, "no font that covers Chinese"
    font = FT2Font(cjk[0].fname)
    assert all(font.get_char_index(ord(ch)) for ch in "玛丽亚克劳斯的论文")


def test_rows_with_the_same_words_get_distinct_labels(figure) -> None:
    fig, rows, _ = figure
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert len(labels) == len(set(labels)) == len(rows) == 4
    assert sum(SAME[:10] in label for label in labels) == 3


def test_the_legend_covers_no_bar(figure) -> None:
    fig, _, _ = figure
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    bars = [p.get_window_extent(renderer) for p in ax.patches if p.get_width() > 0]
    assert bars and not any(legend.overlaps(b) for b in bars)
    # above the plotting area, so no bar of any length can ever run under it
    assert legend.y0 >= ax.get_window_extent(renderer).y1 - 1


def test_every_bar_shows_its_total(figure) -> None:
    fig, rows, _ = figure
    texts = {t.get_text() for t in fig.axes[0].texts}
    totals = {f"{r['score']:.2f}" for r in rows}
    assert totals <= texts
