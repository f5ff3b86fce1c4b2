"""Sending, as a learner sees it: one send is one turn (a double click, a double Enter, a
resend after the connection came back), the message shows at once and the box clears
before the server answers, a lost connection is told calmly and a message sent meanwhile
goes once it is back, and a refused message comes back into the box with its reason. The
connection is cut in the browser itself: Playwright holds what the page sends on its event
socket, or takes the browser offline and closes the socket as a dropped network does.
Also: the app starts cleanly, on 127.0.0.1, with a favicon, and stops quietly."""

from __future__ import annotations

import re
import socket
import subprocess
import urllib.request

from playwright.sync_api import Page, WebSocketRoute, expect

from tests.browser.app_runner import RunningApp
from tests.browser.helpers import Network, db_rows, open_module
from tutor.settings import MAX_MESSAGE_CHARS

EVENT_SOCKET = re.compile(r".*/_event.*")


class SocketGate:
    """The page's event socket, passed through Playwright: `held` keeps what the page sends
    from the server for now."""

    def __init__(self, page: Page) -> None:
        self.held = False
        self.buffer: list[tuple[WebSocketRoute, str | bytes]] = []
        self.sent: list[str] = []  # what the page sent, as text
        page.route_web_socket(EVENT_SOCKET, self._route)

    def _route(self, ws: WebSocketRoute) -> None:
        server = ws.connect_to_server()

        def to_server(message: str | bytes) -> None:
            self.sent.append(message if isinstance(message, str) else message.decode(errors="replace"))
            if self.held:
                self.buffer.append((server, message))
            else:
                server.send(message)

        ws.on_message(to_server)

    def release(self) -> None:
        self.held = False
        buffered, self.buffer = self.buffer, []
        for server, message in buffered:
            server.send(message)

    def sends(self) -> int:
        return sum("send_text" in m for m in self.sent)


def _mine(page: Page) -> str:
    """This page's learner (the app is shared by the session's tests: count only theirs)."""
    return page.evaluate("() => window.localStorage.getItem('tutor_learner')")


def learner_rows(app: RunningApp, page: Page, text: str) -> int:
    return db_rows(app.db_path, "select count(*) from message m join conversation c on c.id = m.conversation_id "
                                "join learner l on l.id = c.learner_id where m.role='learner' and m.text=? and l.key=?",
                   text, _mine(page))[0][0]


def replies_to(app: RunningApp, page: Page, text: str) -> int:
    return db_rows(app.db_path, "select count(*) from message t join message m on t.conversation_id = m.conversation_id "
                                "and t.reply_to_seq = m.seq join conversation c on c.id = m.conversation_id "
                                "join learner l on l.id = c.learner_id where t.role='tutor' and m.text=? and l.key=?",
                   text, _mine(page))[0][0]


def wait_idle(page: Page) -> None:
    expect(page.locator("#typing")).to_have_count(0)
    expect(page.locator("#streaming-reply")).to_have_count(0)


def wait_for_reply(page: Page, tutor_before: int) -> None:
    expect(page.locator(".msg-tutor")).to_have_count(tutor_before + 1)
    wait_idle(page)


def shown(page: Page, text: str) -> int:
    return sum(" ".join(t.split()) == text for t in page.locator(".msg-learner:not(.msg-sending)").all_text_contents())


def test_double_click_and_double_enter_send_once(page: Page, app: RunningApp):
    open_module(page, app.url)
    box = page.locator("#message")
    for text, how in [("What is the fight or flight response?", "click"), ("Tell me about avoidance", "enter")]:
        tutor_before = page.locator(".msg-tutor").count()
        box.fill(text)
        if how == "click":
            page.locator("#send").dblclick()
        else:
            box.press("Enter")
            box.press("Enter")
        wait_for_reply(page, tutor_before)
        page.wait_for_timeout(1500)  # time for a second turn, if there were one
        wait_idle(page)
        assert learner_rows(app, page, text) == 1 and replies_to(app, page, text) == 1
        assert shown(page, text) == 1
        expect(page.locator(".msg-tutor")).to_have_count(tutor_before + 1)
    chip = page.locator(".msg-tutor").last.locator(".chips button.chip").first  # a suggestion, double-clicked
    suggestion = " ".join(chip.inner_text().split())
    tutor_before = page.locator(".msg-tutor").count()
    chip.dblclick()
    wait_for_reply(page, tutor_before)
    page.wait_for_timeout(1500)
    wait_idle(page)
    assert learner_rows(app, page, suggestion) == 1 and replies_to(app, page, suggestion) == 1
    page.reload()
    page.locator(".msg-tutor").first.wait_for()
    wait_idle(page)
    for text in ("What is the fight or flight response?", "Tell me about avoidance", suggestion):
        assert shown(page, text) == 1, text


def test_the_message_shows_at_once_and_the_box_clears_before_the_server_answers(page: Page, app: RunningApp):
    gate = SocketGate(page)
    open_module(page, app.url)
    box = page.locator("#message")
    text = "Why does my heart race?"
    gate.held = True  # nothing the page sends reaches the server yet
    tutor_before = page.locator(".msg-tutor").count()
    box.fill(text)
    box.press("Enter")
    sending = page.locator(".msg-sending")
    expect(sending).to_have_count(1)
    expect(sending).to_contain_text(text)
    expect(sending).to_contain_text("Sending…")
    expect(box).to_have_value("")
    assert learner_rows(app, page, text) == 0  # the server has not seen it: all of that was the browser
    box.fill("my next thought")  # typing on meanwhile is safe: no server event clears the box
    gate.release()
    wait_for_reply(page, tutor_before)
    expect(sending).to_have_count(0)
    assert shown(page, text) == 1 and learner_rows(app, page, text) == 1
    expect(box).to_have_value("my next thought")

    before = gate.sends()
    box.fill("   ")
    box.press("Enter")  # an empty box: nothing happens, no server trip
    page.wait_for_timeout(500)
    assert gate.sends() == before
    expect(page.locator(".msg-sending")).to_have_count(0)


def test_a_lost_connection_is_told_calmly_and_a_message_sent_meanwhile_goes_once(page: Page, app: RunningApp):
    network = Network(page)
    open_module(page, app.url)
    box = page.locator("#message")
    network.go_offline()
    banner = page.locator("#connection-lost")
    expect(banner).to_have_text("Connection lost — reconnecting… Your message is kept.")
    expect(page.get_by_text("Cannot connect to server")).to_have_count(0)
    expect(page.locator("body")).not_to_contain_text("ws://")

    text = "What are the three levels of anxiety?"
    tutor_before = page.locator(".msg-tutor").count()
    box.fill(text)
    box.press("Enter")
    expect(page.locator(".msg-sending")).to_contain_text(text)  # kept, in the browser
    box.fill("a draft I keep")
    page.wait_for_timeout(5000)  # past the resend interval: still offline, nothing sent
    assert learner_rows(app, page, text) == 0

    network.go_online()
    expect(banner).to_have_count(0, timeout=20_000)
    wait_for_reply(page, tutor_before)
    expect(page.locator(".msg-sending")).to_have_count(0, timeout=15_000)
    page.wait_for_timeout(5000)  # a resend after the reconnect must not make a second turn
    wait_idle(page)
    assert learner_rows(app, page, text) == 1 and replies_to(app, page, text) == 1
    assert shown(page, text) == 1
    expect(box).to_have_value("a draft I keep")


def test_a_message_sent_while_the_server_restarts_goes_once_it_is_back(page: Page, app: RunningApp):
    # The tab's state lived in the old process; the new one opens the conversation again.
    open_module(page, app.url)
    box = page.locator("#message")
    app.stop()
    expect(page.locator("#connection-lost")).to_be_visible(timeout=20_000)
    text = "How do I know if my anxiety is a disorder?"
    tutor_before = page.locator(".msg-tutor").count()
    box.fill(text)
    box.press("Enter")
    expect(page.locator(".msg-sending")).to_contain_text(text)
    app.start()
    expect(page.locator("#connection-lost")).to_have_count(0, timeout=30_000)
    wait_for_reply(page, tutor_before)
    expect(page.locator(".msg-sending")).to_have_count(0, timeout=15_000)
    page.wait_for_timeout(5000)
    wait_idle(page)
    assert learner_rows(app, page, text) == 1 and replies_to(app, page, text) == 1
    assert shown(page, text) == 1


def test_a_refused_message_comes_back_into_the_box_with_the_reason(page: Page, app: RunningApp):
    open_module(page, app.url)
    box = page.locator("#message")
    counter = page.locator("#char-count")
    box.fill("x" * 100)
    expect(counter).to_be_hidden()
    near = "y" * (MAX_MESSAGE_CHARS - 10)
    box.fill(near)
    expect(counter).to_have_text(f"{MAX_MESSAGE_CHARS - 10:,} / {MAX_MESSAGE_CHARS:,}")
    long = "z" * (MAX_MESSAGE_CHARS + 1)
    box.fill(long)
    expect(counter).to_contain_text("too long to send")
    learners = page.locator(".msg-learner").count()
    box.press("Enter")
    expect(page.locator("#composer-help")).to_contain_text(f"the limit is {MAX_MESSAGE_CHARS}")
    expect(box).to_have_value(long)
    expect(page.locator(".msg-sending")).to_have_count(0)
    expect(page.locator(".msg-learner")).to_have_count(learners)
    assert learner_rows(app, page, long) == 0


def test_the_app_starts_cleanly_on_loopback_with_a_favicon_and_stops_quietly(app: RunningApp):
    with urllib.request.urlopen(app.url + "/favicon.ico", timeout=5) as r:
        assert r.status == 200 and r.read(4) == b"\x00\x00\x01\x00"  # an ICO file
    log = app.log_path.read_text(errors="replace")
    assert f"App running at: http://127.0.0.1:{app.port}" in log, log
    for noise in ("Warning", "WARNING", "SAWarning", "already exists", "uv run reflex run", "0.0.0.0",
                  "Traceback", "Failed to connect"):
        assert noise not in log, f"{noise!r} in the start-up output:\n{log}"
    # Not reachable from other machines: nothing listens on this machine's other addresses.
    addresses = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()
    for address in [a for a in addresses if ":" not in a and not a.startswith("127.")][:2]:
        with socket.socket() as s:
            s.settimeout(2)
            assert s.connect_ex((address, app.port)) != 0, f"the app answers on {address}"
    size = len(log)
    app.stop()  # SIGTERM, as a service manager stops it (the next test starts it again)
    tail = app.log_path.read_text(errors="replace")[size:]
    assert "panic" not in tail.lower() and "Traceback" not in tail, tail


def test_a_draft_survives_a_reload_and_is_gone_once_sent(page: Page, app: RunningApp):
    open_module(page, app.url)
    box = page.locator("#message")
    box.fill("Half a thought about my racing heart")
    page.reload()
    expect(box).to_have_value("Half a thought about my racing heart", timeout=15_000)
    box.press("Enter")
    expect(page.locator(".msg-learner").last).to_contain_text("Half a thought about my racing heart")
    expect(page.locator(".msg-sending")).to_have_count(0)
    page.reload()
    expect(page.locator(".msg-learner").last).to_contain_text("Half a thought about my racing heart", timeout=15_000)
    page.wait_for_timeout(1500)  # the page restores drafts within a second
    expect(box).to_have_value("")
    assert learner_rows(app, page, "Half a thought about my racing heart") == 1


def test_a_send_cut_off_by_a_reload_goes_once_after_it(page: Page, app: RunningApp):
    gate = SocketGate(page)
    open_module(page, app.url)
    text = "Does a reload lose what I just sent?"
    gate.held = True  # the server never hears this send
    page.locator("#message").fill(text)
    page.locator("#message").press("Enter")
    expect(page.locator(".msg-sending")).to_contain_text(text)
    assert gate.buffer, "the send was held back"
    gate.buffer.clear()
    gate.held = False
    page.reload()  # the held send dies with the old page
    expect(page.locator(".msg-learner:not(.msg-sending)").last).to_contain_text(text, timeout=20_000)
    expect(page.locator(".msg-sending")).to_have_count(0, timeout=10_000)
    wait_idle(page)
    assert learner_rows(app, page, text) == 1 and replies_to(app, page, text) == 1
