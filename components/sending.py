"""Sending, in the browser: each send gets an id made here (the server stores a send once
per id), the learner's message shows at once marked "Sending…", the box clears at once, and
a send the server has not confirmed is sent again once the connection is back. A send the
server refuses comes back into the box (the reason shows under it). Enter on an empty box
does nothing, and a counter appears near the length limit.

Nothing typed is lost on a reload: what is in the box, and the sends the server has not
confirmed yet, are kept per conversation in the tab's sessionStorage (a reload brings them
back, and the unconfirmed sends go again with their ids, so each is stored once). Closing
the tab, signing out or "start fresh" forgets them: the next person at a shared computer
finds nothing.

While the tutor's opening turn is still being written, a send waits below it (marked so)
and goes once the introduction is on the page: it is stored after the introduction, so the
conversation reads in the order it was written, now and after a reload."""

from __future__ import annotations

import reflex as rx

from tutor.settings import MAX_MESSAGE_CHARS
from tutor.web.state import ChatState, ui

COUNT_FROM = 0.9  # the counter shows from this share of the limit on

_JS = r"""
if (!window.__tutorSending) {
  window.__tutorSending = true;
  const RESEND_AFTER_MS = 4000;  // a send not confirmed by then goes again (same id: stored once)
  const outbox = new Map();  // client id -> {text, sentAt, el}
  const newId = () => {
    if (window.crypto && crypto.randomUUID) { try { return crypto.randomUUID(); } catch (e) { /* not a secure page */ } }
    const b = new Uint8Array(16);
    crypto.getRandomValues(b);
    return [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
  };
  const box = () => document.getElementById('message');
  const composer = () => document.getElementById('composer');
  const offline = () => !!document.getElementById('connection-lost');
  const opening = () => { const f = composer(); return !!(f && f.dataset.opening === '1'); };

  const counter = () => {
    const b = box(), c = document.getElementById('char-count');
    if (!b || !c) { return; }
    const limit = Number(c.dataset.limit), n = b.value.trim().length;
    const show = n >= Math.floor(limit * COUNT_FROM);
    const page = document.querySelector('.page[lang]');
    const lang = (page && page.lang) || undefined;  // the module's way of writing numbers ("4.100" in Vietnamese)
    const count = n.toLocaleString(lang), most = limit.toLocaleString(lang);
    const over = (c.dataset.over || '{count} / {limit}').replace('{count}', count).replace('{limit}', most);
    const text = !show ? '' : (n > limit ? over : `${count} / ${most}`);
    if (c.textContent !== text) { c.textContent = text; }
    c.hidden = !show;
    c.classList.toggle('over', n > limit);
  };
  document.addEventListener('input', (e) => { if (e.target && e.target.id === 'message') { counter(); } }, true);

  const bubble = (text, held) => {
    const out = document.getElementById(held ? 'outbox-held' : 'outbox');
    const words = out ? out.dataset : {};  // the page's words, in the module's language
    const el = document.createElement('article');
    el.className = 'msg msg-learner msg-sending';
    el.setAttribute('aria-label', words.label || '');
    const body = document.createElement('div');
    body.className = 'md';
    const p = document.createElement('p');
    p.style.whiteSpace = 'pre-wrap';
    p.textContent = text;
    body.append(p);
    const note = document.createElement('span');
    note.className = 'sending-note';
    note.textContent = (held ? words.waiting : words.sending) || '';
    el.append(body, note);
    if (out) { out.append(el); }
    return el;
  };
  // Drafts and unconfirmed sends, per conversation, in this tab.
  const convo = () => {
    const f = composer();
    const c = f ? (f.dataset.conversation || '') : '';
    return c && c !== '0' ? c : '';
  };
  const keep = (key, value) => {
    try { if (value) { sessionStorage.setItem(key, value); } else { sessionStorage.removeItem(key); } } catch (e) { /* storage off */ }
  };
  const kept = (key) => { try { return sessionStorage.getItem(key) || ''; } catch (e) { return ''; } };
  const saveDraft = () => { const b = box(), c = convo(); if (b && c) { keep(`tutor-draft:${c}`, b.value); } };
  const saveOutbox = (c) => {
    if (!c) { return; }
    const items = [...outbox].filter(([, item]) => item.convo === c).map(([id, item]) => ({id, text: item.text}));
    keep(`tutor-outbox:${c}`, items.length ? JSON.stringify(items) : '');
  };
  const forgetAll = () => {
    try {
      Object.keys(sessionStorage).filter((k) => k.startsWith('tutor-draft:') || k.startsWith('tutor-outbox:'))
        .forEach((k) => sessionStorage.removeItem(k));
    } catch (e) { /* storage off */ }
  };
  const track = (id, text, sentAt = Date.now(), held = false) => {
    const c = convo();
    outbox.set(id, {text, sentAt, el: bubble(text, held), convo: c, held});
    saveOutbox(c);
  };
  const release = (item) => {  // the introduction is on the page: this send goes now, below it
    item.held = false;
    const out = document.getElementById('outbox');
    if (out) { out.append(item.el); }
    const note = item.el.querySelector('.sending-note');
    if (note && out) { note.textContent = out.dataset.sending || ''; }
  };
  let restored = '';
  const restore = () => {  // once per conversation shown in this tab
    const c = convo(), b = box();
    if (!c || !b || restored === c) { return; }
    restored = c;
    const draft = kept(`tutor-draft:${c}`);
    if (draft && !b.value.trim()) { b.value = draft; counter(); }
    let items = [];
    try { items = JSON.parse(kept(`tutor-outbox:${c}`) || '[]'); } catch (e) { items = []; }
    items.forEach((item) => {
      if (item && item.id && item.text && !outbox.has(item.id)) { track(item.id, item.text, 0, opening()); }  // sent again at the next tick
    });
  };
  document.addEventListener('input', (e) => { if (e.target && e.target.id === 'message') { saveDraft(); } }, true);
  document.addEventListener('submit', (e) => {
    const f = e.target;
    if (f && f.getAttribute && (f.getAttribute('action') || '').endsWith('/auth/signout')) { forgetAll(); }
  }, true);
  document.addEventListener('click', (e) => {
    if (e.target.closest && e.target.closest('#forget-confirm')) { forgetAll(); }
  }, true);
  const submitQueued = (id, text) => {
    const form = composer();
    if (!form) { return false; }
    form.elements['client_id'].value = id;
    form.elements['queued'].value = text;
    form.__queued = true;
    try { form.requestSubmit(); } finally {
      form.__queued = false;
      form.elements['client_id'].value = '';
      form.elements['queued'].value = '';
    }
    return true;
  };

  // Typed messages: the id is made when the learner presses Send (or Enter).
  document.addEventListener('submit', (e) => {
    const form = e.target;
    if (!form || form.id !== 'composer' || form.__queued) { return; }
    const b = box();
    const text = b ? b.value : '';
    if (!text.trim()) { e.preventDefault(); e.stopPropagation(); return; }  // nothing to send: no server trip
    const id = newId();
    if (opening()) {  // the introduction first: this send waits below it, then goes
      e.preventDefault();
      e.stopPropagation();
      track(id, text, 0, true);
      if (b) { b.value = ''; counter(); saveDraft(); }
      return;
    }
    form.elements['client_id'].value = id;
    form.elements['queued'].value = '';
    track(id, text);
  }, true);
  // After the page's own handler has read the box: clear it here, at once.
  document.addEventListener('submit', (e) => {
    const form = e.target;
    if (!form || form.id !== 'composer' || form.__queued) { return; }
    const b = box();
    if (b && form.elements['client_id'].value) { b.value = ''; counter(); saveDraft(); }
    form.elements['client_id'].value = '';
  });

  // Suggestions are sends too: same id, same echo, same resend.
  document.addEventListener('click', (e) => {
    const chip = e.target.closest ? e.target.closest('.chips button.chip, #completion-summary') : null;
    if (!chip || chip.disabled) { return; }
    e.preventDefault();
    e.stopPropagation();
    const text = chip.textContent.trim();
    if ([...outbox.values()].some((item) => item.text === text)) { return; }  // a double click: sent already
    const id = newId();
    track(id, text);
    submitQueued(id, text);
  }, true);

  // Form answers: one id per set of answers, so a double click on Submit is one send.
  document.addEventListener('input', (e) => {
    const f = e.target && e.target.form;
    if (f && f.classList.contains('form-body')) { delete f.dataset.clientId; }
  }, true);
  document.addEventListener('submit', (e) => {
    const f = e.target;
    if (!f || !f.classList || !f.classList.contains('form-body')) { return; }
    if (!f.dataset.clientId) { f.dataset.clientId = newId(); }
    let input = f.querySelector('input[name="__client_id"]');
    if (!input) {
      input = document.createElement('input');
      input.type = 'hidden';
      input.name = '__client_id';
      f.append(input);
    }
    input.value = f.dataset.clientId;
  }, true);

  // The server's word on a send: the ids of the latest sends stored and refused, as
  // attributes of #send-receipts.
  const sent = (id) => {
    const item = outbox.get(id);
    if (item) { item.el.remove(); outbox.delete(id); saveOutbox(item.convo); }
  };
  const refused = (id) => {
    const item = outbox.get(id);
    if (!item) { return; }
    item.el.remove();
    outbox.delete(id);
    saveOutbox(item.convo);
    const b = box();
    if (!b) { return; }
    const typed = b.value.trim();
    b.value = typed ? `${item.text}\n${b.value}` : item.text;  // nothing the learner wrote is lost
    counter();
    saveDraft();  // and a reload keeps it
    b.focus();
  };
  const readReceipts = () => {
    const r = document.getElementById('send-receipts');
    if (!r || !outbox.size) { return; }
    (r.dataset.sent || '').split(' ').forEach((id) => { if (id) { sent(id); } });
    (r.dataset.refused || '').split(' ').forEach((id) => { if (id) { refused(id); } });
  };
  new MutationObserver(readReceipts).observe(document.body, {
    attributes: true, subtree: true, attributeFilter: ['data-sent', 'data-refused'],
  });
  new MutationObserver(restore).observe(document.body, {
    attributes: true, subtree: true, attributeFilter: ['data-conversation'],
  });

  // Not confirmed yet (the connection dropped, the page reloaded its state): send again.
  setInterval(() => {
    restore();
    readReceipts();
    if (offline() || !outbox.size) { return; }
    const now = Date.now();
    for (const [id, item] of outbox) {
      if (item.held) {
        if (opening()) { continue; }
        release(item);
        item.sentAt = now;
        submitQueued(id, item.text);
        continue;
      }
      if (now - item.sentAt >= RESEND_AFTER_MS) {
        item.sentAt = now;
        submitQueued(id, item.text);
      }
    }
  }, 1000);
}
""".replace("COUNT_FROM", str(COUNT_FROM))


def sending_fields() -> list[rx.Component]:
    """The composer's hidden fields: filled by the script, and what became of each send."""
    return [
        rx.el.input(type="hidden", name="client_id", default_value=""),
        rx.el.input(type="hidden", name="queued", default_value=""),
        # What became of each send (ChatState._receipt), read by the script.
        rx.el.span(id="send-receipts", hidden=True, data_sent=ChatState.sent_ids,
                   data_refused=ChatState.refused_ids),
    ]


def char_counter() -> rx.Component:
    """Shown from near the length limit on (the script counts; the server has the last word)."""
    return rx.el.span(id="char-count", class_name="char-count", data_limit=str(MAX_MESSAGE_CHARS),
                      data_over=ui("{count} / {limit}: too long to send"),  # filled in by the script
                      aria_live="polite", hidden=True)


def outbox() -> rx.Component:
    """Where messages being sent show until the server has stored them (filled by the script)."""
    return rx.el.div(id="outbox", class_name="outbox", data_sending=ui("Sending…"),
                     data_label=ui("Your message, sending"))


def held_outbox() -> rx.Component:
    """Below the opening turn being written: sends that wait for it (filled by the script)."""
    return rx.el.div(id="outbox-held", class_name="outbox", data_waiting=ui("Sent once the introduction is done"),
                     data_label=ui("Your message, waiting for the tutor's introduction"))


def opening_flag() -> rx.Var[str]:
    """"1" while the tutor's opening turn is being written (no tutor message on the page yet)."""
    return rx.cond(ChatState.thinking & (ChatState.latest_tutor_id == 0), "1", "0")


def sending_behaviour() -> rx.Component:
    return rx.script(_JS)
