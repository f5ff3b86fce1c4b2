"""The reply being written reaches the page as small, new-only slot updates (tutor.turns.live)."""

from __future__ import annotations

import asyncio
import dataclasses
import json

from tests.fakes import wire
from tutor.render.display import block_item, message_item
from tutor.render.views import MessageView
from tutor.turns.live import STREAM_BLOCKS, PagePreview, StreamFeed, fold_buckets, stream_vars

REPLY = {
    "content": {
        "text_blocks": [
            {"type": "heading", "content": "The body's alarm", "level": 2},
            {"type": "paragraph", "content": "Anxiety is the body's **alarm system**. " * 6},
            {"type": "tip", "content": "Breathe in for four counts and out for six. " * 4},
            {"type": "list", "content": "- a racing heart\n- tight chest\n- fast breathing"},
        ],
        "media": [{"type": "image", "src": "/media/understanding_anxiety/alarm.svg", "alt": "An alarm bell"}],
        "next_step": {"prompt": "Shall we go on?", "suggestions": ["Yes, go on", "Tell me more"]},
    },
    "meta": {"response_type": "educational", "emotion": "informative"},
}


class Page:
    """What the browser holds: the slot variables, updated by each delta."""

    def __init__(self):
        self.vars = {name: empty for name, (_, empty) in stream_vars().items()}

    def apply(self, updates):
        self.vars.update(updates)

    def blocks(self):
        return [self.vars[f"stream_block_{i}"] for i in range(STREAM_BLOCKS) if self.vars[f"stream_block_{i}"].type]

    def growing(self):
        start = self.vars["stream_tail_from"]
        return "".join(v for k, v in self.vars.items() if k.startswith("stream_tail_") and k[12:].isdigit()
                       and int(k[12:]) >= start)


def _plain(value):
    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    return [_plain(v) for v in value] if isinstance(value, list) else value


def _size(updates) -> int:
    return len(json.dumps({k: _plain(v) for k, v in updates.items()}))


def stream(raw: str, step: int = 8, tick: float = 0.03, **options):
    now = [0.0]
    feed = StreamFeed(clock=lambda: now[0], **options)
    page, sent, times = Page(), [], []
    for cut in range(step, len(raw) + step, step):
        now[0] += tick
        updates = feed.push(raw[:cut])
        if updates:
            page.apply(updates)
            sent.append(updates)
            times.append(now[0])
    return feed, page, sent, times


def test_the_page_ends_with_every_block_rendered_and_extras_once_complete():
    raw = json.dumps(REPLY)
    feed, page, sent, _ = stream(raw)
    page.apply(feed.push(raw, force=True))
    expected = [block_item(b["type"], b["content"], b.get("level")) for b in REPLY["content"]["text_blocks"]]
    assert page.blocks() == expected
    assert page.vars["stream_type"] == ""
    assert [m.src for m in page.vars["stream_media"]] == ["/media/understanding_anxiety/alarm.svg"]
    assert page.vars["stream_suggestions"] == ["Yes, go on", "Tell me more"]
    # clearing empties exactly what was used: the page is back to empty slots
    page.apply(feed.clear())
    assert page.vars == {name: empty for name, (_, empty) in stream_vars().items()}


def test_a_growing_block_shows_its_text_so_far_and_each_piece_is_sent_once():
    raw = json.dumps(REPLY)
    cut = raw.index("alarm system") + 30
    feed, page, sent, _ = stream(raw[:cut])
    page.apply(feed.push(raw[:cut], force=True))
    assert page.vars["stream_type"] == "paragraph"
    growing = page.growing()
    assert growing and ("Anxiety is the body's alarm system. " * 6).startswith(growing)  # ** dropped while growing
    pieces = [v for u in sent for k, v in u.items() if k.startswith("stream_tail_") and k[12:].isdigit()]
    assert sum(len(p) for p in pieces) <= len(raw)  # no piece of text travels twice


def test_updates_are_throttled_and_carry_little_beyond_the_text():
    raw = json.dumps(REPLY)
    _, _, sent, times = stream(raw, step=4, tick=0.015)  # ~65 tokens/s
    spans = [b - a for a, b in zip(times, times[1:])]
    assert spans and min(spans) >= 0.1 - 1e-9  # at most ten updates a second
    final = _size({"live_0": dataclasses.asdict(message_item(MessageView(1, 1, "tutor", response=REPLY, raw=raw)))})
    # with the final message itself, a streamed turn sends at most three times its size
    assert sum(_size(u) for u in sent) <= 2 * final


def test_a_token_per_event_stream_is_read_about_six_times_a_second(monkeypatch):
    # A real model sends a token or two per event: reading the reply so far on every
    # event, while the characters for the next update gather, cost most of a turn's CPU.
    # Until the first text is shown every event is read (the first words come at once).
    import tutor.turns.live

    reads = []
    monkeypatch.setattr(tutor.turns.live, "preview",
                        lambda raw, memo, read=tutor.turns.live.preview: reads.append(raw) or read(raw, memo))
    raw = json.dumps(REPLY)
    feed, page, sent, times = stream(raw, step=3, tick=0.005)  # 600 characters a second
    events_before = round(times[0] / 0.005)  # events up to the first text shown
    seconds_after = (len(raw) / 3 + 1) * 0.005 - times[0]
    assert len(reads) <= events_before + seconds_after / 0.15 + 2
    page.apply(feed.push(raw, force=True))
    blocks = REPLY["content"]["text_blocks"]
    assert page.blocks() == [block_item(b["type"], b["content"], b.get("level")) for b in blocks]
    # About as many updates as when every event is read (they wait for min_interval anyway).
    _, _, sent_reading_every_event, _ = stream(raw, step=3, tick=0.005, min_look=0)
    assert len(sent) >= 0.8 * len(sent_reading_every_event)


def test_a_slow_model_s_text_grows_on_the_page_at_least_five_times_a_second():
    # ~130 characters a second, a token every 30 ms: each update carries what is new, so
    # the learner sees the paragraph grow, not jump every half second.
    raw = json.dumps({"content": {"text_blocks": [{"type": "paragraph", "content": "Slow and steady words. " * 40}]}})
    _, page, sent, times = stream(raw, step=4, tick=0.03)
    growing = [t for u, t in zip(sent, times) if any(k.startswith("stream_tail_") and k[12:].isdigit() for k in u)]
    gaps = [b - a for a, b in zip(growing, growing[1:])]
    assert len(growing) >= 5 * (times[-1] - times[0]) and max(gaps) <= 0.2 + 1e-9
    assert min(gaps) >= 0.15 - 1e-9  # and never more than about six a second


def test_a_reply_rewritten_midway_starts_its_pieces_over():
    now = [0.0]
    feed = StreamFeed(clock=lambda: now[0], min_interval=0, min_look=0)
    page = Page()
    page.apply(feed.push('{"content": {"text_blocks": [{"type": "paragraph", "content": "Hello wor'))
    page.apply(feed.push('{"content": {"text_blocks": [{"type": "paragraph", "content": "Help'))
    assert page.growing() == "Help"


def test_a_wire_reply_streams_without_error():
    raw = wire.tutor_json("Short and sweet.")
    feed, page, _, _ = stream(raw, step=3)
    page.apply(feed.push(raw, force=True))
    assert [b.type for b in page.blocks()] == ["paragraph"]


class Tab:
    """The chat page's history and turn buckets; records which variables were assigned
    (Reflex re-sends a variable when it is assigned)."""

    def __init__(self, buckets: int):
        object.__setattr__(self, "assigned", [])
        self.history, self.history_forms = ["h1", "h2"], {"1-f": "submitted"}
        for i in range(buckets):
            setattr(self, f"live_{i}", [])
            setattr(self, f"live_forms_{i}", {})
        self.assigned.clear()

    def __setattr__(self, name, value):
        self.assigned.append(name)
        object.__setattr__(self, name, value)

    def shown(self, buckets: int):
        items = list(self.history)
        forms = dict(self.history_forms)
        for i in range(buckets):
            items += getattr(self, f"live_{i}")
            forms.update(getattr(self, f"live_forms_{i}"))
        return items, forms


def test_a_long_session_folds_its_buckets_into_the_history_as_shown():
    tab = Tab(8)
    tab.live_0, tab.live_1, tab.live_3 = ["l1", "t1"], ["l2", "t2"], ["l3", "t3"]
    tab.live_forms_1 = {"5-quick": "skipped"}
    tab.live_forms_3 = {"7-quick": "submitted", "1-f": "submitted"}
    before = tab.shown(8)
    tab.assigned.clear()

    fold_buckets(tab, 8)

    assert tab.shown(8) == before  # the page shows the same messages and form states, in order
    assert tab.history == ["h1", "h2", "l1", "t1", "l2", "t2", "l3", "t3"]
    assert all(not getattr(tab, f"live_{i}") and not getattr(tab, f"live_forms_{i}") for i in range(8))
    # Only what changed is assigned: the history, its forms and the buckets that held something.
    assert sorted(tab.assigned) == sorted(["history", "history_forms", "live_0", "live_1", "live_3",
                                           "live_forms_1", "live_forms_3"])


class PageState:
    """The chat page's state as PagePreview uses it: entered with `async with`, slot
    updates applied, `streaming` shown; `entered` counts how often the state was taken,
    `direct` holds the updates sent without it (`send`, as tutor.web.preview_frames does:
    declined while the page does not show the preview)."""

    def __init__(self, conversation_id: int):
        self.conversation_id, self.streaming, self.stream_status = conversation_id, False, ""
        self.page, self.entered, self.direct = Page(), 0, []
        self.now = 0.0

    async def __aenter__(self):
        self.entered += 1
        return self

    async def __aexit__(self, *exc):
        return False

    def _apply(self, updates):
        self.page.apply(updates)

    def _t(self, text):
        return text

    async def send(self, updates):
        if not self.streaming:
            return False
        self.direct.append(updates)
        self.page.apply(updates)  # what the page receives
        return True

    def preview(self) -> PagePreview:
        preview = PagePreview(self, self.conversation_id, self.send)
        preview.feed.clock = lambda: self.now
        return preview

    async def write(self, preview: PagePreview, raw: str, upto: int) -> None:
        """The model writes `raw` up to `upto`, 8 characters every 30 ms."""
        for cut in range(8, upto + 8, 8):
            self.now += 0.03
            await preview.text(raw[:min(cut, upto)])


def test_after_the_first_update_the_preview_is_sent_without_taking_the_page_state():
    state, raw = PageState(7), json.dumps(REPLY)

    async def run():
        preview = state.preview()
        await state.write(preview, raw, len(raw))
        first = state.entered
        await preview.status("reasking")  # the reply is written again: the page shows a calm line
        assert not state.streaming and not state.page.growing()
        state.now += 1
        await preview.text(raw[:200])
        return first

    entered_while_streaming = asyncio.run(run())
    assert entered_while_streaming == 1 and len(state.direct) > 10  # the first update showed the preview
    assert state.streaming and state.entered == 3  # after the status, the state shows it again


def test_a_page_that_loaded_its_view_again_gets_the_whole_reply_so_far():
    state, raw = PageState(7), json.dumps(REPLY)
    half = len(raw) // 2

    async def run():
        preview = state.preview()
        await state.write(preview, raw, half - 8)
        shown = state.page.blocks(), state.page.growing()
        state.page, state.streaming = Page(), False  # a reconnect: the page's view is loaded again
        state.now += 1
        await preview.text(raw[:half])
        return shown

    blocks, growing = asyncio.run(run())
    assert blocks and growing and state.streaming
    assert state.page.blocks()[:len(blocks)] == blocks and state.page.growing().startswith(growing)
