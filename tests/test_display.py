"""What the page is given for a message: safe HTML, forms with their state, media with a
text fallback, progress in the learner's terms."""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tutor.contract import Form, parse
from tutor.render.display import (
    FALLBACK_CHARS,
    FALLBACK_SLACK,
    INVALID_NOTICE,
    MEDIA_UNAVAILABLE,
    WITHHELD_MEDIA,
    FormState,
    closed_forms,
    form_item,
    form_values,
    message_item,
    module_card,
    progress_item,
    split_fallback,
)
from tutor.render.forms import FormInputError, validate_answers
from tutor.render.views import ConversationSummary, MessageView, ProgressView

FORM = {
    "id": "check_in",
    "title": "Check in",
    "fields": [
        {"id": "mood", "type": "radio", "label": "Mood", "required": True,
         "options": [{"value": "calm", "label": "Calm"}, {"value": "tense", "label": "Tense"}]},
        {"id": "signs", "type": "checkbox", "label": "Signs:",
         "options": [{"value": "heart", "label": "Racing heart"}, {"value": "sweat", "label": "Sweating"}]},
        {"id": "level", "type": "number", "label": "How strong?", "min": 0, "max": 10, "help_text": "0 is none."},
        {"id": "note", "type": "text", "label": "Note", "placeholder": "optional"},
    ],
}


def tutor(response: dict[str, Any] | None, *, raw: str = "", flags: list[str] | None = None,
          form_states: dict | None = None, id: int = 7) -> MessageView:
    return MessageView(id=id, seq=1, role="tutor", response=response, raw=raw or json.dumps(response),
                       outcome="valid" if response else "invalid", flags=flags or [],
                       form_states=form_states or {})


def reply(blocks: list[dict], **content: Any) -> dict[str, Any]:
    return {"content": {"text_blocks": blocks, **content}, "meta": {"response_type": "educational"}}


def test_every_block_type_keeps_its_type_and_headings_their_level():
    kinds = ["paragraph", "heading", "list", "quote", "info", "warning", "success", "tip"]
    item = message_item(tutor(reply([{"type": k, "content": f"**{k}**"} for k in kinds])))
    assert [b.type for b in item.blocks] == kinds
    assert item.blocks[0].html == "<p><strong>paragraph</strong></p>\n"
    assert item.blocks[1].html == "<strong>heading</strong>" and item.blocks[1].level == 2  # no level: h2
    levels = [message_item(tutor(reply([{"type": "heading", "content": "H", "level": n}]))).blocks[0].level
              for n in range(1, 7)]
    assert levels == [1, 2, 3, 4, 5, 6]


def test_lists_render_as_markdown_lists():
    item = message_item(tutor(reply([{"type": "list", "content": "1. one\n2. two"},
                                     {"type": "list", "content": "- a\n- b"}])))
    assert "<ol>" in item.blocks[0].html and "<ul>" in item.blocks[1].html


def test_model_markup_is_inert_everywhere_it_is_rendered():
    hostile = '<script>alert(1)</script> <img src=x onerror="alert(2)"> [go](javascript:alert(3))'
    item = message_item(tutor(reply(
        [{"type": t, "content": hostile} for t in ("paragraph", "heading", "tip")],
        next_step={"prompt": hostile, "suggestions": [hostile]},
    )))
    for html in [b.html for b in item.blocks] + [item.prompt]:
        assert "<script" not in html and "<img" not in html and "href=" not in html
        assert "&lt;script&gt;" in html
    assert item.suggestions == [hostile]  # printed as text by the page, never as HTML


def test_an_invalid_reply_is_shown_as_escaped_markdown_with_a_notice():
    item = message_item(tutor(None, raw="Here is **bold** <b>raw</b>"))
    assert item.notice == INVALID_NOTICE
    assert "<strong>bold</strong>" in item.html and "&lt;b&gt;raw&lt;/b&gt;" in item.html
    assert item.blocks == []


def _words(html: str) -> list[str]:
    return re.sub(r"<[^>]+>", " ", html).split()


JUNK_WORDS = [f"w{i}" + "x" * (i % 7) for i in range(1000)]


def test_a_long_invalid_reply_shows_its_start_and_keeps_the_rest_behind_show_more():
    raw = "\n\n".join(" ".join(JUNK_WORDS[i:i + 25]) for i in range(0, 1000, 25))
    assert len(raw) >= 5000
    item = message_item(tutor(None, raw=raw))
    shown, rest = split_fallback(raw)
    assert len(shown) <= FALLBACK_CHARS and shown.endswith("\n\n")  # cut at a paragraph
    assert item.html.count("<p>") == shown.count("\n\n") and item.more_html.startswith("<p>")
    assert _words(item.html) + _words(item.more_html) == raw.split()  # nothing lost, in order


def test_a_junk_reply_without_line_breaks_is_cut_between_words():
    raw = " ".join(JUNK_WORDS)
    item = message_item(tutor(None, raw=raw))
    assert len(_words(item.html)) < 300 and len(" ".join(_words(item.html))) <= FALLBACK_CHARS
    assert _words(item.html) + _words(item.more_html) == JUNK_WORDS


def test_a_run_without_spaces_is_cut_at_the_cap_and_nothing_is_lost():
    raw = "{" + "a" * 6000
    shown, rest = split_fallback(raw)
    assert len(shown) == FALLBACK_CHARS and shown + rest == raw


def test_a_cut_inside_a_code_fence_closes_it_and_reopens_it_in_the_rest():
    raw = "Here:\n\n```python\n" + "\n".join(f"x{i} = {i}" for i in range(600)) + "\n```\nDone."
    item = message_item(tutor(None, raw=raw))
    assert item.html.count("<pre>") == 1 and item.html.rstrip().endswith("</code></pre>")
    assert item.more_html.startswith('<pre><code class="language-python">') and "Done." in item.more_html
    joined = " ".join(_words(item.html) + _words(item.more_html))
    assert all(f"x{i} = {i}" in joined for i in range(600))


def test_a_cut_inside_a_table_repeats_its_header_in_the_rest():
    rows = "\n".join(f"| {i} | {'word ' * 5}|" for i in range(120))
    raw = "Intro text.\n\n| n | words |\n|---|---|\n" + rows + "\n\nAfter the table."
    item = message_item(tutor(None, raw=raw))
    assert item.html.count("<table>") == 1 and item.html.rstrip().endswith("</table>")
    assert item.more_html.startswith("<table>") and "<th>words</th>" in item.more_html
    shown_rows = item.html.count("<tr>") - 1  # less the header
    assert shown_rows + item.more_html.count("<tr>") - 1 == 120 and "After the table." in item.more_html


def test_a_reply_near_the_cap_is_shown_whole():
    raw = "word " * ((FALLBACK_CHARS + FALLBACK_SLACK) // 5)
    item = message_item(tutor(None, raw=raw))
    assert item.more_html == "" and _words(item.html) == raw.split()


@given(st.text(alphabet=st.sampled_from(list("ab `*#|-\n~")), max_size=4000))
def test_split_loses_nothing_and_shows_at_most_the_cap(raw):
    shown, rest = split_fallback(raw)
    if not rest:
        assert shown == raw and len(raw) <= FALLBACK_CHARS + FALLBACK_SLACK
        return
    assert len(shown) <= FALLBACK_CHARS + 8  # a closing fence may be added
    kept = iter("".join((shown + rest).split()))
    assert all(c in kept for c in "".join(raw.split()))  # every character, in order


def test_learner_text_is_markdown_but_never_markup():
    item = message_item(MessageView(id=3, seq=0, role="learner", text="<i>hi</i> *there*"))
    assert item.role == "learner" and "&lt;i&gt;" in item.html and "<em>there</em>" in item.html


def test_media_keep_alt_and_caption_and_a_refused_source_keeps_only_its_words():
    media = [
        {"type": "image", "src": "/media/a.svg", "alt": "A diagram", "caption": "Levels"},
        {"type": "video", "src": "https://example.org/v.mp4", "caption": "A talk"},
        {"type": "audio", "src": "javascript:alert(1)", "alt": "Breathing exercise"},
    ]
    item = message_item(tutor(reply([{"type": "paragraph", "content": "x"}], media=media)))
    image, video, audio = item.media
    assert (image.src, image.alt, image.caption, image.fallback, image.refused) == (
        "/media/a.svg", "A diagram", "Levels", "A diagram", False)
    assert video.type == "video" and video.label == "A talk" and video.fallback == MEDIA_UNAVAILABLE
    assert audio.refused and audio.src == "" and audio.fallback == "Breathing exercise"


def test_media_the_contract_left_out_for_an_unsafe_source_show_up_as_text():
    raw = json.dumps(reply([{"type": "paragraph", "content": "See below."}], media=[
        {"type": "image", "src": "javascript:alert(1)", "alt": "The worry curve", "caption": "Rises, then falls"},
        {"type": "image", "src": "/media/ok.svg", "alt": "fine"},
    ]))
    parsed = parse(raw)
    assert "unsafe_media" in parsed.flags
    item = message_item(tutor(parsed.response.to_json_dict(), raw=raw, flags=parsed.flags))
    assert [(m.refused, m.fallback) for m in item.media] == [(False, "fine"), (True, "The worry curve")]
    assert item.media[1].caption == "Rises, then falls" and item.media[1].src == ""
    unreadable = message_item(tutor(parsed.response.to_json_dict(), raw="not json {", flags=["unsafe_media"]))
    assert unreadable.media[-1].fallback == WITHHELD_MEDIA


def test_form_fields_carry_what_the_browser_checks_and_unique_ids():
    item = form_item(12, Form.model_validate(FORM), index=1)
    assert item.key == "12-check_in" and item.dom_key == "m12f1"
    assert item.submit_label == "Submit" and item.optional and item.has_required
    mood, signs, level, note = item.fields
    assert mood.required and [o.dom_id for o in mood.options] == ["m12f1-0-0", "m12f1-0-1"]
    assert level.min == "0" and level.max == "10" and level.range_hint == "A number from 0 to 10."
    assert level.described_by == "m12f1-2-help m12f1-2-error m12f1-2-check"
    assert note.placeholder == "optional" and note.described_by == "m12f1-3-error m12f1-3-check"
    assert len({f.dom_id for f in item.fields}) == 4


def test_a_form_shows_the_status_it_was_stored_with():
    response = reply([{"type": "paragraph", "content": "x"}], forms=[FORM, {**FORM, "id": "other"}])
    states = {"check_in": {"status": "submitted", "answers": {"mood": "calm", "signs": ["heart", "sweat"], "level": 3}},
              "other": {"status": "skipped"}}
    item = message_item(tutor(response, form_states=states))
    answered, skipped = item.forms
    assert answered.status == "submitted"
    assert answered.answers == ["Mood: Calm", "Signs: Racing heart, Sweating", "How strong? 3"]
    assert skipped.status == "skipped" and skipped.answers == []
    assert closed_forms(tutor(response, form_states=states)) == {
        "7-check_in": FormState("submitted", answered.answers), "7-other": FormState("skipped")}
    assert message_item(tutor(response)).forms[0].status == "open"


def test_browser_entries_become_answers_and_tampering_reaches_the_server_check():
    form = Form.model_validate(FORM)
    values = form_values(form, [("mood", "calm"), ("signs", "heart"), ("signs", "sweat"), ("level", "4"), ("note", "")])
    assert validate_answers(form, values) == {"mood": "calm", "signs": ["heart", "sweat"], "level": 4}
    for entries, field in [([("mood", "angry")], "mood"), ([("mood", "calm"), ("signs", "hacked")], "signs"),
                           ([("mood", "calm"), ("admin", "1")], "admin")]:
        try:
            validate_answers(form, form_values(form, entries))
        except FormInputError as exc:
            assert exc.field_id == field
        else:
            raise AssertionError(f"{entries} was accepted")


def test_progress_is_shown_in_whole_percent_with_counts_and_place():
    view = ProgressView(percentage=99.6, covered=["a"] * 24, total=25, milestone=None, milestones=[],
                        module_state={"current_phase": "Skills", "current_section": "Breathing",
                                      "sections_completed": 5, "total_sections": 6})
    item = progress_item(view)
    assert (item.percent, item.covered, item.remaining, item.phase, item.section) == (99, 24, 1, "Skills", "Breathing")
    assert (item.sections_completed, item.total_sections) == (5, 6)
    assert item.summary == "99% of the module covered: 24 of 25 topics"


@given(st.text(max_size=200))
def test_no_text_in_any_slot_becomes_markup(text):
    item = message_item(tutor(reply([{"type": "heading", "content": text}, {"type": "quote", "content": text}],
                                    next_step={"prompt": text})))
    for html in [b.html for b in item.blocks] + [item.prompt]:
        lowered = html.lower()
        assert "<script" not in lowered and " onerror=" not in lowered and 'href="javascript:' not in lowered


def test_a_module_card_says_whether_and_how_far_the_learner_got():
    fresh = module_card("m", "Title", "About", 25, None, None)
    assert (fresh.started, fresh.percent, fresh.activity) == (False, 0, "")
    progress = ProgressView(percentage=12.0, covered=["a", "b", "c"], total=25, milestone=None, milestones=[],
                            module_state={})
    one = module_card("m", "Title", "About", 25, progress, ConversationSummary(1, "m", "active", 1, ""))
    assert (one.started, one.percent, one.covered, one.activity) == (True, 12, 3, "1 message sent")
    assert module_card("m", "T", "A", 25, None, ConversationSummary(1, "m", "active", 0, "")).started
    assert module_card("m", "T", "A", 25, progress, ConversationSummary(1, "m", "active", 4, "")).activity == (
        "4 messages sent")


def test_a_reply_cut_short_says_so_under_what_arrived_and_offers_a_way_on():
    from tutor.render.display import message_item
    from tutor.render.views import MessageView

    kept = {"content": {"text_blocks": [{"type": "paragraph", "content": "Anxiety is the body's alarm, eve"}]},
            "meta": {"response_type": "conversational"}}
    for flag, words in (("stopped", "Stopped"), ("deadline", "took too long"), ("interrupted", "connection")):
        item = message_item(MessageView(id=1, seq=2, role="tutor", response=kept, outcome="repaired",
                                        flags=["partial", flag]))
        assert words in item.cut_note and item.suggestions == ["Continue"]
    vi = message_item(MessageView(id=1, seq=2, role="tutor", response=kept, outcome="repaired", flags=["stopped"]),
                      "vi")
    assert vi.cut_note.startswith("Đã dừng") and vi.suggestions == ["Tiếp tục"]
    # The reply's own quick replies stay; a whole reply carries no note.
    with_chips = {**kept, "content": {**kept["content"], "next_step": {"suggestions": ["Tell me more"]}}}
    item = message_item(MessageView(id=1, seq=2, role="tutor", response=with_chips, outcome="valid", flags=["stopped"]))
    assert item.suggestions == ["Tell me more"] and item.cut_note
    whole = message_item(MessageView(id=1, seq=2, role="tutor", response=kept, outcome="valid", flags=[]))
    assert whole.cut_note == "" and whole.suggestions == []
    # Nothing had arrived: the apology says so itself, with no second note.
    apology = message_item(MessageView(id=1, seq=2, role="tutor", response=kept, outcome="invalid", flags=["stopped"]))
    assert apology.cut_note == ""
