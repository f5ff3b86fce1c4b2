"""What the page is given for teaching: verified quotes with their source, progress with
topics seen and mastered, and citations that survive the reply contract's repairs."""

from __future__ import annotations

import json

from tutor.contract import parse
from tutor.render.display import message_item, module_card, progress_item
from tutor.render.views import ConversationSummary, MessageView, ProgressView


def _tutor(content: dict) -> MessageView:
    response = {"content": content, "meta": {"response_type": "educational"}}
    return MessageView(id=7, seq=1, role="tutor", response=response, raw=json.dumps(response), outcome="valid")


def test_verified_quotes_are_shown_with_source_and_section_as_safe_html():
    item = message_item(_tutor({
        "text_blocks": [{"type": "paragraph", "content": "Here is why."}],
        "citations": [{"source_id": "how_anxiety_works", "quote": "a *racing* heart <script>x</script>",
                       "location": "How the body's alarm system works › Why the sensations feel so convincing"}],
    }))
    [quote] = item.quotes
    assert quote.caption == "How the body's alarm system works › Why the sensations feel so convincing"
    assert "<em>racing</em>" in quote.html and "<script>" not in quote.html
    assert quote.source_id == "how_anxiety_works"
    assert message_item(_tutor({"text_blocks": [{"type": "paragraph", "content": "x"}]})).quotes == []


def test_progress_shows_topics_seen_and_mastered_and_what_is_left():
    view = ProgressView(percentage=10.0, covered=["a", "b", "c"], total=25, milestone=None, milestones=[],
                        module_state={}, mastered=["a", "b"], checked=24, done=2)
    item = progress_item(view)
    assert (item.percent, item.covered, item.mastered, item.checked, item.remaining) == (10, 3, 2, 24, 23)
    assert item.summary == "10% of the module covered: 3 of 25 topics, 2 of 24 mastered"
    assert view.to_json_dict()["mastered"] == ["a", "b"] and not view.complete
    card = module_card("m", "T", "A", 25, view, ConversationSummary(1, "m", "active", 2, ""))
    assert (card.covered, card.mastered) == (3, 2)


def test_a_broken_citation_is_dropped_and_named_the_reply_kept():
    raw = json.dumps({"content": {"text_blocks": [{"type": "paragraph", "content": "Hello"}],
                                  "citations": [{"source_id": "guide", "quote": "Breathe out slowly now"},
                                                {"quote": 42}]},
                      "meta": {"response_type": "educational"}})
    parsed = parse(raw)
    assert parsed.outcome == "repaired" and "dropped_citation" in parsed.flags
    assert [c.quote for c in parsed.response.content.citations] == ["Breathe out slowly now"]
    assert parse(raw.replace(', {"quote": 42}', "")).outcome == "valid"
