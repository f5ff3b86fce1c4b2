"""Small browser-side behaviour of the chat page, in one script: keys (Escape closes a
confirmation, on the start page too), scrolling, inline form checks and broken-image fallbacks. None of it needs a round trip to the server."""

from __future__ import annotations

import reflex as rx

_JS = r"""
if (!window.__tutorChat) {
  window.__tutorChat = true;
  const inTutorForm = (el) => !!(el && el.form && el.form.classList.contains('form-body'));

  // Enter sends, Shift+Enter adds a line.
  document.addEventListener('keydown', (e) => {
    const t = e.target;
    if (t && t.id === 'message' && e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      if (t.form) { t.form.requestSubmit(); }
    }
    if (e.key === 'Enter' && inTutorForm(t)) { syncGroups(t.form); }
  }, true);

  // The sticky header and composer: their heights, for scroll-padding (tutor.css), so
  // whatever is scrolled to or focused stops clear of both.
  const measure = () => {
    const h = document.querySelector('.chat-header');
    const f = document.querySelector('.chat-footer');
    const root = document.documentElement.style;
    root.setProperty('--header-h', (h ? h.offsetHeight : 0) + 'px');
    root.setProperty('--footer-h', (f ? f.offsetHeight : 0) + 'px');
  };
  const sizes = new ResizeObserver(measure);
  let watched = [];
  const watchBars = () => {
    const bars = [...document.querySelectorAll('.chat-header, .chat-footer')];
    if (bars.length === watched.length && bars.every((b, i) => b === watched[i])) { return; }
    sizes.disconnect();
    bars.forEach((b) => sizes.observe(b));
    watched = bars;
    measure();
  };

  // New messages. The newest message and the typing indicator stay in view above the
  // composer, unless the learner scrolled up to read: then a "New message" button appears.
  // A single new tutor reply is shown from its top, so it reads from the start.
  const newButton = () => document.getElementById('new-message');
  const nearEnd = () => window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 80;
  // "Following" until the learner scrolls up themselves; our own scrolls don't count.
  let following = true, lastY = window.scrollY, ours = -1;
  window.addEventListener('scroll', () => {
    const y = window.scrollY;
    if (nearEnd()) { following = true; }
    else if (y < lastY && Math.abs(y - ours) > 1) { following = false; }
    lastY = y;
    if (following && newButton()) { newButton().hidden = true; }
  }, {passive: true});
  const toEnd = () => {
    const end = document.getElementById('chat-end');
    if (end) { end.scrollIntoView({block: 'end'}); }
    ours = window.scrollY;
    following = true;
    if (newButton()) { newButton().hidden = true; }
  };
  const toTop = (el) => {
    const h = document.querySelector('.chat-header');
    window.scrollTo({top: el.getBoundingClientRect().top + window.scrollY - (h ? h.offsetHeight : 0) - 8});
    ours = window.scrollY;
  };
  document.addEventListener('click', (e) => {
    if (e.target.closest && e.target.closest('#new-message')) { toEnd(); const m = document.getElementById('message'); if (m) { m.focus({preventScroll: true}); } }
  });
  new MutationObserver((records) => {
    watchBars();
    fitPlaceholder();
    const added = [];
    let end = false, mine = false;
    for (const r of records) {
      for (const n of r.addedNodes) {
        if (n.nodeType !== 1) { continue; }
        if (n.classList.contains('msg')) { added.push(n); if (n.classList.contains('msg-learner')) { mine = true; } }
        else if (n.id === 'typing' || n.id === 'completion') { end = true; }
        else if (n.querySelector && n.querySelector('.msg')) { end = true; }
      }
    }
    if (!added.length && !end) { return; }
    if (!following && !mine) {  // reading further up: say so, don't pull the page away
      if (newButton()) { newButton().hidden = false; }
      return;
    }
    if (added.length === 1 && (added[0].classList.contains('msg-tutor') || added[0].classList.contains('msg-streaming'))) { toTop(added[0]); }
    else { toEnd(); }
  }).observe(document.body, {childList: true, subtree: true});

  // A phone's placeholder fits one line.
  const narrow = window.matchMedia('(max-width: 480px)');
  function fitPlaceholder() {
    const box = document.getElementById('message');
    if (!box) { return; }
    if (!box.dataset.fullPlaceholder) { box.dataset.fullPlaceholder = box.placeholder; }
    // Both come from the page (data-full-placeholder, data-short-placeholder), in the module's language.
    const want = narrow.matches ? (box.dataset.shortPlaceholder || 'Type your message') : box.dataset.fullPlaceholder;
    if (box.placeholder !== want) { box.placeholder = want; }
  }
  narrow.addEventListener('change', fitPlaceholder);

  // On a phone the header is one line; its progress button opens the details.
  document.addEventListener('click', (e) => {
    const b = e.target.closest ? e.target.closest('#progress-toggle') : null;
    if (!b) { return; }
    const header = b.closest('.chat-header');
    const open = !header.classList.contains('expanded');
    header.classList.toggle('expanded', open);
    b.setAttribute('aria-expanded', open ? 'true' : 'false');
    b.setAttribute('aria-label', b.getAttribute('aria-label').replace(open ? 'show details' : 'hide details', open ? 'hide details' : 'show details'));
  });

  // A Cancel that closes a confirmation puts the focus back on the button that asked
  // (data-return-focus: its id), once the page shows that button again. Done here, not
  // by the server: the page's Content-Security-Policy allows no script sent as text.
  document.addEventListener('click', (e) => {
    const cancel = e.target.closest && e.target.closest('[data-return-focus]');
    if (!cancel) { return; }
    const id = cancel.getAttribute('data-return-focus');
    const until = Date.now() + 2000;
    const tryFocus = () => {
      const el = document.getElementById(id);
      if (el && el !== document.activeElement && el.isConnected) { el.focus(); return; }
      if (!el && Date.now() < until) { requestAnimationFrame(tryFocus); }
    };
    requestAnimationFrame(tryFocus);
  });

  // Escape closes a confirmation (its Cancel puts the focus back), then an open menu.
  document.addEventListener('keydown', (e) => {
    if (e.key !== 'Escape') { return; }
    const cancel = document.querySelector('.confirm .confirm-cancel');
    if (cancel) { e.preventDefault(); cancel.click(); return; }
    const menu = document.querySelector('details.chat-menu[open]');
    if (menu) { e.preventDefault(); menu.open = false; menu.querySelector('summary').focus(); }
  });

  // Inline messages for the browser's own form checks, next to the field, instead of
  // the native bubble; the first problem gets the focus.
  const note = (el) => { const f = el.closest('.field'); return f ? f.querySelector('.field-check') : null; };
  document.addEventListener('invalid', (e) => {
    const el = e.target;
    if (!inTutorForm(el)) { return; }
    e.preventDefault();
    const n = note(el);
    if (n) { n.textContent = el.validationMessage; }
    el.setAttribute('aria-invalid', 'true');
    const form = el.form;
    if (!form.__focusing) {
      form.__focusing = true;
      el.focus();
      setTimeout(() => { form.__focusing = false; }, 0);
    }
  }, true);
  const recheck = (e) => {
    const el = e.target;
    if (!inTutorForm(el)) { return; }
    syncGroups(el.form);
    const field = el.closest('.field');
    if (!field) { return; }
    const controls = [...field.querySelectorAll('input, select, textarea')];
    if (controls.every((c) => c.validity.valid)) {
      const n = note(el);
      if (n) { n.textContent = ''; }
      controls.forEach((c) => c.setAttribute('aria-invalid', 'false'));
    }
  };
  document.addEventListener('input', recheck, true);
  document.addEventListener('change', recheck, true);

  // A required checkbox group needs at least one tick; HTML has no attribute for that.
  function syncGroups(form) {
    form.querySelectorAll('fieldset[data-required-group="true"]').forEach((fs) => {
      const boxes = [...fs.querySelectorAll('input[type=checkbox]')];
      const any = boxes.some((b) => b.checked);
      boxes.forEach((b, i) => b.setCustomValidity(!any && i === 0 ? 'Please tick at least one option.' : ''));
    });
  }
  document.addEventListener('click', (e) => {
    const b = e.target.closest ? e.target.closest('button[type=submit]') : null;
    if (b && inTutorForm(b)) { syncGroups(b.form); }
  }, true);

  // The skip link moves the focus itself: the router would otherwise treat it as a page change.
  document.addEventListener('click', (e) => {
    const link = e.target.closest ? e.target.closest('.skip-link') : null;
    if (!link) { return; }
    e.preventDefault();
    const box = document.getElementById('message');
    if (box) { box.focus(); }
  }, true);

  // An image inside tutor text that fails to load shows its alt text instead.
  document.addEventListener('error', (e) => {
    const el = e.target;
    if (el && el.tagName === 'IMG' && el.closest('.md')) {
      const span = document.createElement('span');
      span.className = 'img-fallback';
      span.textContent = el.alt || 'Image unavailable';
      el.replaceWith(span);
    }
  }, true);
}
"""


def chat_behaviour() -> rx.Component:
    return rx.script(_JS)
