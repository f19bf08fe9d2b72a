"""The shipped labelled quality set and the Chinese rendering of Maria Lopez it asks about."""

from __future__ import annotations

import importlib.util
import json
import re
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem.evaluation.metrics import load_examples

REPO = Path(__file__).resolve().parents[2]
CJK = re.compile(r"[\u4e00-\u9fff]")
FAKE = DeterministicFakeEmbedding(size=8)


def personas_module() -> ModuleType:
    path = REPO / "benchmarks" / "quality_personas.py"
    spec = importlib.util.spec_from_file_location("quality_personas", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PERSONAS = personas_module()


def saved_nodes(persona: str) -> dict[str, dict]:
    path = PERSONAS.PERSONAS[persona] / "associative_memory" / "nodes.json"
    return json.loads(path.read_text(encoding="utf-8"))


def test_every_labelled_node_exists_in_its_persona_loaded_as_the_project_does(
    tmp_path: Path,
) -> None:
    streams = {name: PERSONAS.open_persona(name, FAKE, tmp_path / f"s{n}")
               for n, name in enumerate(PERSONAS.PERSONAS)}
    try:
        examples = load_examples(PERSONAS.QUESTIONS, known_ids=streams)
        assert len(streams["Maria Lopez"]) == len(streams["Maria Lopez (zh)"]) == 267
        assert len(streams["Isabella Rodriguez"]) == 14
    finally:
        for stream in streams.values():
            stream.close()
    assert len(examples) >= 160


def test_the_set_has_the_promised_sizes_languages_and_groups() -> None:
    examples = load_examples(PERSONAS.QUESTIONS)
    groups = Counter((e.persona, e.language, e.group == "cross-lingual") for e in examples)
    english = sum(n for (p, lang, _), n in groups.items() if lang == "en")
    assert english >= 80
    assert groups[("Maria Lopez (zh)", "zh", False)] >= 60
    cross = [e for e in examples if e.group == "cross-lingual"]
    assert len(cross) >= 20 and {e.persona for e in cross} <= {"Maria Lopez", "Isabella Rodriguez"}
    for e in examples:
        assert e.id and e.id.split("-")[0] in {"en", "zh", "x"}
        assert bool(CJK.search(e.query)) == (e.language == "zh") or "@" in e.query, e.id
    kinds = {e.group for e in examples}
    assert {"fact", "paraphrase", "lexical", "time", "chat", "reflection"} <= kinds


def test_cross_lingual_questions_keep_the_labels_of_the_english_ones() -> None:
    by_id = {e.id: e for e in load_examples(PERSONAS.QUESTIONS)}
    for e in (e for e in by_id.values() if e.group == "cross-lingual"):
        source = by_id[e.note.removeprefix("translation of ")]
        assert (source.persona, source.relevant, source.language) == (e.persona, e.relevant, "en")


def test_the_chinese_rendering_mirrors_the_english_stream() -> None:
    english, chinese = saved_nodes("Maria Lopez"), saved_nodes("Maria Lopez (zh)")
    assert list(chinese) == list(english)
    same = ("node_count", "type_count", "type", "depth", "created", "expiration", "poignancy",
            "filling")
    for node_id, en in english.items():
        zh = chinese[node_id]
        for name in same:
            if name == "filling" and en["type"] == "chat":
                speakers = [s for s, _ in en["filling"]]
                assert len(zh["filling"]) == len(speakers), node_id
                assert all(CJK.search(line) for _, line in zh["filling"]), node_id
                continue
            assert zh[name] == en[name], (node_id, name)
        for name in ("description", "embedding_key", "subject", "predicate", "object"):
            assert CJK.search(zh[name]), (node_id, name, zh[name])
        assert len(zh["keywords"]) == len(en["keywords"]), node_id
        assert all(CJK.search(k) for k in zh["keywords"]), node_id


def test_the_chinese_keyword_strengths_are_the_original_counts() -> None:
    # Words that translate alike ("use", "used" -> 使用) add their counts up.
    def strength(persona: str) -> dict[str, int]:
        path = PERSONAS.PERSONAS[persona] / "associative_memory" / "kw_strength.json"
        raw = json.loads(path.read_text(encoding="utf-8"))
        return {kind: sum(counts.values()) for kind, counts in raw.items()}

    assert strength("Maria Lopez (zh)") == strength("Maria Lopez")


@pytest.mark.parametrize("persona", ["Maria Lopez", "Isabella Rodriguez", "Maria Lopez (zh)"])
def test_node_ids_reads_the_saved_ids(persona: str) -> None:
    assert PERSONAS.node_ids(persona) == set(saved_nodes(persona))
