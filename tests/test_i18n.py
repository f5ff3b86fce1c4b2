"""Message catalogues: complete, placeholders intact, plurals, fallbacks, and the tutor's own
words in the module's language (the built-in tutor, input errors, apologies)."""

from __future__ import annotations

import asyncio
import gettext
import io
import json
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.mofile import write_mo
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fakes.servers import FakeLLMServer, settings_for
from tests.fakes.wire import error
from tutor.content.modules import check_file, load_library
from tutor.i18n import (
    LOCALES_DIR,
    PAGE,
    Phrase,
    Translator,
    available_languages,
    catalogue_problems,
    localize,
    placeholders,
    preferred_language,
    read_catalogue,
    supported,
    translator,
)
from tutor.llm.base import LearnerInput
from tutor.llm.config import LLMSettings
from tutor.llm.factory import make_provider
from tutor.render.display import message_item, progress_item
from tutor.storage import dbfaults
from tutor.storage.store import Store
from tutor.turns.engine import Engine, InputError

ROOT = Path(__file__).resolve().parents[1]
ENGLISH = read_catalogue(LOCALES_DIR / "en" / "LC_MESSAGES" / "tutor.po")
VIETNAMESE = read_catalogue(LOCALES_DIR / "vi" / "LC_MESSAGES" / "tutor.po")
VI_MODULE = "giac_ngu_lanh_manh"
# How the code marks text for the catalogues (tutor.i18n): t(...) / t.plural(one, many, n)
# in the built-in tutor, self._t(...) in the page state, N_(...) for constants, Phrase(...) for errors made before the
# language is known, ui(...) for the chat page's own words.
KEYWORDS = {"t": None, "_t": None, "plural": (1, 2), "N_": None, "Phrase": None, "ui": None}
VIETNAMESE_LETTERS = set("ăâđêôơưạảấầẩẫậắằẳẵặẹẻẽếềểễệỉịọỏốồổỗộớờởỡợụủứừửữựỳỵỷỹ")


def run(coro):
    return asyncio.run(coro)


def _vietnamese(text: str) -> bool:
    return bool(VIETNAMESE_LETTERS & set(text.lower()))


def _translator(po_text: str, language: str = "vi") -> Translator:
    buffer = io.BytesIO()
    write_mo(buffer, read_catalogue(po_text, language))
    buffer.seek(0)
    return Translator(language, gettext.GNUTranslations(buffer))


# ------------------------------------------------------------------ the catalogues


def test_english_and_vietnamese_ship():
    assert {"en", "vi"} <= set(available_languages())


def test_every_english_message_has_a_vietnamese_translation_with_the_same_placeholders():
    assert len([m for m in ENGLISH if m.id]) >= 60
    assert catalogue_problems(ENGLISH, VIETNAMESE) == []


def test_every_string_the_code_marks_is_in_the_english_catalogue():
    known = {(m.context, m.id if isinstance(m.id, str) else m.id[0]) for m in ENGLISH if m.id}
    marked = []
    for folder in ("tutor", "components"):
        for filename, lineno, message, _, _ in extract_from_dir(ROOT / folder, keywords=KEYWORDS,
                                                                 method_map=[("**.py", "python")]):
            msgid = message if isinstance(message, str) else message[0]
            context = PAGE if folder == "components" and "ui(" in _line(ROOT / folder / filename, lineno) else None
            if msgid and (context, msgid) not in known and (None, msgid) not in known:
                marked.append(f"{folder}/{filename}:{lineno}: {msgid!r}")
    assert marked == []


def _line(path: Path, lineno: int) -> str:
    return path.read_text(encoding="utf-8").splitlines()[lineno - 1]


BROKEN = r'''
msgid ""
msgstr ""
"Language: vi\n"
"Plural-Forms: nplurals=1; plural=0;\n"
"Content-Type: text/plain; charset=utf-8\n"

msgid "Type a message first."
msgstr "Bạn hãy nhập tin nhắn trước đã."

msgid "That message is {length} characters long; the limit is {limit}. Please shorten it or split it in two."
msgstr "Tin nhắn này dài {length} ký tự. Bạn hãy rút gọn."

msgid "“{label}” is required."
msgstr "Bạn cần trả lời “{nhan}”."

msgid "Next: {topic}"
msgstr "Tiếp theo: {topic"

msgid "{n} topic"
msgid_plural "{n} topics"
msgstr[0] "chủ đề"

msgid "An old message nobody uses"
msgstr "Một câu cũ"
'''

REFERENCE = r'''
msgid ""
msgstr ""
"Plural-Forms: nplurals=2; plural=(n != 1);\n"

msgid "Type a message first."
msgstr ""

msgid "That message is {length} characters long; the limit is {limit}. Please shorten it or split it in two."
msgstr ""

msgid "“{label}” is required."
msgstr ""

msgid "Next: {topic}"
msgstr ""

msgid "{n} topic"
msgid_plural "{n} topics"
msgstr[0] ""
msgstr[1] ""

msgid "Skip this check"
msgstr ""
'''


def test_a_broken_translation_is_caught_message_by_message():
    problems = catalogue_problems(read_catalogue(REFERENCE, "en"), read_catalogue(BROKEN, "vi"))
    text = "\n".join(problems)
    assert "'Type a message first.'" not in text  # the good one passes
    assert "characters long" in text and "{length}" in text  # {limit} dropped
    assert "{nhan}" in text  # a placeholder renamed
    assert "Next: {topic}" in text and "broken braces" in text
    assert "'{n} topic'" in text  # the plural form lost {n}
    assert "'Skip this check': no translation" in text
    assert "'An old message nobody uses': not in the English catalogue" in text
    assert len(problems) == 6


def _entries_with_placeholders():
    return [m for m in ENGLISH if m.id and isinstance(m.id, str) and placeholders(m.id)]


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_dropping_any_placeholder_from_any_translation_is_caught(data):
    """The property behind the completeness test: whichever message and placeholder a
    translator drops, the check names that message."""
    entry = data.draw(st.sampled_from(_entries_with_placeholders()))
    name = data.draw(st.sampled_from(sorted(placeholders(entry.id))))
    translated = VIETNAMESE.get(entry.id, context=entry.context)
    damaged = translated.string.replace("{" + name + "}", "").replace("{" + name + "!r}", "")
    po = read_catalogue(_po_for(entry.id, damaged, entry.context), "vi")
    reference = read_catalogue(_po_for(entry.id, "", entry.context), "en")
    problems = catalogue_problems(reference, po)
    assert len(problems) == 1 and entry.id[:30] in problems[0]


def _po_for(msgid: str, msgstr: str, context: str | None) -> str:
    quote = json.dumps  # a PO string is a C string; JSON escaping is the same for this text
    ctx = f"msgctxt {quote(context, ensure_ascii=False)}\n" if context else ""
    return f'{ctx}msgid {quote(msgid, ensure_ascii=False)}\nmsgstr {quote(msgstr, ensure_ascii=False)}\n'


# ------------------------------------------------------------------ the translator


def test_plurals_follow_each_language():
    en, vi = translator("en"), translator("vi")
    assert en.plural("{n} topic", "{n} topics", 1) == "1 topic"
    assert en.plural("{n} topic", "{n} topics", 3) == "3 topics"
    assert vi.plural("{n} topic", "{n} topics", 1) == "1 chủ đề"
    assert vi.plural("{n} topic", "{n} topics", 3) == "3 chủ đề"


def test_the_browsers_language_is_taken_by_its_order_and_q_values():
    assert preferred_language("vi-VN,vi;q=0.9,en;q=0.8") == "vi"
    assert preferred_language("en-US,en;q=0.9,vi;q=0.8") == "en"
    assert preferred_language("fr-FR,fr;q=0.9,vi;q=0.5,en;q=0.4") == "vi"  # the first one Tutor speaks
    assert preferred_language("en;q=0.2, vi") == "vi"  # by q-value, not position
    assert preferred_language("vi;q=0, en") == "en"  # q=0: not acceptable
    assert preferred_language("de-DE", "vi") == "vi" and preferred_language(None, "vi") == "vi"
    assert preferred_language("*;q=0.5, ;;;q=abc") == "en"  # malformed: the default


def test_numbers_are_written_the_languages_way():
    en, vi = translator("en"), translator("vi")
    assert en.plural("{n:,} call", "{n:,} calls", 4100) == "4,100 calls"
    assert vi.plural("{n:,} call", "{n:,} calls", 4100) == "4.100 lượt gọi"
    assert vi.plural("{n:,} call", "{n:,} calls", 999) == "999 lượt gọi"
    assert vi.plural("{n} topic", "{n} topics", 12_000) == "12.000 chủ đề"  # bare, too
    assert en.plural("{n} topic", "{n} topics", 12_000) == "12000 topics"  # English as it always was


def test_a_region_tag_finds_its_language_and_an_unknown_language_speaks_english():
    assert supported("vi-VN") == "vi" and translator("vi-VN").language == "vi"
    assert supported("fr") == "en" and supported(None) == "en"
    assert translator("fr")("Type a message first.") == "Type a message first."


def test_a_missing_translation_falls_back_to_english():
    vi = translator("vi")
    assert vi("A sentence no catalogue has, {name}.", name="Lan") == "A sentence no catalogue has, Lan."
    partial = _translator('msgid "Continue"\nmsgstr "Tiếp tục"\n')
    assert partial("Continue") == "Tiếp tục"
    assert partial("Next: {topic}", topic="Giấc ngủ") == "Next: Giấc ngủ"


def test_a_translation_that_cannot_be_formatted_shows_english_instead_of_failing():
    broken = _translator('msgid "Next: {topic}"\nmsgstr "Tiếp theo: {chu_de}"\n')
    assert broken("Next: {topic}", topic="Giấc ngủ") == "Next: Giấc ngủ"


def test_a_phrase_is_english_until_it_is_localized():
    phrase = Phrase("That message is {length} characters long; the limit is {limit}. "
                    "Please shorten it or split it in two.", length=5000, limit=4000)
    assert phrase == "That message is 5000 characters long; the limit is 4000. Please shorten it or split it in two."
    assert localize(phrase, "vi") == "Tin nhắn này dài 5.000 ký tự; giới hạn là 4.000. Bạn hãy rút gọn hoặc chia thành hai tin nhắn."
    assert localize(dbfaults.UNAVAILABLE, "vi").startswith("Tutor tạm thời chưa hoạt động")
    assert localize("Text that is not a msgid", "vi") == "Text that is not a msgid"


def test_page_strings_are_a_small_dict_in_the_language():
    en, vi = translator("en").page_strings(), translator("vi").page_strings()
    assert set(en) == set(vi)
    assert all(en[k] == k for k in en)
    assert all(vi[k] for k in vi)


# ------------------------------------------------------------------ modules


def test_the_vietnamese_sample_module_passes_the_check():
    report = check_file(ROOT / "modules" / f"{VI_MODULE}.yaml")
    assert report.ok, report.problems
    module = report.module
    assert module.language == "vi"
    assert len(module.sections) >= 2 and len(module.topics) >= 8
    assert any(t.form is not None for t in module.topics)


def test_a_module_language_without_a_catalogue_is_reported_and_english_is_the_default(tmp_path):
    text = (ROOT / "tests" / "fixtures" / "modules" / "good" / "quick.yaml").read_text(encoding="utf-8")
    french = tmp_path / "quick.yaml"
    french.write_text(text.replace("language: en", "language: fr"), encoding="utf-8")
    report = check_file(french)
    assert not report.ok
    assert any("language 'fr' has no message catalogue" in str(p) for p in report.problems)
    plain = tmp_path / "plain" / "quick.yaml"
    plain.parent.mkdir()
    plain.write_text(text.replace("language: en\n", ""), encoding="utf-8")
    report = check_file(plain)
    assert report.ok, report.problems
    assert report.module.language == "en"


# ------------------------------------------------------------------ the tutor speaks it


@pytest.fixture
def engine(store: Store) -> Engine:
    settings = LLMSettings()
    return Engine(store, make_provider(settings), load_library(), settings)


def _texts(view) -> str:
    content = (view.response or {}).get("content") or {}
    blocks = [b.get("content", "") for b in content.get("text_blocks") or []]
    step = content.get("next_step") or {}
    return "\n".join([*blocks, step.get("prompt") or "", *(step.get("suggestions") or [])])


def test_the_builtin_tutor_speaks_vietnamese_in_a_vietnamese_module(engine):
    view = run(engine.open("lan", VI_MODULE))
    opening = _texts(view.messages[-1])
    assert "Chào mừng bạn! Chúng ta sẽ đi qua 10 chủ đề trong 3 phần" in opening
    assert "Welcome" not in opening
    assert view.messages[-1].response["content"]["next_step"]["suggestions"][-1] == "Tiếp tục"
    check = run(engine.send(view.id, LearnerInput(text="Tiếp tục")))
    reply = _texts(check.reply)
    assert "Trước khi đi tiếp, mình cùng xem bạn còn nhớ gì từ **Vì sao chúng ta cần ngủ** nhé." in reply
    assert "Continue" not in reply and "Skip" not in reply
    # The quick replies the tutor offers in Vietnamese work as replies: skip, then next.
    assert check.reply.response["content"]["next_step"]["suggestions"] == ["Bỏ qua câu hỏi này"]
    skipped = run(engine.send(view.id, LearnerInput(text="Bỏ qua câu hỏi này")))
    reply = _texts(skipped.reply)
    assert reply.startswith("Không sao cả. Lúc khác mình quay lại phần này nhé.\nCác chu kỳ giấc ngủ")
    assert skipped.reply.response["content"]["next_step"]["suggestions"][-1] == "Tiếp theo: Đồng hồ sinh học"
    # A personal share is thanked in Vietnamese, with the module's passage that speaks to it.
    shared = run(engine.send(view.id, LearnerInput(text="Tôi hay uống cà phê buổi chiều")))
    reply = _texts(shared.reply)
    assert reply.startswith("Cảm ơn bạn đã chia sẻ. Phần này của học phần có thể liên quan đến điều bạn kể:")
    assert "**Cà phê, rượu bia và giấc ngủ**" in reply and "Caffeine" in reply


def test_the_english_module_still_speaks_english(engine):
    view = run(engine.open("ann", "understanding_anxiety"))
    assert "Welcome! We'll go through 25 topics in 6 sections" in _texts(view.messages[-1])


def test_an_input_error_reads_in_the_conversations_language(engine):
    view = run(engine.open("lan", VI_MODULE, defer_opening=True))
    with pytest.raises(InputError) as refused:
        run(engine.accept(view.id, LearnerInput(text="   ")))
    assert localize(refused.value.message, "vi") == "Bạn hãy nhập tin nhắn trước đã."
    with pytest.raises(InputError) as refused:
        run(engine.accept(view.id, LearnerInput(text="x" * 5000)))
    assert str(refused.value.message).startswith("That message is 5000 characters long")
    # Numbers written the Vietnamese way, as the page's counter writes them ("5.000 / 4.000").
    assert localize(refused.value.message, "vi").startswith("Tin nhắn này dài 5.000 ký tự; giới hạn là 4.000.")


def test_a_form_error_names_the_field_in_vietnamese(engine):
    view = run(engine.open("lan", VI_MODULE))
    for text in ("Tiếp tục", "Bỏ qua câu hỏi này", "Tiếp theo: Đồng hồ sinh học"):
        run(engine.send(view.id, LearnerInput(text=text)))
    offered = next(m for m in reversed(engine.history(view.id))
                   if m.role == "tutor" and (m.response or {}).get("content", {}).get("forms"))
    form = offered.response["content"]["forms"][0]
    assert form["id"] == "thoi_quen_ngu"
    with pytest.raises(InputError) as refused:
        run(engine.accept(view.id, LearnerInput(form_id="thoi_quen_ngu", answers={"so_gio_ngu": "20"})))
    assert refused.value.field_id == "so_gio_ngu"
    assert localize(refused.value.message, "vi") == (
        "“Trung bình mỗi đêm bạn ngủ được bao nhiêu tiếng?” không được lớn hơn 14.")
    # Answers sent from a Vietnamese page read as the learner's own words, in Vietnamese.
    pending = run(engine.accept(view.id, LearnerInput(form_id="thoi_quen_ngu", answers={"so_gio_ngu": "6"}),
                                language="vi"))
    assert pending.learner.text.splitlines() == [
        "Câu trả lời của mình cho “Thói quen ngủ của bạn”:", "- Trung bình mỗi đêm bạn ngủ được bao nhiêu tiếng? 6"]
    # The built-in tutor says the hours back, in the module's words.
    reply = run(engine.respond(pending)).reply.response
    said = "\n".join(b["content"] for b in reply["content"]["text_blocks"])
    assert "Bạn ngủ khoảng 6 tiếng mỗi đêm, ít hơn mức 7–9 tiếng" in said
    # The page shows the form's range in the same language.
    hours = message_item(offered, "vi").forms[0].fields[1]
    assert hours.range_hint == "Một số từ 0 đến 14."
    assert message_item(offered).forms[0].fields[1].range_hint == "A number from 0 to 14."


def test_the_progress_header_counts_in_the_modules_language(engine):
    view = run(engine.open("lan", VI_MODULE))
    item = progress_item(view.progress, "vi")
    assert item.count_text == "1 trên 10 chủ đề" and item.remaining_text == "còn 9 chủ đề"
    assert item.now_text == "Đang học: Hiểu về giấc ngủ, Giấc ngủ vận hành thế nào"
    assert item.summary == "Đã học 5% học phần: 1 trên 10 chủ đề, nắm vững 0 trên 2"
    english = progress_item(view.progress)
    assert english.count_text == "1 of 10 topics" and english.remaining_text == "9 topics to go"


def test_the_turn_after_a_failing_model_is_in_vietnamese(store):
    with FakeLLMServer("openai") as server:
        settings = settings_for(server)
        eng = Engine(store, make_provider(settings), load_library(), settings)
        view = run(eng.open("lan", VI_MODULE, defer_opening=True))
        server.script(*[error(503)] * 10)
        result = run(eng.respond(run(eng.accept(view.id, LearnerInput(text="Vì sao tôi hay tỉnh giấc lúc 3 giờ sáng?")))))
    text = _texts(result.reply)
    # The module's own lesson turn stands in for the model, under the trouble line (tutor.turns.fallback_lesson).
    assert text.startswith("Gia sư đang gặp trục trặc nên chưa trả lời được")
    assert "builtin_fallback" in result.reply.flags
    assert "Xin lỗi" not in text and "Sorry" not in text and "trouble" not in text


def test_a_check_is_asked_and_judged_in_vietnamese(engine):
    view = run(engine.open("lan", VI_MODULE))
    asked = run(engine.send(view.id, LearnerInput(text="Tiếp tục")))
    [form] = asked.reply.response["content"]["forms"]
    assert form["title"] == "Kiểm tra mức độ hiểu bài" and form["submit_label"] == "Kiểm tra câu trả lời"
    assert form["description"].startswith("Về Vì sao chúng ta cần ngủ. Một hai câu bằng lời của bạn là đủ")
    judged = run(engine.send(view.id, LearnerInput(
        text="Trong lúc ngủ cơ thể hồi phục, còn bộ não sắp xếp và ghi nhớ những gì đã học")))
    score = judged.reply.response["content"]["text_blocks"][0]
    assert score["type"] == "success"
    assert score["content"].startswith("**Bạn được 10/10 ở *Vì sao chúng ta cần ngủ*: đã nắm vững.** Làm tốt lắm! "
                                       "Bạn đã nêu được cơ thể hồi phục, sửa chữa trong lúc ngủ; và bộ não")
    assert "vi_sao_can_ngu" in judged.progress.mastered


def test_usage_limits_and_the_queue_line_read_in_vietnamese():
    """Refusals by a usage limit and the queue line are made in the core, in English, and
    shown in the module's language: the wait ("3 h 12 min") and the place in line too."""
    from tutor.access.usage import LimitReached, UsageLimits, UsageSettings, in_words
    from tutor.llm.gate import queue_line

    limits = UsageLimits(UsageSettings(turns_per_minute=1, daily_tokens=0, conversations_per_day=0))
    run(limits.admit_turn("ada"))
    with pytest.raises(LimitReached) as refused:
        run(limits.admit_turn("ada"))
    assert refused.value.message.startswith("You're sending messages faster than the tutor can keep up")
    said = localize(refused.value.message, "vi")
    assert said.startswith("Bạn đang gửi tin nhắn nhanh hơn mức gia sư kịp trả lời — bạn có thể gửi tiếp sau ")
    assert said.endswith((" giây.", " phút.")) and "min" not in said
    assert localize(in_words(3 * 3600 + 12 * 60), "vi") == "3 giờ 12 phút"
    assert localize(in_words(3 * 3600 + 12 * 60), "en") == "3 h 12 min"
    assert localize(queue_line(1), "vi") == "Nhiều người học đang hỏi cùng lúc — bạn là người tiếp theo…"
    for n in (2, 3, 11, 21):
        assert localize(queue_line(n), "vi") == f"Nhiều người học đang hỏi cùng lúc — bạn đứng thứ {n} trong hàng chờ…"
    assert localize(queue_line(22), "en") == "Many learners are asking at once — you're 22nd in line…"


def test_the_sign_in_pages_errors_read_in_vietnamese():
    from tutor.access.accounts import message_for

    assert message_for("throttled", 3) == "Too many attempts — try again in 3 minutes."
    assert localize(message_for("throttled", 3), "vi") == "Bạn đã thử quá nhiều lần — hãy thử lại sau 3 phút."
    assert localize(message_for("password_short"), "vi") == "Mật khẩu cần có ít nhất 10 ký tự."
    assert localize(message_for("signups", 90), "vi").endswith("sau 1 giờ 30 phút.")


@pytest.mark.parametrize("language", ["en", "vi", "fr"])
def test_no_message_is_no_text_not_the_catalogue_header(language):
    # gettext keeps the catalogue's header under the empty msgid: a page with no error to
    # show (the sign-in page) once showed "Project-Id-Version: ..." in its error box.
    t = translator(language)
    assert t("") == "" and t(Phrase("")) == "" and localize("", language) == ""
    assert t.page("") == ""
