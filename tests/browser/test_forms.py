"""Forms inside the conversation: every field type, checks in the browser and on the
server with inline messages, read-only answers, skipping, and tampering refused."""

from __future__ import annotations

import json

from playwright.sync_api import Page, expect

from tests.browser.conftest import RunningApp, ScriptedModel
from tests.browser.helpers import (
    block,
    db_rows,
    last_tutor,
    message_count,
    open_module,
    reply,
    send,
    unlabelled_controls,
    wait_for_reply,
)

EVERY_FIELD = {
    "id": "every_field",
    "title": "About your week",
    "description": "A few questions about the past week.",
    "submit_label": "Send my answers",
    "optional": False,
    "fields": [
        {"id": "mood", "type": "radio", "label": "How was your week?", "required": True, "help_text": "Pick one.",
         "options": [{"value": "calm", "label": "Mostly calm"}, {"value": "tense", "label": "Mostly tense"}]},
        {"id": "signs", "type": "checkbox", "label": "What did you notice?", "required": True,
         "options": [{"value": "heart", "label": "Racing heart"}, {"value": "sleep", "label": "Poor sleep"}]},
        {"id": "when", "type": "select", "label": "When is it worst?", "placeholder": "Choose a time",
         "options": [{"value": "morning", "label": "Mornings"}, {"value": "night", "label": "Nights"}]},
        {"id": "where", "type": "text", "label": "Where were you?", "placeholder": "e.g. at the shops",
         "required": True},
        {"id": "story", "type": "textarea", "label": "Tell me more", "placeholder": "As much as you like",
         "help_text": "Optional."},
        {"id": "level", "type": "number", "label": "How strong, 0 to 10?", "min": 0, "max": 10,
         "placeholder": "0-10", "required": True},
    ],
}


def _form(page: Page):
    return last_tutor(page).locator("section.tutor-form")


def _field(form, label: str):
    return form.get_by_label(label, exact=True)


def _learner_rows(app: RunningApp) -> list[tuple]:
    return db_rows(app.db_path, "select text, form_id, answers_json from message where role = 'learner' order by id")


def test_a_module_form_is_answered_and_shown_read_only(app: RunningApp, page: Page) -> None:
    open_module(page, app.url)
    send(page, "What are the three levels of anxiety?")
    form = _form(page)
    expect(form.locator(".form-title")).to_have_text("Quick reflection")
    expect(page.locator("#message")).to_be_enabled()  # a form never locks the conversation
    number = _field(form, "On average, how anxious have you felt this past week?")
    expect(number).to_have_attribute("min", "0")
    expect(number).to_have_attribute("max", "10")
    expect(number).to_have_attribute("placeholder", "0-10")
    expect(form.locator(".help").last).to_contain_text("0 = not at all anxious")

    # The browser's own check, shown next to the field; nothing is sent.
    stored = message_count(app.db_path)
    number.fill("11")
    form.get_by_role("button", name="Share my experience").click()
    expect(form.locator(".field-check").last).not_to_be_empty()
    expect(number).to_be_focused()
    expect(number).to_have_attribute("aria-invalid", "true")
    assert message_count(app.db_path) == stored

    form.get_by_label("Mental (thoughts and worries)").check()
    number.fill("7")
    expect(form.locator(".field-check").last).to_be_empty()
    tutors = page.locator(".msg-tutor").count()
    form.get_by_role("button", name="Share my experience").click()
    wait_for_reply(page, tutors)

    answered = page.locator(".tutor-form", has_text="Quick reflection")
    expect(answered).to_have_attribute("data-status", "submitted")
    expect(answered.locator(".form-answered li")).to_have_text([
        "Which level of anxiety do you notice most in yourself? Mental (thoughts and worries)",
        "On average, how anxious have you felt this past week? 7",
    ])
    assert answered.locator("input, select, textarea, button").count() == 0  # read-only now
    summary = page.locator(".msg-form-answer").last
    expect(summary).to_contain_text("My answers to “Quick reflection”")
    expect(summary.locator("li")).to_have_count(2)
    expect(page.locator("#message")).to_be_focused()
    text, form_id, answers = _learner_rows(app)[-1]
    assert form_id == "anxiety_levels_check"
    assert json.loads(answers) == {"primary_level": "mental", "anxiety_this_week": 7}

    page.reload()  # the stored status comes back with the page
    expect(page.locator(".tutor-form", has_text="Quick reflection")).to_have_attribute("data-status", "submitted")


def test_typing_instead_of_filling_a_form_marks_it_skipped(app: RunningApp, page: Page) -> None:
    open_module(page, app.url)
    send(page, "What are the three levels of anxiety?")
    expect(_form(page)).to_have_attribute("data-status", "open")
    page.reload()  # the open form comes back with the page, still open
    expect(_form(page)).to_have_attribute("data-status", "open")
    send(page, "Mostly the racing heart, honestly.")
    skipped = page.locator(".tutor-form", has_text="Quick reflection")
    expect(skipped).to_have_attribute("data-status", "skipped")
    expect(skipped).to_contain_text("Skipped")
    assert skipped.locator("input, button").count() == 0


def test_every_field_type_with_browser_and_server_checks(
    model_app: RunningApp, model: ScriptedModel, page: Page
) -> None:
    model.reply(reply(block("paragraph", "Let's look at your week."), forms=[EVERY_FIELD]))
    open_module(page, model_app.url)
    form = _form(page)
    expect(form.locator(".form-title")).to_have_text("About your week")
    expect(form.locator(".form-description")).to_have_text("A few questions about the past week.")
    expect(form.get_by_role("button", name="Send my answers")).to_be_visible()
    expect(form.get_by_role("button", name="Skip")).to_have_count(0)  # not optional
    assert form.locator(".form-optional").count() == 0

    expect(form.get_by_role("radiogroup", name="How was your week?").or_(
        form.get_by_role("group", name="How was your week? (required)"))).to_be_visible()
    expect(form.get_by_label("Mostly calm")).to_have_attribute("type", "radio")
    expect(form.get_by_label("Racing heart")).to_have_attribute("type", "checkbox")
    select = _field(form, "When is it worst?")
    expect(select.locator("option").first).to_have_text("Choose a time")
    where = form.get_by_label("Where were you?")
    expect(where).to_have_attribute("placeholder", "e.g. at the shops")
    expect(where).to_have_attribute("required", "")
    story = form.get_by_label("Tell me more")
    expect(story).to_have_attribute("placeholder", "As much as you like")
    expect(story).to_have_accessible_description("Optional.")
    level = form.get_by_label("How strong, 0 to 10?")
    expect(level).to_have_attribute("type", "number")
    expect(level).to_have_attribute("min", "0")
    expect(level).to_have_attribute("max", "10")
    expect(level).to_have_accessible_description("A number from 0 to 10.")
    expect(form.locator(".field-label .req")).to_have_count(4)  # required markers
    assert unlabelled_controls(page) == []

    # Browser checks: every required field reports inline; nothing reaches the server.
    stored = message_count(model_app.db_path)
    form.get_by_role("button", name="Send my answers").click()
    expect(form.locator(".field-check:not(:empty)")).to_have_count(4)
    assert message_count(model_app.db_path) == stored

    form.get_by_label("Mostly tense").check()
    form.get_by_label("Poor sleep").check()
    select.select_option("night")
    where.fill("On the bus")
    story.fill("It came out of nowhere.")
    level.fill("12")
    form.get_by_role("button", name="Send my answers").click()
    expect(form.locator(".field-check:not(:empty)")).to_have_count(1)  # only the number

    # Server checks: with the browser's check switched off, the server refuses, inline.
    form.locator("form").evaluate("f => { f.noValidate = true; }")
    form.get_by_role("button", name="Send my answers").click()
    error = form.locator(".field-error:not(.empty)")
    expect(error).to_have_text("“How strong, 0 to 10?” must be at most 10.")
    expect(level).to_have_attribute("aria-invalid", "true")
    assert message_count(model_app.db_path) == stored

    level.fill("6")
    tutors = page.locator(".msg-tutor").count()
    form.get_by_role("button", name="Send my answers").click()
    wait_for_reply(page, tutors)
    answered = page.locator(".tutor-form", has_text="About your week")
    expect(answered.locator(".form-answered li")).to_have_text([
        "How was your week? Mostly tense", "What did you notice? Poor sleep", "When is it worst? Nights",
        "Where were you? On the bus", "Tell me more: It came out of nowhere.", "How strong, 0 to 10? 6",
    ])
    text, form_id, answers = _learner_rows(model_app)[-1]
    assert form_id == "every_field"
    assert json.loads(answers) == {"mood": "tense", "signs": ["sleep"], "when": "night", "where": "On the bus",
                                   "story": "It came out of nowhere.", "level": 6}
    # The model reads the submission as the learner's turn: the summary and the answers.
    turn = model.requests[-1].json["messages"][-1]["content"]
    assert "How was your week? Mostly tense" in turn and '"level": 6' in turn


def test_tampered_submissions_are_refused_and_nothing_is_stored(
    model_app: RunningApp, model: ScriptedModel, page: Page
) -> None:
    model.reply(reply(block("paragraph", "A quick check."), forms=[EVERY_FIELD]))
    open_module(page, model_app.url)
    form = _form(page)
    form.locator("form").evaluate("f => { f.noValidate = true; }")
    form.get_by_label("Where were you?").fill("Home")
    form.get_by_label("How strong, 0 to 10?").fill("3")
    form.get_by_label("Racing heart").check()
    stored = message_count(model_app.db_path)

    def tamper_and_submit(change: str) -> None:
        # Change the DOM and submit in one go, before the page could re-render it.
        form.locator("form").evaluate(f"f => {{ {change}; f.requestSubmit(); }}")

    # A radio whose value was changed to one the form never offered.
    form.get_by_label("Mostly calm").check()
    tamper_and_submit("f.querySelector('input[type=radio]:checked').setAttribute('value', 'hacked')")
    expect(form.locator(".field-error:not(.empty)")).to_have_text(
        "'hacked' is not one of the choices for “How was your week?”.")

    # A checkbox value from outside the options.
    tamper_and_submit("f.querySelector('input[type=radio]:checked').setAttribute('value', 'calm');"
                      "f.querySelector('input[type=checkbox]:checked').setAttribute('value', 'everything')")
    expect(form.locator(".field-error:not(.empty)")).to_have_text(
        "'everything' is not one of the choices for “What did you notice?”.")

    # A field the form does not have: refused for the whole form.
    tamper_and_submit(
        "f.querySelector('input[type=checkbox]:checked').setAttribute('value', 'heart');"
        "const i = document.createElement('input'); i.type = 'hidden'; i.name = 'is_admin';"
        "i.value = '1'; f.appendChild(i)")
    expect(form.locator(".form-error:not(.empty)")).to_have_text("This form has no field named 'is_admin'.")
    expect(form).to_have_attribute("data-status", "open")
    assert message_count(model_app.db_path) == stored
    assert page.locator(".msg-learner").count() == 0


def test_an_optional_form_can_be_skipped_and_the_message_box_stays_free(
    model_app: RunningApp, model: ScriptedModel, page: Page
) -> None:
    optional = {**EVERY_FIELD, "id": "week", "optional": True, "submit_label": None}
    model.reply(reply(block("paragraph", "Only if you like."), forms=[optional]))
    open_module(page, model_app.url)
    form = _form(page)
    expect(form.get_by_role("button", name="Submit")).to_be_visible()  # the default label
    expect(form.locator(".form-optional")).to_have_text("Optional — you can always just type instead.")
    form.get_by_role("button", name="Skip About your week").click()
    expect(form).to_have_attribute("data-status", "skipped")
    expect(page.locator("#message")).to_be_focused()
    states = db_rows(model_app.db_path, "select form_states_json from message where role = 'tutor' order by id desc")
    assert json.loads(states[0][0]) == {"week": {"status": "skipped"}}
    send(page, "Thanks, carry on.")
    expect(page.locator(".msg-learner").last).to_have_text("Thanks, carry on.")


def test_a_submitted_module_form_counts_toward_progress(
    model_app: RunningApp, model: ScriptedModel, page: Page
) -> None:
    record = {"id": "thought_record", "title": "Try a thought record",
              "fields": [{"id": "belief_before", "type": "number", "label": "How much do you believe it?",
                          "min": 0, "max": 100}]}
    model.reply(reply(block("paragraph", "Let's practise."), forms=[record]))
    open_module(page, model_app.url)
    expect(page.locator("#progress-count")).to_have_text("0 of 25 topics")
    form = _form(page)
    form.get_by_label("How much do you believe it?").fill("60")
    tutors = page.locator(".msg-tutor").count()
    form.get_by_role("button", name="Submit").click()
    wait_for_reply(page, tutors)
    expect(page.locator("#progress-count")).to_have_text("1 of 25 topics")
    expect(page.locator("#progress-remaining")).to_have_text("24 topics to go")  # as "1 of 25 topics" counts: seen
