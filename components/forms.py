"""Optional forms inside a tutor message. Browser checks (required, min/max, options) are
declared on the fields and reported inline next to the field (see behaviour.py); the
server checks again and its message shows inline too. An answered form turns read-only
and shows the answers; a form the learner typed past (or skipped) shows as skipped.
Nothing here ever disables the message box: a form is a suggestion, not a gate."""

from __future__ import annotations

from dataclasses import dataclass

import reflex as rx

from tutor.render.display import FieldItem, FormItem, FormState, OptionItem
from tutor.web.state import ChatState, ui


@dataclass
class FormContext:
    """What a message passes down to its forms (props of the memoised message)."""

    overlay: rx.Var[dict[str, FormState]]  # status changes since the message was sent
    error_key: rx.Var[str]  # the form the server refused ("" unless this is the latest message)
    error_field: rx.Var[str]
    error: rx.Var[str]
    words: rx.Var[dict[str, str]] | None = None  # the page's words in the module's language (ChatState.ui)


def _label_text(field: rx.Var[FieldItem], *, group: bool = False, words: rx.Var | None = None) -> rx.Component:
    """The label with a visible * when required. A single control says "required" to
    screen readers itself (its required attribute); a group of choices needs the words."""
    said = rx.el.span(" ", ui("(required)", words), class_name="sr-only") if group else rx.fragment()
    mark = rx.cond(field.required, rx.fragment(rx.el.span(" *", class_name="req", aria_hidden="true"), said))
    return rx.el.span(field.label, mark, class_name="field-label")


def _notes(field: rx.Var[FieldItem], form: rx.Var[FormItem], ctx: FormContext) -> rx.Component:
    """Help, the allowed range, and the two places a problem is reported: the browser's
    check (filled in by behaviour.py) and the server's."""
    server_error = (ctx.error_key == form.key) & (ctx.error_field == field.id)
    return rx.fragment(
        rx.cond(
            (field.help_text != "") | (field.range_hint != ""),
            rx.el.p(
                field.help_text,
                rx.cond((field.help_text != "") & (field.range_hint != ""), " ", ""),
                field.range_hint,
                id=field.dom_id + "-help",
                class_name="help",
            ),
        ),
        # Not live: the focus moves to the first problem, whose description includes this.
        rx.el.p(id=field.dom_id + "-check", class_name="field-check"),
        rx.el.p(
            rx.cond(server_error, ctx.error, ""),
            id=field.dom_id + "-error",
            class_name=rx.cond(server_error, "field-error", "field-error empty"),
            role=rx.cond(server_error, "alert", "none"),
        ),
    )


def _choices(field: rx.Var[FieldItem], form: rx.Var[FormItem], ctx: FormContext, kind: str) -> rx.Component:
    def option(o: rx.Var[OptionItem]) -> rx.Component:
        return rx.el.label(
            rx.el.input(
                type=kind,
                name=field.id,
                value=o.value,
                id=o.dom_id,
                required=field.required if kind == "radio" else False,
            ),
            rx.el.span(o.label),
            class_name="choice",
            html_for=o.dom_id,
        )

    return rx.el.fieldset(
        rx.el.legend(_label_text(field, group=True, words=ctx.words)),
        rx.foreach(field.options, option),
        _notes(field, form, ctx),
        class_name="field field-" + kind,
        id=field.dom_id,
        aria_describedby=field.described_by,
        # A required checkbox group needs one tick; the browser has no attribute for it.
        data_required_group=rx.cond(field.required & (kind == "checkbox"), "true", "false"),
    )


def _single(field: rx.Var[FieldItem], form: rx.Var[FormItem], ctx: FormContext, control: rx.Component) -> rx.Component:
    return rx.el.div(
        rx.el.label(_label_text(field, words=ctx.words), html_for=field.dom_id),
        control,
        _notes(field, form, ctx),
        class_name="field field-" + field.type,
    )


def _field(form: rx.Var[FormItem], ctx: FormContext):
    def view(field: rx.Var[FieldItem]) -> rx.Component:
        invalid = rx.cond((ctx.error_key == form.key) & (ctx.error_field == field.id), "true", "false")
        common = dict(
            name=field.id, id=field.dom_id, required=field.required,
            aria_describedby=field.described_by, aria_invalid=invalid,
        )
        return rx.match(
            field.type,
            ("radio", _choices(field, form, ctx, "radio")),
            ("checkbox", _choices(field, form, ctx, "checkbox")),
            (
                "select",
                _single(field, form, ctx, rx.el.select(
                    rx.el.option(rx.cond(field.placeholder != "", field.placeholder, ui("Choose…", ctx.words)), value=""),
                    rx.foreach(field.options, lambda o: rx.el.option(o.label, value=o.value)),
                    **common,
                )),
            ),
            (
                "textarea",
                _single(field, form, ctx, rx.el.textarea(
                    placeholder=field.placeholder, rows=3, max_length=2000, **common,
                )),
            ),
            (
                "number",
                _single(field, form, ctx, rx.el.input(
                    type="number", placeholder=field.placeholder, min=field.min, max=field.max,
                    step="any", input_mode="decimal", **common,
                )),
            ),
            _single(field, form, ctx, rx.el.input(
                type="text", placeholder=field.placeholder, max_length=2000, **common,
            )),
        )

    return view


def _open_form(form: rx.Var[FormItem], ctx: FormContext) -> rx.Component:
    form_error = (ctx.error_key == form.key) & (ctx.error_field == "")
    return rx.el.form(
        rx.el.input(type="hidden", name="__form", value=form.key),
        rx.cond(
            form.has_required,
            rx.el.p(rx.el.span("*", aria_hidden="true"), " ", ui("marks a required answer.", ctx.words), class_name="form-note"),
        ),
        rx.foreach(form.fields, _field(form, ctx)),
        rx.el.p(
            rx.cond(form_error, ctx.error, ""),
            class_name=rx.cond(form_error, "form-error", "form-error empty"),
            role=rx.cond(form_error, "alert", "none"),
            id=form.dom_key + "-error",
        ),
        rx.el.div(
            rx.el.button(form.submit_label, type="submit", class_name="btn btn-primary", id=form.dom_key + "-submit"),
            rx.cond(
                form.optional & ~form.is_check,
                rx.el.button(
                    ui("Skip", ctx.words),
                    type="button",
                    class_name="btn btn-quiet",
                    on_click=ChatState.skip_form(form.key),
                    aria_label=rx.cond(form.title != "", ui("Skip", ctx.words) + " " + form.title, ui("Skip this form", ctx.words)),
                    id=form.dom_key + "-skip",
                ),
            ),
            class_name="form-actions",
        ),
        on_submit=ChatState.submit_form,
        reset_on_submit=False,
        class_name="form-body",
        aria_labelledby=rx.cond(form.title != "", form.dom_key + "-title", ""),
        aria_label=rx.cond(form.title != "", "", ui("Form", ctx.words)),
    )


def _answered(answers: rx.Var[list[str]], words: rx.Var | None) -> rx.Component:
    return rx.el.div(
        rx.el.p(rx.icon("check", size=14, aria_hidden="true"), " ", ui("Your answers", words), class_name="form-state"),
        rx.el.ul(rx.foreach(answers, lambda line: rx.el.li(line))),
        class_name="form-answered",
    )


def form_view(form: rx.Var[FormItem], ctx: FormContext) -> rx.Component:
    changed = ctx.overlay.contains(form.key)
    status = rx.cond(changed, ctx.overlay[form.key].status, form.status)
    answers = rx.cond(changed, ctx.overlay[form.key].answers, form.answers)
    return rx.el.section(
        rx.cond(form.title != "", rx.el.h3(form.title, class_name="form-title", id=form.dom_key + "-title")),
        rx.cond(form.description != "", rx.el.p(form.description, class_name="form-description")),
        rx.match(
            status,
            ("submitted", _answered(answers, ctx.words)),
            ("skipped", rx.el.p(ui("Skipped — you can always tell me in your own words.", ctx.words),
                                class_name="form-state form-skipped")),
            ("answered", rx.el.p(rx.icon("check", size=14, aria_hidden="true"), " ", answers[0],
                                 class_name="form-state form-answered-in-chat")),
            rx.fragment(
                _open_form(form, ctx),
                rx.cond(
                    form.optional & ~form.is_check,
                    rx.el.p(ui("Optional — you can always just type instead.", ctx.words), class_name="form-optional"),
                ),
            ),
        ),
        class_name="tutor-form",
        id="form-" + form.dom_key,
        data_form_key=form.key,
        data_status=status,
        aria_label=rx.cond(form.title != "", "", ui("Form", ctx.words)),
        aria_labelledby=rx.cond(form.title != "", form.dom_key + "-title", ""),
    )
