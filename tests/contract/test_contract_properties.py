"""Properties of the ladder over generated replies.

- a valid reply is returned as written (outcome valid, nothing changed);
- whatever is done to a valid reply's text (deletions, junk, truncation, wrapping), parse
  never raises and never shows the learner a string the raw text does not contain.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.contract.checks import invented_strings
from tutor.contract import (
    BLOCK_TYPES,
    EMOTIONS,
    MILESTONES,
    RESPONSE_TYPES,
    TutorResponse,
    parse,
)

TEXT = st.text(max_size=40)
# Words to show: at least one character that is not a space (a paragraph of spaces alone
# shows nothing, and such a reply is rightly invalid: tutor.contract.parsing.has_content).
WORDS = st.text(alphabet=st.characters(categories=("L", "N", "Zs", "P", "So")), min_size=1,
                max_size=60).filter(str.strip)
SNAKE = st.from_regex(r"\A[a-z][a-z0-9_]{0,12}\Z")


def _optional(**fields):
    return st.fixed_dictionaries({}, optional=fields)


@st.composite
def blocks(draw):
    btype = draw(st.sampled_from(BLOCK_TYPES))
    block = {"type": btype, "content": draw(TEXT)}
    if btype == "heading" and draw(st.booleans()):
        block["level"] = draw(st.integers(1, 6))
    return block


@st.composite
def fields(draw, field_id):
    ftype = draw(st.sampled_from(["radio", "checkbox", "select", "text", "textarea", "number"]))
    field = {"id": field_id, "type": ftype, "label": draw(TEXT)}
    field.update(draw(_optional(required=st.booleans(), placeholder=TEXT, help_text=TEXT)))
    if ftype in ("radio", "checkbox", "select"):
        field["options"] = draw(
            st.lists(st.fixed_dictionaries({"value": TEXT, "label": TEXT}), min_size=1, max_size=4)
        )
    if ftype == "number" and draw(st.booleans()):
        low = draw(st.integers(-100, 100))
        field["min"], field["max"] = low, low + draw(st.integers(0, 100))
    return field


@st.composite
def forms(draw):
    ids = draw(st.lists(SNAKE, min_size=1, max_size=3, unique=True))
    form = {"id": draw(SNAKE), "fields": [draw(fields(fid)) for fid in ids]}
    form.update(draw(_optional(title=TEXT, description=TEXT, submit_label=TEXT, optional=st.booleans())))
    return form


MEDIA = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["image", "video", "audio"]),
        "src": st.one_of(
            st.builds(lambda p: f"https://example.org/{p}", st.from_regex(r"\A[a-z0-9_/]{0,20}\Z")),
            st.builds(lambda p: f"/media/{p}.svg", st.from_regex(r"\A[a-z0-9_]{1,12}\Z")),
        ),
    },
    optional={"alt": TEXT, "caption": TEXT},
)
NEXT_STEP = _optional(prompt=TEXT, suggestions=st.lists(TEXT, max_size=4), can_skip=st.booleans())
PROGRESS = _optional(
    percentage=st.one_of(st.integers(0, 100), st.floats(0, 100, allow_nan=False)),
    covered_topics=st.lists(TEXT, max_size=3),
    newly_covered=st.lists(TEXT, max_size=3),
    remaining_topics=st.integers(0, 50),
    milestone=st.one_of(st.none(), st.sampled_from(MILESTONES)),
)
MODULE_STATE = _optional(
    current_phase=TEXT, current_section=TEXT,
    sections_completed=st.integers(0, 10), total_sections=st.integers(0, 10),
)


@st.composite
def replies(draw):
    """A schema-valid reply with something to show (one block of real words)."""
    text_blocks = draw(st.lists(blocks(), max_size=4))
    text_blocks.insert(draw(st.integers(0, len(text_blocks))), {"type": "paragraph", "content": draw(WORDS)})
    content = {"text_blocks": text_blocks}
    content.update(draw(_optional(forms=st.lists(forms(), max_size=2), media=st.lists(MEDIA, max_size=2),
                                  next_step=NEXT_STEP)))
    meta = {"response_type": draw(st.sampled_from(RESPONSE_TYPES))}
    meta.update(draw(_optional(progress=PROGRESS, module_state=MODULE_STATE, emotion=st.sampled_from(EMOTIONS))))
    return {"content": content, "meta": meta}


def dumps(draw, reply) -> str:
    return json.dumps(reply, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 2])))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_valid_replies_round_trip_unchanged(data):
    reply = data.draw(replies())
    raw = dumps(data.draw, reply)
    TutorResponse.model_validate(reply)  # the strategy itself must produce schema-valid replies
    parsed = parse(raw)
    assert parsed.outcome == "valid", parsed.errors
    assert parsed.flags == []
    assert parsed.response.to_json_dict() == reply


JUNK = st.sampled_from(list('"{}[],:\\`\'\n “”x0') + ["```", "//", "/*", "True", "None", "\u200b", "<think>"])


@st.composite
def corrupted(draw):
    raw = dumps(draw, draw(replies()))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["delete", "insert", "truncate", "fence", "prose", "think"]))
        if op == "delete" and raw:
            start = draw(st.integers(0, len(raw) - 1))
            raw = raw[:start] + raw[start + draw(st.integers(1, 8)):]
        elif op == "insert":
            at = draw(st.integers(0, len(raw)))
            raw = raw[:at] + draw(JUNK) + raw[at:]
        elif op == "truncate" and raw:
            raw = raw[: draw(st.integers(0, len(raw)))]
        elif op == "fence":
            raw = f"```json\n{raw}\n```"
        elif op == "prose":
            raw = f"Here is my answer {{as JSON}}:\n{raw}\nHope it helps!"
        elif op == "think":
            raw = f"<think>{draw(TEXT)}</think>{raw}"
    return raw


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corrupted(), st.sampled_from([None, "stop", "length"]))
def test_corruption_never_raises_and_never_invents_text(raw, finish_reason):
    parsed = parse(raw, finish_reason=finish_reason)
    assert parsed.raw == raw
    assert parsed.outcome in ("valid", "repaired", "invalid")
    if parsed.outcome == "invalid":
        assert parsed.response is None and "invalid_json" in parsed.flags
        return
    assert invented_strings(parsed) == []
    content = parsed.response.content
    assert content.forms or any(block.content.strip() for block in content.text_blocks)
    json.dumps(parsed.to_json_dict(), ensure_ascii=False).encode("utf-8")  # storable as UTF-8


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_never_raises(raw):
    parsed = parse(raw)
    if parsed.response is not None:
        assert invented_strings(parsed) == []
