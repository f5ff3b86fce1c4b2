"""The word classes the semantic layer weighs (modules/safety/concepts.yaml): matched as
whole words with case and diacritics folded, one feature per class and per pair of classes,
a change retrains the layer, and an author's broken file is reported with file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tutor.risk.concepts import Concepts, load_concepts
from tutor.risk.semantic import BankError, Exemplar, _bank_version, load_semantic

SAFETY = Path(__file__).resolve().parents[2] / "modules" / "safety"


def test_classes_are_found_as_whole_words_with_case_and_diacritics_folded():
    concepts = Concepts({"means": ("thuốc ngủ", "pills"), "time": ("tối nay", "tonight")})
    assert concepts.tokens("Toi nay minh se uong het THUOC NGU") == ["@means", "@time", "@means&time"]
    assert concepts.tokens("Tonight, the pills.") == ["@means", "@time", "@means&time"]
    # Part of a word is not the word: a pillow is not a pill, "thuốc ngủ ngon" still holds "thuốc ngủ".
    assert concepts.tokens("my pillows tonightly") == []
    assert concepts.present("thuốc ngủ ngon") == ["means"]


def test_the_shipped_classes_load_and_name_both_languages():
    concepts = load_concepts(SAFETY)
    assert concepts is not None and {"means", "time", "final", "harmless"} <= set(concepts.words)
    assert concepts.present("I've been saving my sleeping pills") == ["gather", "means"]
    assert concepts.present("minh da de danh du thuoc ngu") == ["gather", "means"]
    assert concepts.present("Mình đã để dành đủ thuốc ngủ") == ["gather", "means"]


def test_a_change_to_the_classes_trains_the_layer_again():
    bank = [Exemplar("I will end it tonight", "self_harm", "imminent"), Exemplar("I am fine", "none")]
    one = Concepts({"means": ("pills",)})
    other = Concepts({"means": ("pills", "rope")})
    versions = {_bank_version("m", bank, 0.5), _bank_version("m", bank, 0.5, one),
                _bank_version("m", bank, 0.5, other), _bank_version("m", bank, 0.5, Concepts({"means": ("pills",)}, 2.0))}
    assert len(versions) == 4


@pytest.mark.parametrize("text, problem", [
    ("classes: []\n", "concepts.yaml:1: expected a mapping with `classes:`"),
    ("classes:\n  Means: [pills]\n", "concepts.yaml:2: class names are snake_case"),
    ("classes:\n  means: [pills]\n  time: []\n", "concepts.yaml:3: class 'time' needs a non-empty list"),
    ("classes:\n  means: [pills, 3, '...']\n", "concepts.yaml:2: class 'means' has entries that are not words"),
    ("weight: 0\nclasses:\n  means: [pills]\n", "concepts.yaml:1: `weight` must be a number above 0"),
    ("classes:\n  means: [pills]\n  means: [rope]\n", "concepts.yaml:3:"),
])
def test_an_authors_broken_classes_are_reported_with_file_and_line(tmp_path, text, problem):
    (tmp_path / "exemplars_en.yaml").write_text(
        "exemplars:\n  - {text: \"I am fine\", label: none}\n"
        "  - {text: \"I will end it tonight\", label: self_harm, severity: imminent}\n", encoding="utf-8")
    (tmp_path / "concepts.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(BankError) as raised:
        load_semantic(tmp_path, ["self_harm"])
    assert problem in str(raised.value)
