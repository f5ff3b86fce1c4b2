"""The module's glossary: a question's words in another language read as the module's terms."""

from tutor.content.modules import load_library
from tutor.teach.glossary import Glossary, glossed, terms

ENTRIES = {
    "heart racing": ["tim đập nhanh", "hồi hộp"],
    "fear": ["sợ", "nỗi sợ"],
    "avoidance": ["né tránh", "tránh"],
    "slow breathing": ["thở chậm"],
}


def test_phrasings_match_with_or_without_diacritics():
    glossary = Glossary(ENTRIES)
    assert glossary.terms("tim đập nhanh quá") == ["heart racing"]
    assert glossary.terms("tim dap nhanh qua, hoi hop") == ["heart racing"]
    assert glossary.terms("THỞ CHẬM thế nào") == ["slow breathing"]


def test_one_word_counts_only_as_written_with_its_diacritics():
    glossary = Glossary(ENTRIES)
    assert glossary.terms("mình sợ lắm") == ["fear"]
    assert glossary.terms("so what do i do") == []  # "so" typed plain is as likely another word
    assert glossary.terms("mình cứ tránh") == ["avoidance"]


def test_longest_phrasing_wins_and_terms_come_once_in_order():
    glossary = Glossary(ENTRIES)
    assert glossary.terms("nỗi sợ làm mình né tránh, rồi lại sợ") == ["fear", "avoidance"]


def test_the_sample_modules_glossaries_read_the_other_language():
    library = load_library(None)
    anxiety, sleep = library.get("understanding_anxiety"), library.get("giac_ngu_lanh_manh")
    assert "heart racing, pounding heart" in terms(anxiety, "tim dap thinh thich, tay run")
    assert any("màn hình" in t for t in terms(sleep, "is scrolling my phone in bed bad"))
    assert glossed(anxiety, "what is anxiety") == ""  # English on the English module: nothing added
