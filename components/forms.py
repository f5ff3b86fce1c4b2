"""Optional forms inside a tutor message. Browser checks (required, min/max, options) are
declared on the fields; the server checks again and its message shows inline. An answered
form turns read-only and shows the answers; a form the learner typed past shows as skipped."""

from __future__ import annotations

import reflex as rx

from tutor.display import FieldItem, FormItem, OptionItem
from tutor.state import ChatState


def _label(field: rx.Var[FieldItem]) -> rx.Component:
    return rx.el.span(
        field.label,
        rx.cond(field.required, rx.el.span(" *", class_name="req", title="required")),
        class_name="field-label",
    )


def _help(field: rx.Var[FieldItem]) -> rx.Component:
    return rx.cond(
        field.help_text != "",
        rx.el.p(field.help_text, id=field.dom_id + "-help", class_name="help"),
    )


def _choice(field: rx.Var[FieldItem], kind: str) -> rx.Component:
    def option(o: rx.Var[OptionItem]) -> rx.Component:
        name = field.id if kind == "radio" else field.id + "::" + o.value
        return rx.el.label(
            rx.el.input(
                type=kind,
                name=name,
                value=o.value,
                id=o.dom_id,
                required=field.required if kind == "radio" else False,
            ),
            rx.el.span(o.label),
            class_name="choice",
            html_for=o.dom_id,
        )

    return rx.el.fieldset(
        rx.el.legend(_label(field)),
        rx.foreach(field.options, option),
        _help(field),
        class_name="field field-" + kind,
        aria_describedby=rx.cond(field.help_text != "", field.dom_id + "-help", ""),
    )


def _single(field: rx.Var[FieldItem], control: rx.Component) -> rx.Component:
    return rx.el.div(
        rx.el.label(_label(field), html_for=field.dom_id),
        control,
        _help(field),
        class_name="field field-" + field.type,
    )


def field_view(field: rx.Var[FieldItem]) -> rx.Component:
    described = rx.cond(field.help_text != "", field.dom_id + "-help", "")
    return rx.match(
        field.type,
        ("radio", _choice(field, "radio")),
        ("checkbox", _choice(field, "checkbox")),
        (
            "select",
            _single(
                field,
                rx.el.select(
                    rx.el.option("Choose…", value=""),
                    rx.foreach(field.options, lambda o: rx.el.option(o.label, value=o.value)),
                    name=field.id, id=field.dom_id, required=field.required,
                    aria_describedby=described,
                ),
            ),
        ),
        (
            "textarea",
            _single(
                field,
                rx.el.textarea(
                    name=field.id, id=field.dom_id, placeholder=field.placeholder,
                    required=field.required, rows=3, max_length=2000, aria_describedby=described,
                ),
            ),
        ),
        (
            "number",
            _single(
                field,
                rx.el.input(
                    type="number", name=field.id, id=field.dom_id, placeholder=field.placeholder,
                    required=field.required, min=field.min, max=field.max, step="any",
                    aria_describedby=described, input_mode="decimal",
                ),
            ),
        ),
        _single(
            field,
            rx.el.input(
                type="text", name=field.id, id=field.dom_id, placeholder=field.placeholder,
                required=field.required, max_length=2000, aria_describedby=described,
            ),
        ),
    )


def _open_form(form: rx.Var[FormItem]) -> rx.Component:
    error = ChatState.form_error[form.key]
    return rx.el.form(
        rx.el.input(type="hidden", name="__form", value=form.key),
        rx.foreach(form.fields, field_view),
        rx.cond(
            error,
            rx.el.p(error, class_name="form-error", role="alert", id="err-" + form.key),
        ),
        rx.el.div(
            rx.el.button(form.submit_label, type="submit", class_name="btn btn-primary"),
            rx.cond(
                form.optional,
                rx.el.button(
                    "Skip",
                    type="button",
                    class_name="btn btn-quiet",
                    on_click=ChatState.skip_form(form.key),
                    aria_label="Skip this form",
                ),
            ),
            class_name="form-actions",
        ),
        on_submit=ChatState.submit_form,
        reset_on_submit=False,
        class_name="form-body",
        aria_label=rx.cond(form.title != "", form.title, "Form"),
    )


def form_view(form: rx.Var[FormItem]) -> rx.Component:
    status = ChatState.form_status[form.key]
    return rx.el.section(
        rx.cond(form.title != "", rx.el.h3(form.title, class_name="form-title")),
        rx.cond(form.description != "", rx.el.p(form.description, class_name="form-description")),
        rx.match(
            status,
            (
                "submitted",
                rx.el.div(
                    rx.el.p(rx.icon("check", size=14, aria_hidden="true"), " Your answers", class_name="form-state"),
                    rx.el.ul(rx.foreach(ChatState.form_answers[form.key], lambda line: rx.el.li(line))),
                    class_name="form-answered",
                ),
            ),
            (
                "skipped",
                rx.el.p("Skipped — you carried on in your own words.", class_name="form-state form-skipped"),
            ),
            _open_form(form),
        ),
        rx.cond(form.optional, rx.el.p("Optional — you can always just type instead.", class_name="form-optional")),
        class_name="tutor-form",
        id="form-" + form.key,
        data_status=status,
    )
