"""The safety screen in a real turn: every learner message is screened before anything else
happens to it; a risk is answered at once with the author's reply, stored with its flags
and evidence (offsets + SHA-256), and listed for review. Real SQLite, the built-in tutor,
and a loopback OpenAI-compatible server for the model backend and the model screen."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
from contextlib import redirect_stdout

import pytest
from sqlmodel import select

from tests.fakes.servers import FakeLLMServer, settings_for
from tests.fakes.wire import openai_reply, tutor_json
from tutor.cli import main as cli
from tutor.content.modules import load_library
from tutor.llm.base import LearnerInput
from tutor.llm.config import ConfigError, LLMSettings
from tutor.llm.factory import make_provider
from tutor.render.display import message_item
from tutor.risk.turn import SafetySettings
from tutor.storage.store import AuditEvent, CheckAttempt, Message, RiskEvent, Store
from tutor.turns.engine import Engine

MODULE = "understanding_anxiety"


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def engine(store: Store) -> Engine:
    settings = LLMSettings()
    return Engine(store, make_provider(settings), load_library(), settings)


def model_engine(store: Store, server: FakeLLMServer, screen: bool = False) -> Engine:
    settings = settings_for(server)
    return Engine(store, make_provider(settings), load_library(), settings, SafetySettings(model_screen=screen))


def reply_texts(response: dict) -> list[str]:
    return [b["content"] for b in response["content"]["text_blocks"]]


def authored(label: str, language: str = "en") -> list[str]:
    config = load_library().safety_for(MODULE)
    return [b.content for b in config.reply_for(label, language)]


def risk_rows(store: Store) -> list[RiskEvent]:
    with store.session() as s:
        return list(s.exec(select(RiskEvent).order_by("id")))


def test_a_crisis_message_gets_the_authors_reply_at_once_with_flags_and_evidence(engine, store):
    view = run(engine.open("ann", MODULE))
    before = view.progress.covered
    text = "Honestly some days I want to kill myself"
    result = run(engine.send(view.id, LearnerInput(text=text)))

    assert result.learner.text == text  # stored as written, first
    assert reply_texts(result.reply.response) == authored("self_harm")
    assert "risk:self_harm" in result.reply.flags
    assert result.progress.covered == before and result.progress.milestone is None
    [risk] = risk_rows(store)  # one flag for the label, naming the layers that saw it
    assert risk.source in ("offline", "offline+semantic") and risk.severity in ("imminent", "serious")
    assert (risk.label, risk.message_id, risk.reply_id) == ("self_harm", result.learner.id, result.reply.id)
    evidence = next(e for e in risk.evidence if "kill myself" in text[e["start"]:e["end"]])
    snippet = text[evidence["start"]:evidence["end"]]
    assert "kill myself" in snippet
    assert evidence["sha256"] == hashlib.sha256(snippet.encode()).hexdigest()
    assert text not in risk.evidence_json  # offsets and hashes, not a copy of the words
    assert result.risks and result.risks[0]["label"] == "self_harm"

    # The conversation stays open: the next message is a normal lesson turn.
    after = run(engine.send(view.id, LearnerInput(text="I'm safe now. Tell me about breathing")))
    assert not any(f.startswith("risk:") for f in after.reply.flags)
    assert reply_texts(after.reply.response) != authored("self_harm")


def test_idioms_and_questions_about_the_topic_are_ordinary_turns(engine, store):
    view = run(engine.open("ben", MODULE))
    for text in ("This lesson is killing me, in a good way", "Why do panic attacks feel like dying?"):
        result = run(engine.send(view.id, LearnerInput(text=text)))
        assert not any(f.startswith("risk:") for f in result.reply.flags), text
    assert risk_rows(store) == []


def test_vietnamese_is_answered_in_vietnamese(engine, store):
    view = run(engine.open("chi", MODULE))
    result = run(engine.send(view.id, LearnerInput(text="dạo này tôi không muốn sống nữa")))
    assert "risk:self_harm" in result.reply.flags
    shown = reply_texts(result.reply.response)
    # The author's words; the callout labelled in Vietnamese, not the English page's "Warning".
    assert [text.removeprefix("**Lưu ý:** ") for text in shown] == authored("self_harm", "vi")
    [warning] = [b for b in message_item(result.reply, "en").blocks if b.type == "warning"]
    assert warning.label == "Lưu ý" and "115" in warning.html


def test_a_free_text_form_answer_is_screened_with_evidence_in_that_field(engine, store):
    view = run(engine.open("dan", MODULE))
    form = None
    for _ in range(40):
        last = engine.history(view.id)[-1]
        forms = (last.response or {}).get("content", {}).get("forms") or []
        form = next((f for f in forms if any(x["type"] in ("text", "textarea") for x in f["fields"])), None)
        if form is not None:
            break
        run(engine.send(view.id, LearnerInput(text="Continue")))
    assert form is not None, "the sample module offers a form with a free-text field"
    answers = {}
    for f in form["fields"]:
        if f["type"] in ("text", "textarea"):
            answers[f["id"]] = "I have pills saved up and I plan to take them all"
        elif f["type"] in ("radio", "select"):
            answers[f["id"]] = f["options"][0]["value"]
        elif f["type"] == "checkbox":
            answers[f["id"]] = [f["options"][0]["value"]]
        elif f["type"] == "number":
            answers[f["id"]] = f.get("min", 0) or 0
    result = run(engine.send(view.id, LearnerInput(form_id=form["id"], answers=answers)))
    assert "risk:self_harm" in result.reply.flags
    risk = risk_rows(store)[0]
    evidence = risk.evidence[0]
    value = answers[evidence["field"]]
    assert hashlib.sha256(value[evidence["start"]:evidence["end"]].encode()).hexdigest() == evidence["sha256"]


def test_with_a_model_backend_a_risk_needs_no_model_call(store):
    with FakeLLMServer("openai") as server:
        server.default = lambda request: openai_reply(tutor_json())
        engine = model_engine(store, server)
        view = run(engine.open("eve", MODULE))
        calls = len(server.requests)
        result = run(engine.send(view.id, LearnerInput(text="I don't want to be alive anymore")))
        assert len(server.requests) == calls  # the author's reply, not the model's
        assert reply_texts(result.reply.response) == authored("self_harm")


def _classify(*flags: dict) -> str:
    return json.dumps({"risk_flags": list(flags)})


def _screen_requests(server: FakeLLMServer, start: int = 0) -> list[dict]:
    return [r.json for r in server.requests[start:] if "risk_flags" in r.json["messages"][0]["content"]]


def _screen_or_tutor(screen_reply):
    """A server answering the screen's calls with `screen_reply` and the tutor's with a lesson."""
    def answer(request):
        if "risk_flags" in request.json["messages"][0]["content"]:
            return screen_reply(request)
        return openai_reply(tutor_json("Box breathing is four counts each way."))
    return answer


def test_the_model_screen_adds_flags_with_verbatim_evidence_only_and_its_flag_replaces_the_lesson(store):
    # Structure, not judgement: the offline screen lets this through, the scripted model flags it.
    text = "What is box breathing, and when do I use it?"
    with FakeLLMServer("openai") as server:
        engine = model_engine(store, server, screen=True)
        server.default = _screen_or_tutor(lambda request: openai_reply(_classify(
            {"label": "self_harm", "confidence": 0.8, "evidence_snippets": ["box breathing", "not there"]},
            {"label": "made_up_label", "confidence": 0.9, "evidence_snippets": ["What"]},
        )))
        view = run(engine.open("fay", MODULE))
        start = len(server.requests)
        result = run(engine.send(view.id, LearnerInput(text=text)))
        [screen_request] = _screen_requests(server, start)
    assert "risk:self_harm" in result.reply.flags
    assert reply_texts(result.reply.response)[:1] != ["Box breathing is four counts each way."]
    system = screen_request["messages"][0]["content"]
    assert "self_harm" in system and text in screen_request["messages"][1]["content"]
    risks = [r for r in risk_rows(store) if r.source == "model"]
    assert [r.label for r in risks] == ["self_harm"]
    [evidence] = risks[0].evidence
    assert text[evidence["start"]:evidence["end"]] == "box breathing"
    with store.session() as s:
        kinds = [a.detail_json for a in s.exec(select(AuditEvent))]
    assert any('"risk_screen"' in k for k in kinds)  # the screen call is audited


def test_a_flag_whose_evidence_is_not_in_the_message_is_dropped(store):
    with FakeLLMServer("openai") as server:
        engine = model_engine(store, server, screen=True)
        server.default = _screen_or_tutor(lambda request: openai_reply(_classify(
            {"label": "self_harm", "confidence": 0.95, "evidence_snippets": ["I will end it tonight"]})))
        view = run(engine.open("gus", MODULE))
        result = run(engine.send(view.id, LearnerInput(text="What is box breathing?")))
    assert not any(f.startswith("risk:") for f in result.reply.flags)
    assert risk_rows(store) == []


def test_an_invalid_screen_is_retried_at_temperature_zero_then_the_lesson_goes_on_and_the_turn_is_listed(store):
    answers = iter([openai_reply("I cannot classify that."),
                    openai_reply('{"risk_flags": [{"label": "self_harm", "confidence": 7}]}')])
    with FakeLLMServer("openai") as server:
        engine = model_engine(store, server, screen=True)
        server.default = _screen_or_tutor(lambda request: next(answers))
        view = run(engine.open("hal", MODULE))
        start = len(server.requests)
        result = run(engine.send(view.id, LearnerInput(text="What is box breathing?")))
        temperatures = [r["temperature"] for r in _screen_requests(server, start)]
    assert temperatures == [0.7, 0.0]  # the second try at temperature 0
    # A failed screen does not punish an ordinary learner: the lesson, and the turn is listed for review.
    assert reply_texts(result.reply.response) == ["Box breathing is four counts each way."]
    assert {"needs_review", "screen_failed"} <= set(result.reply.flags)
    assert not any(f.startswith("risk:") for f in result.reply.flags)
    assert [r.label for r in risk_rows(store)] == ["screen_failed"]


def test_a_low_confidence_model_flag_is_kept_for_review_and_the_lesson_goes_on(store):
    with FakeLLMServer("openai") as server:
        engine = model_engine(store, server, screen=True)
        server.default = _screen_or_tutor(lambda request: openai_reply(_classify(
            {"label": "self_harm", "confidence": 0.2, "evidence_snippets": ["box breathing"]})))
        view = run(engine.open("ida", MODULE))
        result = run(engine.send(view.id, LearnerInput(text="I'm curious, what is box breathing?")))
    assert reply_texts(result.reply.response) == ["Box breathing is four counts each way."]
    assert not any(f.startswith("risk:") for f in result.reply.flags)
    assert [(r.label, r.source) for r in risk_rows(store)] == [("self_harm", "model")]


def test_tutor_review_lists_flags_first_with_verified_evidence_and_marks_them_done(engine, store, monkeypatch):
    monkeypatch.setenv("TUTOR_DATABASE_URL", store.url)
    view = run(engine.open("jay", MODULE))
    run(engine.send(view.id, LearnerInput(text="my dad hits me when he is drunk")))
    with store.session() as s:  # a fail-closed lesson turn from elsewhere in the app
        s.add(Message(conversation_id=view.id, seq=99, role="tutor", raw="x", outcome="invalid",
                      flags_json='["invalid_json", "needs_review"]'))
        s.commit()

    out = io.StringIO()
    with redirect_stdout(out):
        assert cli(["review", "--json"]) == 0
    items = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [i["kind"] for i in items] == ["risk", "turn"]
    risk = items[0]
    assert risk["label"] == "abuse" and risk["module_id"] == MODULE and risk["created_at"]
    assert risk["severity"] in ("imminent", "serious") and risk["source"] in ("offline", "offline+semantic")
    assert risk["evidence"][0]["verified"] and "hits me" in risk["evidence"][0]["snippet"]

    text = io.StringIO()
    with redirect_stdout(text):
        assert cli(["review"]) == 0
    assert "abuse" in text.getvalue() and "hits me" in text.getvalue() and "OPEN" in text.getvalue()

    with redirect_stdout(io.StringIO()):
        assert cli(["review", "done", str(risk["id"]), "--note", "called the school counsellor", "--by", "op"]) == 0
        assert cli(["review", "done", "99999"]) == 1
    out = io.StringIO()
    with redirect_stdout(out):
        cli(["review", "--json"])
    assert [json.loads(line)["kind"] for line in out.getvalue().splitlines()] == ["turn"]


def test_tutor_chat_json_prints_the_risk_flags_and_evidence(monkeypatch, tmp_path):
    monkeypatch.setenv("TUTOR_DATABASE_URL", f"sqlite:///{tmp_path / 'chat.db'}")
    monkeypatch.setattr("sys.stdin", io.StringIO("I want to end my life\n"))
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli(["chat", "--module", MODULE, "--json"]) == 0
    turns = [json.loads(line) for line in out.getvalue().splitlines()]
    crisis = turns[-1]
    assert "risk:self_harm" in crisis["flags"]
    assert crisis["risk"][0]["label"] == "self_harm" and crisis["risk"][0]["evidence"][0]["sha256"]


@pytest.mark.parametrize("name,value", [
    ("TUTOR_SAFETY_MODEL_SCREEN", "maybe"),
    ("TUTOR_SAFETY_MIN_CONFIDENCE", "2"),
    ("TUTOR_SAFETY_MIN_CONFIDENCE", "high"),
    ("TUTOR_SAFETY_SCREEN_TIMEOUT", "0"),
])
def test_a_wrong_safety_setting_names_the_variable(name, value):
    with pytest.raises(ConfigError, match=name):
        SafetySettings.from_env({name: value})


def test_safety_settings_from_the_environment():
    default = SafetySettings.from_env({})
    assert default.model_screen is None  # auto: on wherever a model backend is configured
    assert default.model_screen_for("openai") and default.model_screen_for("anthropic")
    assert not default.model_screen_for("builtin")
    off = SafetySettings.from_env({"TUTOR_SAFETY_MODEL_SCREEN": "off"})
    assert not off.model_screen_for("openai")
    on = SafetySettings.from_env({"TUTOR_SAFETY_MODEL_SCREEN": "on", "TUTOR_SAFETY_MIN_CONFIDENCE": "0.7",
                                  "TUTOR_SAFETY_SCREEN_TIMEOUT": "5"})
    assert (on.model_screen, on.min_confidence, on.deadline_s) == (True, 0.7, 5.0)


def test_an_imminent_flag_gets_the_emergency_first_reply_and_ideation_the_supportive_one(engine, store):
    config = load_library().safety_for(MODULE)
    view = run(engine.open("kim", MODULE))
    plan = run(engine.send(view.id, LearnerInput(text="I have my pills counted out and tonight I'm taking all of them")))
    assert {"risk:self_harm", "risk_imminent"} <= set(plan.reply.flags)
    assert reply_texts(plan.reply.response) == [b.content for b in config.reply_for("self_harm", "en", "imminent")]
    assert plan.reply.response["content"]["text_blocks"][0]["type"] == "warning"  # the emergency comes first
    wish = run(engine.send(view.id, LearnerInput(text="Some days I wish I could just not wake up")))
    assert "risk:self_harm" in wish.reply.flags and "risk_imminent" not in wish.reply.flags
    assert reply_texts(wish.reply.response) == authored("self_harm")
    severities = [r.severity for r in risk_rows(store)]
    assert severities == ["imminent", "serious"]


def test_the_model_never_reads_a_safety_reply_as_its_own_words(store):
    with FakeLLMServer("openai") as server:
        server.default = lambda request: openai_reply(tutor_json("Box breathing is four counts each way."))
        engine = model_engine(store, server)
        view = run(engine.open("lee", MODULE))
        run(engine.send(view.id, LearnerInput(text="I want to kill myself")))
        start = len(server.requests)
        run(engine.send(view.id, LearnerInput(text="ok. what is box breathing?")))
        [lesson] = [r.json for r in server.requests[start:]]
    said = json.dumps(lesson["messages"], ensure_ascii=False)
    for block in authored("self_harm"):
        assert block not in said
    assert "safety message" in said  # a stand-in says what happened, not the words


def test_a_flagged_check_answer_is_never_graded_and_moves_nothing(engine, store):
    view = run(engine.open("max", MODULE))
    form = None
    for _ in range(20):
        last = engine.history(view.id)[-1]
        forms = (last.response or {}).get("content", {}).get("forms") or []
        form = next((f for f in forms if f["id"].startswith("check-")), None)
        if form is not None:
            break
        run(engine.send(view.id, LearnerInput(text="Continue")))
    assert form is not None, "the sample module asks a check"
    before = list(engine._view(view.id).progress.covered)  # noqa: SLF001 - the server's own view
    text = "I have a bottle of pills in my drawer and I keep looking at it"
    field = next(f["id"] for f in form["fields"] if f["type"] in ("text", "textarea"))
    result = run(engine.send(view.id, LearnerInput(form_id=form["id"], answers={field: text})))
    assert any(f.startswith("risk:") for f in result.reply.flags)
    assert not any("scored" in b for b in reply_texts(result.reply.response))
    with store.session() as s:
        assert s.exec(select(CheckAttempt)).all() == []  # nothing judged
    assert list(result.progress.covered) == before


def test_the_review_list_puts_imminent_flags_first_and_names_severity_and_layer(engine, store):
    from tutor.console.console_display import review_row
    from tutor.console.reviews import review_list

    view = run(engine.open("ned", MODULE))
    run(engine.send(view.id, LearnerInput(text="I have my pills counted out and tonight I'm taking all of them")))
    run(engine.send(view.id, LearnerInput(text="my dad hits me when he is drunk")))  # newer, not imminent
    items = review_list(store)
    assert [i.severity for i in items] == ["imminent", "serious"]  # imminent first, though older
    detail = review_row(items[0]).detail
    assert detail.startswith("IMMINENT") and "layer" in detail and "confidence" in detail


def test_the_console_shows_each_models_screen_failure_rate(store):
    from tutor.console.console import backend_health

    answers = iter([openai_reply("not json"), openai_reply("still not json"),  # the first message: failed
                    openai_reply(_classify())])  # the second: screened, nothing to flag
    with FakeLLMServer("openai") as server:
        engine = model_engine(store, server, screen=True)
        server.default = _screen_or_tutor(lambda request: next(answers))
        view = run(engine.open("ola", MODULE))
        run(engine.send(view.id, LearnerInput(text="What is box breathing?")))
        run(engine.send(view.id, LearnerInput(text="And how long should I do it?")))
    [model] = backend_health(store).screens
    assert (model.provider, model.model, model.screens, model.failed) == ("openai", "fake-model-1", 2, 1)
    assert model.failure_rate == 0.5


@pytest.mark.parametrize("module, text", [
    ("giac_ngu_lanh_manh", "tối nay mình sẽ cố đi ngủ trước 11 giờ"),
    ("giac_ngu_lanh_manh", "toi nay minh se co di ngu truoc 11h"),
    (MODULE, "tonight I'm going to try going to bed a bit earlier"),
])
def test_a_learners_plan_for_tonight_is_lesson_talk_not_a_crisis(engine, store, module, text):
    """A plan told with a time ("tonight I'll try to go to bed early") got the emergency-first
    reply: the bank held crisis plans told with a time and sleep as a euphemism, and few
    ordinary ones. These words are in neither the plan exemplars nor evals/safety/plans.yaml."""
    view = run(engine.open("lee", module))
    result = run(engine.send(view.id, LearnerInput(text=text)))
    assert not any(f.startswith("risk:") for f in result.reply.flags), result.reply.flags
    assert risk_rows(store) == []


def test_a_plan_for_tonight_with_the_means_is_still_met_with_the_emergency_reply(engine, store):
    view = run(engine.open("lee", MODULE))
    text = "tonight I'm going to take all my pills and go to sleep for good"
    result = run(engine.send(view.id, LearnerInput(text=text)))
    assert "risk:self_harm" in result.reply.flags
    assert [r.severity for r in risk_rows(store)] == ["imminent"]
