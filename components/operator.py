"""The operator console (/operator): the review list, per-module numbers, backend health,
the progress export and a learner's data request. Only operators get data (see
tutor.web.operator_state); everyone else sees one plain sentence."""

from __future__ import annotations

import reflex as rx

from tutor.console.console_display import (
    AttemptRow,
    CheckRow,
    CountRow,
    ErrorRow,
    EvidenceRow,
    FieldRow,
    OptionRow,
    ReviewRow,
    ScreenRow,
    TopicRow,
    TranscriptRow,
    WindowRow,
)
from tutor.web.operator_state import OperatorState as S

# Times in the viewer's zone: each <time class="op-time"> gets a second span with the local
# time (the UTC one, React's, is hidden by the stylesheet once it is there, and stays as the
# tooltip). The script only adds its own span, so React's nodes are never touched.
_LOCAL_TIME_JS = r"""
if (!window.__tutorLocalTime) {
  window.__tutorLocalTime = true;
  const format = new Intl.DateTimeFormat(undefined, {dateStyle: 'medium', timeStyle: 'short'});
  const localise = () => {
    document.querySelectorAll('time.op-time[datetime]').forEach((el) => {
      const iso = el.getAttribute('datetime');
      if (el.dataset.localised === iso) { return; }
      const when = new Date(iso);
      if (isNaN(when)) { return; }
      let span = el.querySelector(':scope > .local');
      if (!span) { span = document.createElement('span'); span.className = 'local'; el.append(span); }
      span.textContent = format.format(when);
      const utc = el.querySelector(':scope > .utc');
      el.title = utc ? utc.textContent : iso;
      el.dataset.localised = iso;
    });
  };
  new MutationObserver(localise).observe(document.body, {subtree: true, childList: true, attributes: true,
                                                          attributeFilter: ['datetime']});
  localise();
}
"""


def _when(text: rx.Var[str], iso: rx.Var[str]) -> rx.Component:
    return rx.el.time(rx.el.span(text, class_name="utc"), date_time=iso, class_name="op-time")


def _th(text: str) -> rx.Component:
    return rx.el.th(text, scope="col")


def _table(caption: str, headers: list[str], body: rx.Component, **props) -> rx.Component:
    return rx.el.div(
        rx.el.table(
            rx.el.caption(caption, class_name="sr-only"),
            rx.el.thead(rx.el.tr(*[_th(h) for h in headers])),
            rx.el.tbody(body),
            class_name="op-table",
        ),
        class_name="op-table-wrap", **props,
    )


# ----------------------------------------------------------------------------- reviews


def _attempt(a: rx.Var[AttemptRow]) -> rx.Component:
    return rx.el.tr(
        rx.el.th(a.attempt, scope="row"), rx.el.td(a.kind), rx.el.td(a.provider), rx.el.td(a.model),
        rx.el.td(a.strategy), rx.el.td(a.outcome), rx.el.td(a.error_class), rx.el.td(a.latency),
        rx.el.td(a.tokens_in), rx.el.td(a.tokens_out), rx.el.td(a.cost),
        rx.el.td(a.error, rx.cond(a.hint != "", rx.el.p(rx.el.strong("What to do: "), a.hint, class_name="op-hint"))),
    )


def _evidence(e: rx.Var[EvidenceRow]) -> rx.Component:
    return rx.el.li(
        rx.el.span(e.where, class_name="op-muted"), " ", rx.el.q(e.snippet),
        rx.cond(e.check != "", rx.el.span(" (" + e.check + ")", class_name="op-warning")),
    )


def _mark_form(item: rx.Var[ReviewRow]) -> rx.Component:
    return rx.el.form(
        rx.el.input(type="hidden", name="item", value=item.key),
        rx.el.label("Note (optional)", html_for="note-" + item.key, class_name="op-label"),
        rx.el.input(id="note-" + item.key, name="note", type="text", max_length=2000, class_name="op-input"),
        rx.el.button("Mark reviewed", type="submit", class_name="btn btn-primary", id="mark-" + item.key,
                     aria_label="Mark reviewed: " + item.kind_label + " " + item.key),
        on_submit=S.mark_reviewed, reset_on_submit=True, class_name="op-mark",
    )


def _transcript_line(line: rx.Var[TranscriptRow]) -> rx.Component:
    return rx.el.li(
        rx.el.p(
            rx.el.strong(line.who), " · ", _when(line.when, line.when_iso),
            rx.cond(line.flags != "", rx.el.span(" · " + line.flags)),
            rx.cond(line.focus, rx.el.strong(" · the message under review", class_name="op-warning")),
            class_name="op-muted",
        ),
        rx.el.div(line.text, class_name="op-transcript-text"),
        class_name=rx.cond(line.focus, "op-line op-focus", "op-line"),
        aria_current=rx.cond(line.focus, "true", "false"),
    )


def _transcript(item: rx.Var[ReviewRow]) -> rx.Component:
    """The conversation around the item, read-only (loaded when the operator asks)."""
    is_open = S.transcript_key == item.key
    return rx.el.div(
        rx.el.button(rx.cond(is_open, "Hide conversation", "Show conversation"), type="button",
                     class_name="btn btn-quiet", id="transcript-" + item.key,
                     aria_expanded=rx.cond(is_open, "true", "false"), aria_controls="conversation-" + item.key,
                     on_click=S.toggle_transcript(item.key)),
        rx.cond(is_open, rx.el.div(
            rx.el.h4("Conversation around it (read-only)"),
            rx.cond(S.transcript_error != "", rx.el.p(S.transcript_error, role="alert", class_name="input-error")),
            rx.el.ol(rx.foreach(S.transcript, _transcript_line), class_name="op-transcript"),
            id="conversation-" + item.key,
        )),
        class_name="op-conversation",
    )


def _review(item: rx.Var[ReviewRow]) -> rx.Component:
    return rx.el.li(
        rx.el.article(
            rx.el.h3(item.kind_label + " · " + item.label, id="title-" + item.key),
            rx.el.p(
                _when(item.created_at, item.created_iso), " · module ", rx.el.strong(item.module_title), " · learner ", rx.el.strong(item.learner),
                rx.cond(item.detail != "", " · " + item.detail, ""),
                class_name="op-muted",
            ),
            rx.cond(item.evidence.length() > 0, rx.el.div(
                rx.el.h4("Evidence"), rx.el.ul(rx.foreach(item.evidence, _evidence)))),
            _transcript(item),
            rx.cond(item.raw != "", rx.el.div(
                rx.el.h4("Raw model reply"),
                rx.el.pre(item.raw, class_name="op-raw", tab_index=0, aria_label="Raw model reply"),
                rx.cond(item.raw_more != "", rx.el.p(item.raw_more, class_name="op-muted")),
            )),
            rx.cond(item.attempts.length() > 0, rx.el.div(
                rx.el.h4("Model calls"),
                _table("Model calls for this item", ["#", "Kind", "Provider", "Model", "Strategy", "Outcome",
                                                     "Error", "Latency", "Tokens in", "Tokens out", "Cost",
                                                     "Message"],
                       rx.foreach(item.attempts, _attempt)),
            )),
            rx.cond(item.reviewed, rx.el.p(item.reviewed_line, class_name="op-reviewed"), _mark_form(item)),
            aria_labelledby="title-" + item.key,
            class_name="op-item",
        ),
        id="review-" + item.key,
    )


def _reviews() -> rx.Component:
    return rx.el.section(
        rx.el.h2("Review list", id="reviews-heading"),
        rx.el.div(
            rx.el.label(
                rx.el.input(type="checkbox", id="show-reviewed", checked=S.show_reviewed,
                            on_change=S.toggle_show_reviewed),
                " Show reviewed",
                class_name="choice",
            ),
            rx.cond(S.loading, rx.el.span("Loading…", class_name="op-muted", role="status")),
            class_name="op-toolbar",
        ),
        rx.cond(
            S.reviews.length() > 0,
            rx.el.ol(rx.foreach(S.reviews, _review), class_name="op-list", id="review-list"),
            rx.cond(S.loading, rx.fragment(), rx.el.p("Nothing to review.", id="nothing-to-review")),
        ),
        rx.el.nav(
            rx.el.button("Newer", type="button", class_name="btn btn-quiet", on_click=S.previous_page,
                         disabled=S.review_page == 0, aria_label="Newer items"),
            rx.el.span("Page " + (S.review_page + 1).to_string(), class_name="op-muted"),
            rx.el.button("Older", type="button", class_name="btn btn-quiet", on_click=S.next_page,
                         disabled=~S.has_more, aria_label="Older items"),
            aria_label="Review list pages", class_name="op-toolbar",
        ),
        aria_labelledby="reviews-heading",
    )


# ----------------------------------------------------------------------------- modules


def _topic(t: rx.Var[TopicRow]) -> rx.Component:
    return rx.el.tr(rx.el.th(t.title, scope="row"), rx.el.td(t.seen), rx.el.td(t.mastered), rx.el.td(t.stopped_here))


def _option(o: rx.Var[OptionRow]) -> rx.Component:
    return rx.el.tr(rx.el.th(o.label, scope="row"), rx.el.td(o.count))


def _field(f: rx.Var[FieldRow]) -> rx.Component:
    return rx.el.div(
        rx.el.h4(f.title + " (" + f.answers + ")"),
        _table("Answers to " + f.title, ["Answer", "Count"], rx.foreach(f.options, _option)),
        class_name="op-field",
    )


def _check(c: rx.Var[CheckRow]) -> rx.Component:
    return rx.el.tr(rx.el.th(c.check_id, scope="row"), rx.el.td(c.topic), rx.el.td(c.judged), rx.el.td(c.failed),
                    rx.el.td(c.mean), rx.el.td(c.median))


def _modules() -> rx.Component:
    m = S.module
    return rx.el.section(
        rx.el.h2("Modules", id="modules-heading"),
        rx.el.div(
            rx.el.label("Module", html_for="module-choice", class_name="op-label"),
            rx.el.select(
                rx.foreach(S.module_ids, lambda mid: rx.el.option(S.module_titles[mid], value=mid)),
                id="module-choice", value=S.module_id, on_change=S.choose_module, class_name="op-input",
            ),
            class_name="op-toolbar",
        ),
        rx.el.p(rx.el.strong(m.learners), " · ", m.stopped, id="module-summary"),
        rx.el.h3("Topics"),
        _table("Learners per topic", ["Topic", "Seen", "Mastered", "Stopped here"], rx.foreach(m.topics, _topic)),
        rx.el.h3("Form answers"),
        rx.cond(m.fields.length() > 0, rx.foreach(m.fields, _field), rx.el.p("No form answers yet.")),
        rx.el.h3("Judged answers"),
        rx.cond(m.checks.length() > 0,
                _table("Scores per check (0–10)", ["Check", "Topic", "Judged", "Judge failed", "Mean", "Median"],
                       rx.foreach(m.checks, _check)),
                rx.el.p("No judged answers yet.")),
        aria_labelledby="modules-heading",
    )


# ----------------------------------------------------------------------------- health


def _count(c: rx.Var[CountRow]) -> rx.Component:
    return rx.el.tr(rx.el.th(c.outcome, scope="row"), rx.el.td(c.error_class), rx.el.td(c.count))


def _window(w: rx.Var[WindowRow]) -> rx.Component:
    return rx.el.div(
        rx.el.h3("Model calls, " + w.label),
        rx.el.p(w.calls + " · latency p50 " + w.p50 + " · p95 " + w.p95),
        rx.cond(w.builtin != "", rx.el.p(w.builtin, class_name="op-muted")),
        rx.cond(w.counts.length() > 0,
                _table("Model calls by outcome, " + w.label, ["Outcome", "Error", "Calls"],
                       rx.foreach(w.counts, _count))),
        class_name="op-window",
    )


def _error(e: rx.Var[ErrorRow]) -> rx.Component:
    return rx.el.tr(
        rx.el.th(_when(e.created_at, e.created_iso), scope="row"), rx.el.td(e.provider + " · " + e.model),
        rx.el.td(e.kind),
        rx.el.td(e.error_class, rx.cond(e.status != "", " (" + e.status + ")", "")),
        rx.el.td(e.error, rx.cond(e.hint != "", rx.el.p(rx.el.strong("What to do: "), e.hint, class_name="op-hint"))),
    )


def _screen(row: rx.Var[ScreenRow]) -> rx.Component:
    return rx.el.tr(rx.el.th(row.model, scope="row"), rx.el.td(row.screens), rx.el.td(row.failed),
                    rx.el.td(row.rate))


def _health() -> rx.Component:
    return rx.el.section(
        rx.el.h2("Backend health", id="health-heading"),
        rx.foreach(S.windows, _window),
        rx.el.h3("Model safety screen, last day"),
        rx.cond(S.screens.length() > 0,
                _table("Model safety screen by model, last day", ["Model", "Messages screened", "Failed", "Failure rate"],
                       rx.foreach(S.screens, _screen), id="screen-health"),
                rx.el.p("No model screen calls in the last day (it runs when a model backend is configured).")),
        rx.el.h3("Latest errors"),
        rx.cond(S.errors.length() > 0,
                _table("Latest model errors", ["When", "Model", "Kind", "Error", "Message and what to do"],
                       rx.foreach(S.errors, _error), id="recent-errors"),
                rx.el.p("No model errors recorded.")),
        aria_labelledby="health-heading",
    )


# ----------------------------------------------------------------------------- data


def _data() -> rx.Component:
    return rx.el.section(
        rx.el.h2("Learners' data", id="data-heading"),
        # rx.el.a is React Router's Link: it would look for a page called progress.csv ("404:
        # Page not found"). reload_document leaves the click to the browser, which downloads
        # the route's attachment (the route checks the operator itself).
        rx.el.p(rx.el.a("Download progress (CSV)", href="/operator/progress.csv", id="progress-csv", download=True,
                        reload_document=True, class_name="btn btn-quiet")),
        rx.el.h3("Delete a learner's data"),
        rx.el.form(
            rx.el.label("Username or learner key", html_for="delete-who", class_name="op-label"),
            rx.el.input(id="delete-who", name="who", type="text", required=True, class_name="op-input",
                        auto_complete="off"),
            rx.el.button("Find learner", type="submit", class_name="btn btn-quiet", id="delete-find"),
            on_submit=S.find_learner, class_name="op-mark",
        ),
        rx.cond(S.delete_found != "", rx.el.form(
            rx.el.p(S.delete_found, " Deleting removes their conversations, progress, flags, account and "
                    "sign-in sessions, and cannot be undone.", id="delete-summary"),
            rx.el.label("Type “", S.delete_name, "” to confirm", html_for="delete-confirm", class_name="op-label"),
            rx.el.input(id="delete-confirm", name="confirm", type="text", required=True, class_name="op-input",
                        auto_complete="off", aria_describedby="delete-summary"),
            rx.el.div(
                rx.el.button("Delete learner and data", type="submit", class_name="btn btn-danger", id="delete-go"),
                rx.el.button("Cancel", type="button", class_name="btn btn-quiet", on_click=S.cancel_delete),
                class_name="card-actions",
            ),
            on_submit=S.confirm_delete, class_name="confirm", role="group", aria_label="Confirm deleting a learner",
        )),
        rx.cond(S.delete_error != "", rx.el.p(S.delete_error, class_name="input-error", role="alert",
                                               id="delete-error")),
        aria_labelledby="data-heading",
    )


# ----------------------------------------------------------------------------- page


def _not_operator() -> rx.Component:
    """The refusal, with a way on: home, and sign-in for a signed-out visitor with accounts."""
    return rx.el.div(
        rx.el.p("This page is for operators.", id="not-operator"),
        rx.el.p(
            rx.el.a("Back to Tutor", href="/", id="not-operator-home"),
            rx.cond((S.auth_mode == "accounts") & (S.signed_in_as == ""), rx.fragment(
                " · ", rx.el.a("Sign in", href="/signin?next=%2Foperator", id="not-operator-signin"))),
        ),
    )


def operator_page() -> rx.Component:
    return rx.el.main(
        rx.el.header(
            rx.el.h1("Operator console"),
            rx.cond(S.access == "operator",
                    rx.el.p("Signed in as ", rx.el.strong(S.operator_name), " · ", rx.el.a("Back to Tutor", href="/"))),
            class_name="home-header",
        ),
        rx.match(
            S.access,
            ("operator", rx.fragment(
                rx.el.p(S.notice, role="status", aria_live="polite", id="op-notice", class_name="op-notice"),
                rx.cond(S.load_error != "", rx.el.p(S.load_error, role="alert", class_name="input-error")),
                _reviews(), _modules(), _health(), _data(),
                rx.script(_LOCAL_TIME_JS),
            )),
            ("denied", _not_operator()),
            ("unavailable", rx.el.p(S.load_error, role="alert")),
            rx.el.p("Checking who you are…", class_name="op-muted"),
        ),
        class_name="page operator",
        lang="en",  # the console is in English
        id="operator",
    )
