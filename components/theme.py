"""Light and dark: the system's setting unless the learner picks one (light, dark or
system), remembered in this browser. The choice is applied by a script in the page's head,
before the first paint, so a dark page never flashes white; the select then only updates it."""

from __future__ import annotations

from collections.abc import Callable

import reflex as rx

STORAGE_KEY = "tutor-theme"

# Runs in <head>, before the body is painted: data-theme on <html> says which palette the
# stylesheet uses. "system" (or nothing stored) follows prefers-color-scheme, live.
HEAD_JS = r"""
(function () {
  var KEY = %(key)r;
  var root = document.documentElement;
  var media = window.matchMedia ? window.matchMedia('(prefers-color-scheme: dark)') : null;
  function choice() {
    try { var v = localStorage.getItem(KEY); return v === 'light' || v === 'dark' ? v : 'system'; }
    catch (e) { return 'system'; }
  }
  function apply() {
    var c = choice();
    var dark = c === 'dark' || (c === 'system' && media && media.matches);
    root.setAttribute('data-theme', dark ? 'dark' : 'light');
    root.setAttribute('data-theme-choice', c);
  }
  apply();
  if (media && media.addEventListener) { media.addEventListener('change', apply); }
  // <html lang> and the tab's title follow the page shown (a Vietnamese module's page:
  // lang="vi" and the module's title), so a screen reader reads the page and its title in
  // the page's language.
  function follow() {
    var page = document.querySelector('.page[lang]');
    if (page && page.lang && root.lang !== page.lang) { root.lang = page.lang; }
    var title = page && page.getAttribute('data-title');
    if (title && document.title !== title) { document.title = title; }
  }
  if (window.MutationObserver) {
    new MutationObserver(follow).observe(root, {subtree: true, childList: true, attributes: true,
                                                attributeFilter: ['lang', 'data-title']});
  }
  window.__tutorTheme = {
    choice: choice,
    set: function (c) {
      try { if (c === 'system') { localStorage.removeItem(KEY); } else { localStorage.setItem(KEY, c); } } catch (e) {}
      apply();
    }
  };
  // Any theme select on the page shows the current choice and changes it.
  document.addEventListener('change', function (e) {
    var t = e.target;
    if (t && t.classList && t.classList.contains('theme-select')) { window.__tutorTheme.set(t.value); }
  }, true);
  function sync() {
    var c = choice();
    document.querySelectorAll('select.theme-select').forEach(function (s) { if (s.value !== c) { s.value = c; } });
  }
  new MutationObserver(sync).observe(root, {childList: true, subtree: true});
})();
""" % {"key": STORAGE_KEY}


def theme_head_script() -> rx.Component:
    """For `rx.App(head_components=...)`: a plain inline script, so it runs before paint."""
    return rx.el.script(HEAD_JS)


def theme_choice(id_: str, word: Callable[[str], str | rx.Var[str]]) -> rx.Component:
    """The learner's choice of light, dark or the system's setting; `word` gives the page's
    words (the start page's, or `ui` on the chat page)."""
    return rx.el.label(
        rx.icon("sun-moon", size=16, aria_hidden="true"),
        rx.el.span(word("Theme")),
        rx.el.select(
            rx.el.option(word("System"), value="system"),
            rx.el.option(word("Light"), value="light"),
            rx.el.option(word("Dark"), value="dark"),
            id=id_,
            class_name="theme-select",
            default_value="system",
        ),
        class_name="theme-choice",
        html_for=id_,
    )
