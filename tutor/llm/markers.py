"""Chat-template markers: the one list of the tokens that end (or begin) a turn.

A local model answering without a grammar (the prompt strategy; json_object where the server
does not hold it to a JSON grammar, as llama.cpp's does) sometimes writes its template's
end-of-turn marker as plain text, then goes on with the next turn:
`{...}<|im_end|>\n<|im_start|>user ...`. The server stops only at the marker's special
token, not at the same characters spelled out. So the OpenAI-compatible provider sends the
markers of the template in use as `stop` sequences (`stop_sequences`), and cuts a reply at
the first one if the server went past it anyway (`cut_at_marker`). The content gate
(tutor.llm.usable) strips markers left inside a parsed reply's texts.

Which template: the operator names its family (TUTOR_LLM_CHAT_TEMPLATE, `FAMILIES`), or the
server reveals the template itself (llama.cpp's `GET /props`: `chat_template`, read by
tutor.llm.context) and every marker below that the template spells out is used.
"""

from __future__ import annotations

__all__ = ["END_MARKERS", "FAMILIES", "START_MARKERS", "cut_at_marker", "stop_sequences"]

# Markers that end a turn or the text (ChatML, Gemma, Llama 2 and 3, Phi-3, Mistral, GPT-style).
END_MARKERS = ("<|im_end|>", "<end_of_turn>", "</s>", "<|eot_id|>", "<|endoftext|>", "<eos>", "<|end|>",
               "<|eom_id|>", "[/INST]", "<</SYS>>")
# Markers that open a new turn: a reply that writes one has started on the learner's part.
START_MARKERS = ("<|im_start|>", "<start_of_turn>", "<|start_header_id|>", "[INST]")

# TUTOR_LLM_CHAT_TEMPLATE's names: the stop sequences each family needs ("none": send none).
FAMILIES: dict[str, tuple[str, ...]] = {
    "chatml": ("<|im_end|>", "<|im_start|>", "<|endoftext|>"),  # Qwen, SmolLM, many fine-tunes
    "gemma": ("<end_of_turn>", "<start_of_turn>", "<eos>"),
    "llama3": ("<|eot_id|>", "<|start_header_id|>", "<|eom_id|>"),
    "llama2": ("</s>", "[INST]", "<</SYS>>"),
    "mistral": ("</s>", "[INST]"),
    "phi3": ("<|end|>", "<|endoftext|>", "<|user|>"),
    "none": (),
}


def stop_sequences(template: str | None, eos_token: str | None = None) -> tuple[str, ...]:
    """The markers a chat template spells out (and its end-of-text token, when the server
    names one that looks like a marker), in END_MARKERS then START_MARKERS order."""
    found = [m for m in (*END_MARKERS, *START_MARKERS) if template and m in template]
    if eos_token and eos_token.startswith(("<", "[")) and len(eos_token) <= 24 and eos_token not in found:
        found.append(eos_token)
    return tuple(found)


def cut_at_marker(text: str, markers: tuple[str, ...]) -> str:
    """`text` up to the first of `markers` (unchanged when none occurs): what a server that
    honoured the stop sequences would have sent."""
    if not markers or "<" not in text and "[" not in text:
        return text
    cut = min((i for i in (text.find(m) for m in markers) if i >= 0), default=-1)
    return text if cut < 0 else text[:cut].rstrip()
