"""Chat-template end markers as stop sequences (tutor.llm.markers, tutor.llm.openai): sent when
the server reveals its template (llama.cpp's GET /props) or the operator names it
(TUTOR_LLM_CHAT_TEMPLATE), with the prompt and json_object strategies only (json_object on
llama.cpp has a JSON grammar: none), and a reply cut at the first marker a server wrote
anyway. Against the loopback OpenAI-compatible server."""

from __future__ import annotations

import asyncio

import pytest

from tests.fakes import wire
from tests.fakes.servers import Scripted, settings_for
from tutor.llm import ChatMessage, CompletionRequest, ConfigError, LLMSettings, make_provider
from tutor.llm.context import context_window
from tutor.llm.markers import cut_at_marker, stop_sequences

# The start of Gemma 3's template as llama.cpp's /props shows it.
GEMMA = ("{{ bos_token }}{%- for message in loop_messages -%}{{ '<start_of_turn>' + role + '\\n' + "
         "message['content'] | trim }}{{ '<end_of_turn>\\n' }}{%- endfor -%}"
         "{%- if add_generation_prompt -%}{{'<start_of_turn>model\\n'}}{%- endif -%}")
CHATML = "{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
REPLY = wire.tutor_json("Breathe out slowly.")
RAMBLE = "<end_of_turn>\n<start_of_turn>user\nAnd what about sleep?<end_of_turn>\n<start_of_turn>model\n{}"


def run(server, strategy: str = "json_object", **overrides):
    settings = settings_for(server, strategy=strategy, **overrides)

    async def go():
        provider = make_provider(settings)
        try:
            await context_window(settings, provider.client)  # asked before a turn's calls, as the policy does
            request = CompletionRequest([ChatMessage("system", "s"), ChatMessage("user", "hi")], 0.7, 256, strategy)
            return await provider.complete(request)
        finally:
            await provider.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("strategy", ["prompt", "json_object"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_servers_template_markers_are_sent_as_stop_and_a_reply_is_cut_at_them(openai_server, strategy, stream):
    openai_server.props = {"chat_template": GEMMA}  # a server that reveals its template, not llama.cpp
    # A server that ignores `stop` (or a model that spelled the marker out in pieces).
    text = REPLY + RAMBLE
    if stream:
        openai_server.script(wire.openai_stream(text, pieces=len(text) // 5, finish_reason="length"))
    else:
        openai_server.script(wire.openai_reply(text, finish_reason="length"))
    completion = run(openai_server, strategy, stream=stream)
    assert openai_server.requests[0].json["stop"] == ["<end_of_turn>", "<start_of_turn>"]
    assert completion.text == REPLY and completion.finish_reason == "stop"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_json_object_on_llama_cpp_sends_no_stop_so_a_marker_in_a_string_cannot_end_the_reply(openai_server, stream):
    """llama.cpp holds json_object to a JSON grammar: a marker the model writes can only be in a
    string, and a stop there would leave the JSON unclosed. The reply comes whole."""
    openai_server.props = {"chat_template": GEMMA, "default_generation_settings": {"n_ctx": 8192}}
    text = wire.tutor_json("Breathe out slowly.<start_of_turn>user\nmore")
    reply = wire.openai_stream(text, pieces=len(text) // 5) if stream else wire.openai_reply(text)
    openai_server.script(reply, reply)
    completion = run(openai_server, "json_object", stream=stream)
    assert "stop" not in openai_server.requests[0].json
    assert completion.text == text and completion.finish_reason == "stop"
    run(openai_server, "prompt", stream=stream)  # free text: the same server gets the markers
    assert openai_server.requests[-1].json["stop"] == ["<end_of_turn>", "<start_of_turn>"]


def test_a_marker_split_across_stream_events_still_ends_the_reply(openai_server):
    openai_server.props = {"chat_template": CHATML}
    chunks = wire.openai_stream_chunks(REPLY, pieces=3, finish_reason=None, tokens=None, done=False)
    chunks += wire.openai_stream_chunks("\n<|im", pieces=1, finish_reason=None, tokens=None, done=False)[1:]
    chunks += wire.openai_stream_chunks("_end|>\n<|im_start|>user\nmore", pieces=2)[1:]
    openai_server.script(Scripted(sse_chunks=chunks))
    completion = run(openai_server, stream=True)
    assert openai_server.requests[0].json["stop"] == ["<|im_end|>", "<|im_start|>"]
    assert completion.text == REPLY


def test_json_schema_sends_no_stop_sequences(openai_server):
    openai_server.props = {"chat_template": GEMMA}
    openai_server.script(wire.openai_reply(REPLY))
    run(openai_server, "json_schema")
    assert "stop" not in openai_server.requests[0].json


def test_a_server_that_does_not_say_gets_no_stop_sequences_and_its_text_is_kept(openai_server):
    openai_server.script(wire.openai_reply(REPLY + " <end_of_turn>"))  # no /props: 404
    completion = run(openai_server)
    assert "stop" not in openai_server.requests[0].json
    assert completion.text.endswith("<end_of_turn>")  # the content gate (tutor.llm.usable) deals with it


def test_the_operators_template_family_needs_no_props(openai_server):
    openai_server.props = {"chat_template": GEMMA}  # the operator's word wins
    openai_server.script(wire.openai_reply(REPLY + "<|im_end|>"))
    completion = run(openai_server, chat_template="chatml")
    assert openai_server.requests[0].json["stop"] == ["<|im_end|>", "<|im_start|>", "<|endoftext|>"]
    assert completion.text == REPLY


def test_tutor_llm_chat_template_setting():
    env = {"TUTOR_LLM_PROVIDER": "openai", "TUTOR_LLM_BASE_URL": "http://127.0.0.1:8080/v1", "TUTOR_LLM_MODEL": "m"}
    assert LLMSettings.from_env(env).chat_template is None
    assert LLMSettings.from_env({**env, "TUTOR_LLM_CHAT_TEMPLATE": "Gemma"}).chat_template == "gemma"
    with pytest.raises(ConfigError, match="TUTOR_LLM_CHAT_TEMPLATE='qwen' is not a template family: set"):
        LLMSettings.from_env({**env, "TUTOR_LLM_CHAT_TEMPLATE": "qwen"})


def test_stop_sequences_are_the_markers_a_template_spells_out():
    assert stop_sequences(GEMMA) == ("<end_of_turn>", "<start_of_turn>")
    assert stop_sequences(CHATML, "<|im_end|>") == ("<|im_end|>", "<|im_start|>")
    assert stop_sequences("{{ messages }}", "</s>") == ("</s>",)  # the server's end-of-text token
    assert stop_sequences(None) == () and stop_sequences("", "") == ()


def test_cut_at_marker_keeps_everything_before_the_first_marker():
    assert cut_at_marker('{"a": 1}\n<end_of_turn>\nmore', ("<end_of_turn>",)) == '{"a": 1}'
    assert cut_at_marker('{"a": "x < y [1]"}', ("<end_of_turn>", "[INST]")) == '{"a": "x < y [1]"}'
    assert cut_at_marker("a <|im_start|>b <|im_end|>", ("<|im_end|>", "<|im_start|>")) == "a"
