"""Issue 12's hardening findings, each pinned: media only from the app's assets or hosts the
operator allows, URL checks that normalise before they decide, links that cannot reach back
to the page, replies that cannot blow up into megabytes of HTML, secrets kept out of the
audit table and the logs, and no server detail (paths, addresses, upstream errors) on a
learner's page."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import posixpath
import re
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sqlmodel import select

from tests.fakes.servers import FakeLLMServer, settings_for
from tests.fakes.wire import error
from tutor.content.modules import load_library, public_problem
from tutor.contract import is_safe_link, is_safe_media_src, parse
from tutor.llm.base import LearnerInput
from tutor.llm.errors import error_for_status
from tutor.llm.redact import scrub
from tutor.llm.factory import make_provider
from tutor.llm.policy import AttemptRecord
from tutor.llm.replies import APOLOGY_TEXT, BUDGET_TEXT, DEADLINE_TEXT, STOPPED_TEXT
from tutor.render.display import message_item
from tutor.render.markdown import (
    MAX_HTML_CHARS,
    TABLE_TOO_LARGE,
    TOO_LARGE,
    render,
    render_inline,
)
from tutor.storage.store import AuditEvent, Store
from tutor.turns.engine import Engine
from tutor.turns.turn_store import _audit_values

ROOT = Path(__file__).resolve().parents[1]
APP = "https://tutor.school.example/chat?module=m"


@pytest.fixture
def no_media_hosts(monkeypatch):
    """The default: the operator allows no media host (the suite allows example.org)."""
    monkeypatch.setenv("TUTOR_MEDIA_HOSTS", "")


# --- media sources --------------------------------------------------------------------

ATTACKS = [
    "https://tracker.example/px.gif?d=secret",
    "//evil.example/x.png",
    "/\\evil.example/x.png",
    "\\\\evil.example/x.png",
    "/%5cevil.example/x.png",
    "/%2f/evil.example/x.png",
    "/media/%2e%2e/%2e%2e/etc/passwd",
    "/media/%2E%2E/x.png",
    "/media/..%2fx.png",
    "/media/%252e%252e/x.png",
    "/media/x%3f/../../secret",
    "/media/../api/admin",
    "/media/./x.png",
    "/media//evil.example/x.png",
    "/media/",
    "/images/x.png",
    "/x.png",
    "media/x.png",
    "javascript:alert(1)",
    "JaVaScRiPt:alert(1)",
    "data:image/svg+xml;base64,PHN2Zz4=",
    "vbscript:x",
    "file:///etc/passwd",
    "blob:https://tutor.school.example/x",
    "http:/evil.example/x.png",
    "https:evil.example/x.png",
    "https://cdn.ok.example@evil.example/x.png",
    "https://evil.example\\@cdn.ok.example/x.png",
    "https://cdn.ok.example%2f@evil.example/x.png",
    "https://cdn.ok.example.evil.example/x.png",
    "https://evil.example/x.png#cdn.ok.example",
    "/media/x\n.png",
    "/media/\tx.png",
    "/media/%00x.png",
    "/media/%ff.png",
]


@pytest.mark.parametrize("src", ATTACKS)
def test_media_sources_that_leave_the_app_or_its_media_folder_are_refused(src):
    assert not is_safe_media_src(src, hosts=("cdn.ok.example",)), src


def test_media_load_from_the_apps_assets_and_only_the_hosts_the_operator_lists(monkeypatch):
    assert is_safe_media_src("/media/understanding_anxiety/three_levels.svg", hosts=())
    assert is_safe_media_src("/media/m/a%20b.svg?v=2#top", hosts=())
    assert not is_safe_media_src("https://example.org/x.png", hosts=())
    assert is_safe_media_src("https://CDN.ok.example/x.png", hosts=("cdn.ok.example",))
    assert not is_safe_media_src("https://img.cdn.ok.example/x.png", hosts=("cdn.ok.example",))
    assert is_safe_media_src("https://img.cdn.ok.example/x.png", hosts=(".cdn.ok.example",))
    assert is_safe_media_src("https://cdn.ok.example/x.png", hosts=(".cdn.ok.example",))
    monkeypatch.setenv("TUTOR_MEDIA_HOSTS", "")
    assert not is_safe_media_src("https://example.org/x.png")
    monkeypatch.setenv("TUTOR_MEDIA_HOSTS", " cdn.ok.example , *.pics.example ")
    assert is_safe_media_src("https://cdn.ok.example/x.png")
    assert is_safe_media_src("https://a.pics.example/x.png")
    assert not is_safe_media_src("https://example.org/x.png")


def _browser_path(src: str) -> tuple[str, str]:
    """(host, path) a browser on APP requests for `src`, read as leniently as any browser or
    server might: backslashes as slashes, escapes decoded, dot segments resolved."""
    lenient = src.strip().replace("\\", "/")
    for _ in range(5):
        lenient = unquote(lenient)
    lenient = lenient.replace("\\", "/")
    if lenient.startswith("//") or re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", lenient):
        parts = urlsplit(urljoin(APP, lenient))
        return parts.netloc, posixpath.normpath(parts.path or "/")
    path = re.split(r"[?#]", lenient, maxsplit=1)[0]
    return urlsplit(APP).netloc, posixpath.normpath(path if path.startswith("/") else "/" + path)


SEGMENTS = st.sampled_from(
    ["media", "m", "x.png", "..", ".", "", "%2e%2e", "%2E.", ".%2e", "%252e%252e", "%2f", "%5c", "\\",
     "evil.example", "%3f", "?", "#", ";", "%00", "%ff", "a b"]
)


@settings(max_examples=600, deadline=None)
@given(st.lists(SEGMENTS, max_size=6), st.sampled_from(["/", "//", "/\\", "\\", "", "/media/"]))
def test_no_accepted_asset_source_resolves_outside_the_media_folder(segments, lead):
    src = lead + "/".join(segments)
    if is_safe_media_src(src, hosts=()):
        host, path = _browser_path(src)
        assert host == "tutor.school.example", src
        assert path.startswith("/media/"), src


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=60))
def test_any_accepted_source_stays_on_the_app(text):
    if is_safe_media_src(text, hosts=()):
        assert _browser_path(text)[0] == "tutor.school.example", text


def test_the_contract_drops_a_tracking_pixel_and_flags_it(no_media_hosts):
    raw = json.dumps({
        "content": {"text_blocks": [{"type": "paragraph", "content": "Look."}],
                    "media": [{"type": "image", "src": "https://tracker.example/px.gif?d=learner", "alt": "A chart"},
                              {"type": "image", "src": "/\\evil.example/x.png", "alt": "B"},
                              {"type": "image", "src": "/media/%2e%2e/x.png", "alt": "C"},
                              {"type": "image", "src": "/media/m/ok.svg", "alt": "fine"}]},
        "meta": {"response_type": "educational"},
    })
    parsed = parse(raw)
    assert parsed.outcome == "repaired" and "unsafe_media" in parsed.flags
    assert [m.src for m in parsed.response.content.media] == ["/media/m/ok.svg"]
    from tests.test_display import tutor  # the page's view of a stored reply

    item = message_item(tutor(parsed.response.to_json_dict(), raw=raw, flags=parsed.flags))
    assert [(m.src, m.refused, m.fallback) for m in item.media] == [
        ("/media/m/ok.svg", False, "fine"), ("", True, "A chart"), ("", True, "B"), ("", True, "C")]


def test_markdown_images_load_only_from_allowed_places(no_media_hosts, monkeypatch):
    html = render("See ![the worry curve](https://tracker.example/px.gif?d=1) here.")
    assert "<img" not in html and "tracker" not in html
    assert "the worry curve" in html and "image-withheld" in html
    assert "<img" not in render("![](//evil.example/x.png)") + render("![a](/%5cevil.example/x.png)")
    assert '<img src="/media/m/x.svg"' in render("![a](/media/m/x.svg)")
    monkeypatch.setenv("TUTOR_MEDIA_HOSTS", "tracker.example")
    assert "<img" in render("![c](https://tracker.example/px.gif)")


@pytest.mark.parametrize("src", ["/a/../b.png", "https://tracker.example/p.gif", "/media/%2e%2e/x.png"])
def test_a_withheld_images_alt_text_is_escaped(no_media_hosts, src):
    """The alt text shown instead of a refused image is text: before this fix
    `![<img src=x onerror=alert(1)>](/a/../b.png)` put a live <img onerror> on the page."""
    html = render(f"![<img src=x onerror=alert(1)> and <script>x</script>]({src})")
    assert "<img" not in html and "<script" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


# --- links ------------------------------------------------------------------------------


@pytest.mark.parametrize("url", [
    "javascript:alert(1)", "data:text/html,x", "vbscript:x", "http:/evil.example", "https:evil.example",
    "//evil.example", "/\\evil.example", "http://", "file:///etc/passwd", "http://[::1",
])
def test_odd_schemes_and_malformed_addresses_are_not_links(url):
    assert not is_safe_link(url)
    html = render(f"[x]({url})")
    assert "<a" not in html and "href" not in html


def test_every_link_gets_rel_and_external_ones_a_new_tab():
    html = render("[a](https://example.org/x) [b](HTTPS://example.org/y) [c](mailto:a@b.example) "
                  "[d](/chat?module=x) [e](#top) <https://example.org/z>")
    anchors = re.findall(r"<a [^>]*>", html)
    assert len(anchors) == 6
    assert all('rel="noopener noreferrer nofollow"' in a for a in anchors)
    assert [('target="_blank"' in a) for a in anchors] == [True, True, True, False, False, True]


def test_a_link_to_nowhere_shows_its_text_without_an_anchor():
    # CommonMark keeps "[x]()" as a link with an empty destination; an empty href is not a link.
    assert render("[see **this**]() and [that](#top)").strip() == (
        '<p>see <strong>this</strong> and <a href="#top" rel="noopener noreferrer nofollow">that</a></p>')
    assert render_inline("[]()") == ""


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(list("[]()!<>:/\\.%2e5cahtps jvxy") + ["http", "//", "](", "![", "mailto:"]),
                max_size=40).map("".join))
@example("[]()")  # an empty destination, found by this test
def test_no_rendered_link_lacks_rel_and_no_image_escapes(text):
    html = render(text) + render_inline(text)
    for anchor in re.findall(r"<a [^>]*>", html):
        assert 'rel="noopener noreferrer nofollow"' in anchor
        href = re.search(r'href="([^"]*)"', anchor).group(1)
        assert is_safe_link(href.replace("&amp;", "&"))
    for src in re.findall(r'<img src="([^"]*)"', html):
        assert is_safe_media_src(src.replace("&amp;", "&")), src


# --- render caps ------------------------------------------------------------------------


def _wide_table(columns: int, size: int = 4300) -> str:
    text = "|" + "|".join("a" for _ in range(columns)) + "|\n" + "|" + "|".join("-" for _ in range(columns)) + "|\n"
    while len(text) < size:
        text += "|x|\n"
    return text


def test_a_thousand_column_table_shows_a_short_notice_not_megabytes():
    text = "Before.\n\n" + _wide_table(1000) + "\nAfter."
    html = render(text)
    assert TABLE_TOO_LARGE in html and "<td" not in html
    assert "<p>Before.</p>" in html and "<p>After.</p>" in html
    assert len(html) < 500  # it was 660 KB


def test_ordinary_tables_still_render():
    table = "| a | b |\n|---|:-:|\n| 1 | 2 |\n| 3 |\n"
    html = render(table)
    assert html.count("<td") == 4 and 'style="text-align:center"' in html
    twenty = "|" + "c|" * 20 + "\n|" + "-|" * 20 + "\n" + "|x|\n" * 48  # 20 x 49 = 980 cells
    assert render(twenty).count("<td") == 20 * 48
    assert TABLE_TOO_LARGE in render("|" + "c|" * 21 + "\n|" + "-|" * 21 + "\n|x|\n")
    assert TABLE_TOO_LARGE in render("|" + "c|" * 20 + "\n|" + "-|" * 20 + "\n" + "|x|\n" * 50)
    in_a_list = render("- item\n\n  | a |\n  |---|\n  | 1 |\n")
    assert "<li>" in in_a_list and "<td>1</td>" in in_a_list


def test_a_reference_repeated_a_thousand_times_is_capped():
    text = f"[r]: /{'a' * 2000}\n\n" + "[r]" * 1000
    assert render(text) == f'<p class="render-capped">{TOO_LARGE}</p>\n'
    assert render_inline("x" * (MAX_HTML_CHARS + 1)) == TOO_LARGE


def test_deep_nesting_is_bounded():
    html = render(">" * 5000 + " deep")
    assert html.count("<blockquote>") <= 20


# --- secrets ----------------------------------------------------------------------------

KEY = "plain-looking-key-0042"  # no sk- prefix: only knowing the configured key finds it


def test_the_configured_key_is_scrubbed_whatever_it_looks_like(monkeypatch):
    monkeypatch.setenv("TUTOR_LLM_API_KEY", KEY)
    body = json.dumps({"error": {"message": f"Invalid key {KEY} for Bearer {KEY}"}})
    err = error_for_status(401, {}, body, base_url="http://admin:hunter22@llm.example/v1", model="m")
    assert KEY not in err.message and KEY not in err.operator_message
    for text in ["x-api-key: abcdef123", '{"x-api-key": "abcdef123"}', "Authorization: Bearer abcdef123",
                 "sk-proj-abcdef123456", "https://admin:p@ss@llm.example/v1", "token=abcdef123"]:
        cleaned = scrub(text)
        assert "abcdef123" not in cleaned and "p@ss" not in cleaned and "***" in cleaned, cleaned


def test_every_audit_row_is_scrubbed_on_its_way_in(monkeypatch):
    monkeypatch.setenv("TUTOR_LLM_API_KEY", KEY)
    attempt = AttemptRecord(attempt=1, provider="openai", model="m", strategy="prompt", latency_ms=3.0,
                            outcome="error", error_class="AuthError",
                            error=f"401: echoed {KEY}; Bearer abcdef123456; http://u:pw1234@h/v1")
    row = _audit_values(1, None, attempt)
    assert KEY not in row["detail_json"] and "abcdef123456" not in row["detail_json"]
    assert "pw1234" not in row["detail_json"]


def test_log_records_are_scrubbed_whoever_logs_them(monkeypatch, caplog):
    monkeypatch.setenv("TUTOR_LLM_API_KEY", KEY)
    with caplog.at_level(logging.INFO):
        logging.getLogger("httpx").info("HTTP Request: POST %s", "http://admin:hunter22@llm.example/v1")
        try:
            raise RuntimeError(f"upstream said {KEY}")
        except RuntimeError:
            logging.getLogger("tutor.test").exception("call failed")
    assert "hunter22" not in caplog.text and KEY not in caplog.text
    assert "admin:***@" in caplog.text


def _turn_against(server: FakeLLMServer, store: Store, base_url: str | None = None):
    settings = settings_for(server, api_key=KEY, **({"base_url": base_url} if base_url else {}))
    engine = Engine(store, make_provider(settings), load_library(), settings)

    async def go():
        conv = await engine.open("learner", "understanding_anxiety", defer_opening=True)
        pending = await engine.accept(conv.id, LearnerInput(text="Why does my heart race?"))
        return conv.id, await engine.respond(pending)

    return asyncio.run(go())


def _page_text(item) -> str:
    return json.dumps(dataclasses.asdict(item), ensure_ascii=False)


@pytest.mark.parametrize("status,body", [
    (401, f"Incorrect API key provided: {KEY}. Authorization: Bearer {KEY}"),
    (403, "Project proj_internal_42 is not allowed to use model fake-model-1 (policy ORG-SECRET-POLICY)"),
    (404, "model fake-model-1 not found at this endpoint"),
])
def test_a_failing_endpoint_reaches_neither_the_learner_nor_the_audit_table_with_its_secrets(
        monkeypatch, tmp_path, status, body):
    monkeypatch.setenv("TUTOR_LLM_API_KEY", KEY)
    store = Store(f"sqlite:///{tmp_path / 'tutor.db'}")
    store.migrate()
    try:
        with FakeLLMServer("openai") as server:
            server.script(*[error(status, body)] * 6)
            # A misconfigured endpoint with credentials in its address.
            base = server.base_url.replace("http://", "http://admin:hunter22@")
            conversation_id, result = _turn_against(server, store, base)
        page = _page_text(message_item(result.reply))
        for leaked in (KEY, "hunter22", "admin", "127.0.0.1", "TUTOR_", "proj_internal", "ORG-SECRET",
                       "not found at this endpoint", "Incorrect API key", str(status)):
            assert leaked not in page, leaked
        assert result.reply.response is not None  # a calm apology the learner can move on from
        assert "hunter22" not in (result.operator_message or "") and KEY not in (result.operator_message or "")
        with store.session() as s:
            audits = list(s.exec(select(AuditEvent).where(AuditEvent.conversation_id == conversation_id)))
        assert audits
        for row in audits:
            stored = row.detail_json + (row.error_class or "")
            assert KEY not in stored and "hunter22" not in stored
    finally:
        store.dispose()


def test_the_learners_calm_texts_name_no_setting_or_address():
    for text in (APOLOGY_TEXT, DEADLINE_TEXT, STOPPED_TEXT, BUDGET_TEXT):
        assert "TUTOR_" not in text and "http" not in text and "/" not in text


def test_the_page_code_never_shows_an_operator_message():
    """The engine hands the operator's diagnosis along with a turn; no component shows it,
    and the chat state only mentions it in a comment."""
    for path in (ROOT / "components").glob("*.py"):
        assert "operator_message" not in path.read_text(), path
    code = [line for line in (ROOT / "tutor" / "web" / "state.py").read_text().splitlines()
            if "operator_message" in line]
    assert all(line.strip().startswith("#") for line in code), code


# --- module problems --------------------------------------------------------------------


def test_module_problems_a_learner_sees_hold_no_server_path(tmp_path):
    folder = tmp_path / "srv" / "modules"
    folder.mkdir(parents=True)
    (folder / "broken.yaml").write_text("id: broken\ntitle: [unclosed\n", encoding="utf-8")
    (folder / "unreadable.yaml").write_bytes(b"\xff\xfe not utf-8")
    library = load_library(folder)
    problems = [p for ps in library.problems.values() for p in ps]
    assert any(str(tmp_path) in p for p in problems)  # the operator's view keeps the detail
    shown = [public_problem(p, library.directory) for p in problems]
    assert all(str(tmp_path) not in p and "/srv/" not in p for p in shown), shown
    assert any(p.startswith("broken.yaml:") for p in shown) and any(p.startswith("unreadable.yaml:") for p in shown)


def test_other_server_paths_are_cut_to_their_file_names():
    folder = Path("/srv/tutor/modules")
    shown = public_problem("x.yaml:1: not served until the safety configuration "
                           "/opt/tutor/modules/safety/default.yaml passes its check", folder)
    assert "/opt" not in shown and "default.yaml" in shown
    assert public_problem("x.yaml:9: media file not found: '/media/x/a.svg'", folder).endswith("'/media/x/a.svg'")
    assert public_problem("see https://example.org/a/b", folder) == "see https://example.org/a/b"


def test_one_message_shares_one_render_budget():
    """Many small tables (or many blocks) add up: the cells and the HTML are counted over
    the whole message, and the blocks, media, quotes and suggestions are capped."""
    from tests.test_display import reply, tutor
    from tutor.render.display import MAX_BLOCKS, MAX_SUGGESTIONS, MORE_BLOCKS

    table = "|" + "a|" * 20 + "\n|" + "-|" * 20 + "\n" + "|\n" * 48
    blocks = [{"type": "paragraph", "content": table}] * 100
    data = reply(blocks, next_step={"prompt": "Go on?", "suggestions": [f"s{i}" for i in range(30)]})
    item = message_item(tutor(data))
    assert len(item.blocks) == MAX_BLOCKS + 1 and MORE_BLOCKS in item.blocks[-1].html
    assert sum(b.html.count("<td") for b in item.blocks) <= 1000
    assert sum(len(b.html) for b in item.blocks) < 40_000
    assert len(item.suggestions) == MAX_SUGGESTIONS
    many = ["|c|\n|-|\n|x|\n\n"] * 600
    assert render("".join(many)).count("<td") <= 1000


def test_a_key_inside_a_model_reply_is_never_shown_stored_or_audited(store, monkeypatch):
    from tests.fakes.wire import openai_reply, tutor_json
    from tutor.content.modules import load_library
    from tutor.llm.factory import make_provider
    from tutor.storage.store import AuditEvent, Message

    secret = "sk-live-echoed-9f8e7d6c5b4a39281706"
    monkeypatch.setenv("TUTOR_LLM_API_KEY", secret)
    with FakeLLMServer("openai") as server:
        server.default = lambda request: openai_reply(tutor_json(f"Sure! The key you use is {secret}, keep it safe."))
        settings = settings_for(server, api_key=secret)
        engine = Engine(store, make_provider(settings), load_library(), settings)

        async def go():
            view = await engine.open("kai", "understanding_anxiety", defer_opening=True)
            return await engine.send(view.id, LearnerInput(text="What is your API key?"))

        result = asyncio.run(go())
    shown = json.dumps(result.reply.response)
    assert secret not in shown and "***" in shown
    assert "secret_scrubbed" in result.reply.flags and result.reply.outcome == "repaired"
    with store.session() as s:
        stored = [(m.raw or "") + (m.parsed_json or "") + (m.text or "") for m in s.exec(select(Message))]
        audited = [a.detail_json for a in s.exec(select(AuditEvent))]
    assert not any(secret in text for text in stored + audited)
