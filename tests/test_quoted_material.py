"""A quote of the author's material shows as the author wrote it (callouts as callouts,
headings, lists), still inside the quote and with its source; callouts are labelled by
their title or a neutral word for their kind, never "Well done" picked by colour."""

from __future__ import annotations

import json
import re

from tests.llm.test_builtin import SAMPLE, Session
from tutor.contract.authored import callout_runs, markdown_blocks
from tutor.i18n import translator
from tutor.llm.base import PassageData, TeachingContext
from tutor.render.callouts import CALLOUT_LABELS, callout_title, quoted_html
from tutor.render.display import block_item, message_item
from tutor.render.views import MessageView
from tutor.teach.quotes import Citation, module_sources, verify_quote


def _tutor(response: dict) -> MessageView:
    return MessageView(id=3, seq=1, role="tutor", response=response, raw=json.dumps(response), outcome="valid")


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def _mental_level_passage() -> PassageData:
    # The second half of "The mental level": a heading, a quote, a callout, a paragraph.
    content = SAMPLE.topic("mental_level").content
    text = content[content.index("## Thoughts are guesses"):]
    return PassageData("module", SAMPLE.title, "mental_level", "The mental level", "mental_level", text, 1.0)


def _answer(language: str | None = None):
    session = Session(SAMPLE)
    session.send()
    turn = session.say("Why shouldn't I trust anxious thoughts?",
                       TeachingContext(intent="question", passages=(_mental_level_passage(),)))
    view = _tutor(turn.response.model_dump(mode="json", exclude_none=True))
    return turn.response, message_item(view, language)


def test_a_quoted_passage_shows_its_callout_heading_and_quote_as_written_inside_the_quote():
    response, item = _answer()
    kinds = [b.type for b in item.blocks]
    assert kinds == ["paragraph", "quote", "paragraph"]
    quote = item.blocks[1].html
    assert "!!!" not in quote and "##" not in _text(quote)  # no raw markup for the learner
    callout = re.search(r'<div class="quote-callout quote-tip" role="note" aria-label="Tip">'
                        r'<p class="callout-label">Tip</p>(.*?)</div>', quote, re.DOTALL)
    assert callout and "I&#x27;m having the thought that" in callout.group(1).replace("'", "&#x27;")
    assert "<h2>Thoughts are guesses, not facts</h2>" in quote
    assert "<blockquote>" in quote and "doesn&#x27;t make it true" in quote.replace("'", "&#x27;")
    # still clearly a quote from the named source
    assert "part of the topic <strong>The mental level</strong>" in item.blocks[2].html
    # and the stored reply keeps the author's text verbatim
    assert response.content.text_blocks[1].content == _mental_level_passage().text.strip()


def test_a_quoted_callout_is_labelled_in_the_replys_language():
    _, item = _answer("vi")
    assert '<p class="callout-label">Mẹo</p>' in item.blocks[1].html


def test_a_quoted_list_stays_a_list():
    html = quoted_html("You might notice:\n- racing thoughts\n- expecting the worst\n\n!!! info Not a diagnosis.")
    assert html.count("<li>") == 2 and '<p class="callout-label">Info</p>' in html


def test_model_citations_of_a_callout_show_it_as_a_callout_and_still_verify_verbatim():
    sources = module_sources(SAMPLE)
    words = ("!!! tip Try noticing thoughts with the phrase \"I'm having the thought that…\", as in "
             "\"I'm having the thought that I'll embarrass myself.\"")
    verified = verify_quote(sources, Citation(source_id="module", quote=words, location="mental_level"))
    assert verified is not None and verified.quote.startswith("!!! tip")
    changed = verify_quote(sources, Citation(source_id="module", quote=words.replace("noticing", "spotting")))
    assert changed is None  # the check is as strict as before
    item = message_item(_tutor({"content": {"text_blocks": [{"type": "paragraph", "content": "See:"}],
                                            "citations": [{"source_id": "module", "quote": verified.quote}]},
                                "meta": {"response_type": "educational"}}))
    assert '<p class="callout-label">Tip</p>' in item.quotes[0].html and "!!!" not in item.quotes[0].html


def test_hostile_markup_in_a_quoted_callout_stays_text():
    html = quoted_html('!!! warning "<b onclick=x>" <script>alert(1)</script> [x](javascript:alert(1))')
    assert "<script>" not in html and "<b " not in html and "href" not in html
    assert "&lt;script&gt;" in html and "&lt;b onclick=x&gt;" in html


# --- callout labels ----------------------------------------------------------------------------


def test_an_authored_success_callout_is_not_labelled_well_done():
    blocks = [b for t in SAMPLE.topics for b in markdown_blocks(t.content or "") if b.type == "success"]
    assert blocks[0].content.startswith("Anxiety problems are among the most treatable")
    assert block_item(blocks[0].type, blocks[0].content).label == ""  # no title: the kind's neutral word
    neutral = CALLOUT_LABELS["success"]
    assert (translator("en").page(neutral), translator("vi").page(neutral)) == ("Good news", "Tin vui")
    html = quoted_html("!!! success Anxiety problems are among the most treatable.")
    assert '<p class="callout-label">Good news</p>' in html and "Well done" not in html


def test_an_authors_title_labels_the_callout():
    [block] = markdown_blocks('!!! success "Worth knowing" Anxiety problems are among the most treatable.')
    assert (block.type, block.content) == ("success", "**Worth knowing:** Anxiety problems are among the most treatable.")
    item = block_item(block.type, block.content)
    assert item.label == "Worth knowing" and _text(item.html) == "Anxiety problems are among the most treatable."
    assert '<p class="callout-label">Try this</p>' in quoted_html(
        '!!! tip "Try this" Breathe out slowly.')


def test_a_model_callouts_bold_lead_in_is_its_label_but_a_bold_sentence_is_not():
    assert callout_title("**Remember:** slow breathing helps.") == ("Remember", "slow breathing helps.")
    assert callout_title("**Remember**: slow breathing helps.") == ("Remember", "slow breathing helps.")
    score = "**You scored 8/10 on *The physical level*: mastered.** You covered the alarm."
    assert callout_title(score) == ("", score)
    assert block_item("success", score).label == ""


def test_a_callout_that_is_only_a_quoted_sentence_keeps_it_as_its_text():
    [block] = markdown_blocks('!!! tip "Is this about now, or about what might happen?"')
    assert block.content == '"Is this about now, or about what might happen?"'
    assert callout_runs('Text.\n\n!!! tip "Only this."') == [(None, "Text."), ("tip", '"Only this."')]
