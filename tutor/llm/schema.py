"""RESPONSE_SCHEMA as JSON Schema, adapted to what provider-side enforcement accepts.

OpenAI's strict `json_schema` mode (and servers imitating it) accepts a subset of JSON
Schema: every object closed (`additionalProperties: false`), every property listed in
`required` (optional ones become nullable instead), no `default`, and only a few keywords.
Constraints we drop here (patterns, bounds) are still enforced when the reply is parsed,
so nothing is lost: the provider guarantees the shape, the contract checks the rest. The
rewriting itself, which knows nothing of the reply, is in tutor.llm.strict_mode.

Bounded schemas (`bounded_schema`, `response_schema`)
-----------------------------------------------------
A server that turns the schema into a decoding grammar (llama.cpp's `llama-server`,
Ollama, vLLM, ...) lets a small model write a valid-looking reply forever: an unbounded
array of text blocks, or an unbounded string, never has to end, so the reply runs to the
token limit and arrives cut. The bounded schema adds `maxItems` to every array and
`maxLength` to every free string, chosen so that the *largest* document the grammar allows
still fits `max_tokens`; a grammar then has to close the reply before the limit.

The bounds are only sent to the server. Our own validation (tutor.contract) stays the
judge and knows none of them: a reply from a server that ignores the bounds is parsed as
before, and nothing here makes a longer reply invalid.

What the bounded schema adds to `strict_schema()`:

- `maxItems` per array role: blocks (content.text_blocks), forms, fields (a form's
  fields), options (a field's options), media, suggestions, topics (progress.covered_topics
  and progress.newly_covered), citations (content.citations: none below "medium", whose
  single quote costs a learner about 80 characters per block at the default limit);
- `maxLength` per string role: block (a text block's content), id (form and field ids,
  option values), label (titles, labels, placeholders, submit labels, alt text, module
  phase and section), note (descriptions, help text, captions, next_step.prompt), url
  (media src), suggestion, topic, quote (a citation's quote; its source id is an id, its
  location a label). Enum strings need none;
- every number becomes a bounded integer: `level` 1-6 and `percentage` 0-100 (the
  contract's own ranges), counts 0-999, a field's min/max -99999..99999. A free number may
  take 52 characters in llama.cpp's grammar (sign, 16 digits, point, 16 digits, exponent);
  every number in RESPONSE_SCHEMA is whole in practice, and an integer is still a number
  to the contract.

Worst-case size. `worst_case_size(schema)` measures the largest document a schema allows:
every array at maxItems, every string at maxLength, every nullable field in its larger
form, separators written as `", "` and `": "`; it counts text (inside free strings),
structure (keys, quotes, punctuation, enum values, null) and digits apart, because they
tokenize differently. `worst_case_tokens` prices them conservatively, measured against
llama.cpp's tokenizer for Gemma 3 on the seed 002 examples and the sample module:

- text at 3 characters per token (English prose came to 4.1-4.9, Vietnamese to 3.6);
- structure at 2.5 (2.8-4.1 measured, the lowest for pretty-printed replies and for a
  reply looping over nearly empty blocks);
- digits at 1 (Gemma writes a number a digit per token).

Not covered: a model writing `\\uXXXX` escapes (6 characters for one, about 1.4 characters
per token) or padding with the whitespace a grammar allows between tokens (up to 22
characters at each gap in llama.cpp). The token limit still cuts such a reply, and the
stream's repetition watcher (tutor.llm.watch) stops a looping one early.

Choosing the bounds. `bounds_for(max_tokens)` takes the richest tier below whose worst
case fits, then gives the tokens left over to the length of text blocks (what a learner
reads), up to 1500 characters. Tiers add forms late: in the worst case one field with
its options, keys and nullable extras (placeholder, help text, min, max) costs 255-775
tokens, so a model limited to 400-600 tokens is offered text and suggestions only.

                     maxItems                        |           maxLength (characters)           |  worst
    tier   blocks      forms media sugg topics cites | block  id label note  url sugg topic quote | tokens
    text        2          -     0    2      2     0 |   100  16    24   48   60   32    24    60 |    390
    short       3          -     0    3      4     0 |   153  24    40   80  100   40    32    80 |    599
    form        3  1 x 1 x 4     0    3      6     0 |   140  24    40   80  100   40    32   100 |    988
    medium      4  1 x 2 x 5     1    3      8     1 |   220  32    60  110  160   48    40   160 |   2010
    seed        5  1 x 3 x 7     1    4     16     2 |   300  40    64  120  240   64    48   240 |   3534
    large       6  2 x 4 x 8     2    4     20     3 |   400  40    80  160  300   80    64   260 |   8156
    full        8  2 x 5 x 8     3    4     24     3 |   800  40   120  300  500  100    80   400 |  13968

(forms: forms x fields per form x options per field; sugg: suggestions; cites: citations.)

So, for example: max_tokens 400 -> "text", 2 blocks of 116 characters; 600 -> "short",
3 blocks of 154; 1024 -> "form", 3 of 176; 2048 (the default) -> "medium", 4 of 248 and
one citation; 4096 -> "seed" (all four seed 002 examples fit), 5 of 637; 8192 -> "large",
6 of 418.
Worked through for "text" at 100 characters: text_blocks (200 text, 106 structure: 109
tokens), next_step (a 48-character prompt and two 32-character suggestions: 61),
progress (two lists of two 24-character topics, a 3-digit percentage and count, a
milestone: 84), module_state (two 24-character labels, two counts: 57), forms and media
(null: 2 each), citations (null: 8), response_type and emotion (12), the keys and braces
around them (56); in all 456 text, 563 structure and 12 digit characters: 389.2 tokens,
so 390. Each character more in a block adds 2/3 of a token (two blocks, 3 characters per
token): at 400 tokens, blocks of 116.

llama.cpp expands `maxLength` and `maxItems` into that many grammar rules and silently
drops a repetition bound above 2000 (MAX_REPETITION_THRESHOLD in src/llama-grammar.cpp),
so no bound here exceeds 2000. Below the smallest tier's worst case no document with all
the required keys fits; such limits get "text" with 40-character blocks (350 tokens).
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass, fields, replace
from fractions import Fraction
from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from tutor.contract import TutorResponse
from tutor.llm.strict_mode import (STRICT_KEYWORDS, close_objects, drop_keywords, inline_refs, is_nullable,
                                   make_nullable, make_strict)

__all__ = [
    "BLOCK_CHARS_MAX", "BLOCK_CHARS_MIN", "DIGITS_PER_TOKEN", "GRAMMAR_REPETITION_LIMIT", "SCHEMA_NAME",
    "STRUCTURE_CHARS_PER_TOKEN", "TEXT_CHARS_PER_TOKEN", "TIERS", "Bounds", "Size", "apply_bounds",
    "bounded_schema", "bounds_for", "inline_refs", "is_nullable", "make_nullable", "response_schema",
    "strict_schema", "tier_table", "tool_schema", "worst_case_size", "worst_case_tokens",
]

SCHEMA_NAME = "tutor_response"

# For a tool's input_schema (Anthropic) constraints help the model, so only noise goes.
_NOISE_KEYWORDS = frozenset({"title", "default", "$schema", "examples"})


def strict_schema(model: type[BaseModel] = TutorResponse) -> dict[str, Any]:
    """A fresh copy of the strict-mode schema for `model` (callers may mutate it)."""
    return copy.deepcopy(_strict_cached(model))


def tool_schema(model: type[BaseModel] = TutorResponse) -> dict[str, Any]:
    """A self-contained (no $ref) schema for a tool's input, optional fields left optional."""
    return copy.deepcopy(_tool_cached(model))


def response_schema(max_tokens: int, *, strict_openai: bool) -> dict[str, Any]:
    """The schema to send as response_format.json_schema.schema.

    OpenAI's own API (`strict_openai=True`) gets `strict_schema()`: its Structured Outputs
    document no `maxLength` for strings and refuse both `maxLength` and `maxItems` for
    fine-tuned models. Every other server gets `bounded_schema(max_tokens)`.
    """
    return strict_schema() if strict_openai else bounded_schema(max_tokens)


def bounded_schema(max_tokens: int) -> dict[str, Any]:
    """A fresh copy of the strict schema with bounds whose worst case fits `max_tokens`."""
    return copy.deepcopy(_bounded_cached(max_tokens))


@lru_cache(maxsize=32)
def _bounded_cached(max_tokens: int) -> dict[str, Any]:
    return apply_bounds(bounds_for(max_tokens))


@lru_cache(maxsize=8)
def _strict_cached(model: type[BaseModel]) -> dict[str, Any]:
    return make_strict(inline_refs(model.model_json_schema()))


@lru_cache(maxsize=8)
def _tool_cached(model: type[BaseModel]) -> dict[str, Any]:
    return close_objects(drop_keywords(inline_refs(model.model_json_schema()), _NOISE_KEYWORDS))


# --- bounded schemas ------------------------------------------------------------------

# Conservative characters per token (see the module docstring), by what the characters are.
TEXT_CHARS_PER_TOKEN = Fraction(3)  # inside free strings: what the model writes
STRUCTURE_CHARS_PER_TOKEN = Fraction(5, 2)  # keys, quotes, punctuation, enum values, null
DIGITS_PER_TOKEN = Fraction(1)  # Gemma writes numbers a digit per token
GRAMMAR_REPETITION_LIMIT = 2000  # llama.cpp drops a repetition bound above this
BLOCK_CHARS_MAX = 1500  # leftover budget lengthens text blocks up to this
BLOCK_CHARS_MIN = 40  # what "text" shrinks to when even it does not fit


@dataclass(frozen=True)
class Size:
    """Characters of a document by kind, and what they cost in tokens."""

    text: int = 0
    structure: int = 0
    digits: int = 0

    def __add__(self, other: Size) -> Size:
        return Size(self.text + other.text, self.structure + other.structure, self.digits + other.digits)

    def __mul__(self, n: int) -> Size:
        return Size(self.text * n, self.structure * n, self.digits * n)

    @property
    def chars(self) -> int:
        return self.text + self.structure + self.digits

    @property
    def tokens(self) -> Fraction:
        return (self.text / TEXT_CHARS_PER_TOKEN + self.structure / STRUCTURE_CHARS_PER_TOKEN
                + self.digits / DIGITS_PER_TOKEN)


@dataclass(frozen=True)
class Bounds:
    """maxItems per array role and maxLength per string role (see the module docstring)."""

    name: str
    # maxItems
    blocks: int
    forms: int
    fields: int
    options: int
    media: int
    suggestions: int
    topics: int
    citations: int
    # maxLength, in characters
    block: int
    id: int
    label: int
    note: int
    url: int
    suggestion: int
    topic: int
    quote: int

    def limits(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "name"}


def _tier(name: str, items: tuple[int, ...], chars: tuple[int, ...]) -> Bounds:
    return Bounds(name, *items, *chars)


TIERS: tuple[Bounds, ...] = (
    #                blocks forms fields options media sugg topics cites  block id label note url sugg topic quote
    _tier("text",   (2, 0, 0, 0, 0, 2, 2, 0),  (100, 16, 24, 48, 60, 32, 24, 60)),
    _tier("short",  (3, 0, 0, 0, 0, 3, 4, 0),  (153, 24, 40, 80, 100, 40, 32, 80)),
    _tier("form",   (3, 1, 1, 4, 0, 3, 6, 0),  (140, 24, 40, 80, 100, 40, 32, 100)),
    _tier("medium", (4, 1, 2, 5, 1, 3, 8, 1),  (220, 32, 60, 110, 160, 48, 40, 160)),
    _tier("seed",   (5, 1, 3, 7, 1, 4, 16, 2), (300, 40, 64, 120, 240, 64, 48, 240)),
    _tier("large",  (6, 2, 4, 8, 2, 4, 20, 3), (400, 40, 80, 160, 300, 80, 64, 260)),
    _tier("full",   (8, 2, 5, 8, 3, 4, 24, 3), (800, 40, 120, 300, 500, 100, 80, 400)),
)

# Which bound applies where: the name of the property a string or array sits in (array
# items take their array's name). A property missing here makes apply_bounds fail, so a
# field added to the contract cannot reach a grammar unbounded.
_ARRAY_ROLES = {
    "text_blocks": "blocks", "forms": "forms", "fields": "fields", "options": "options", "media": "media",
    "suggestions": "suggestions", "covered_topics": "topics", "newly_covered": "topics",
    "citations": "citations",
}
_STRING_ROLES = {
    "content": "block",
    "id": "id", "value": "id",
    "title": "label", "label": "label", "placeholder": "label", "submit_label": "label", "alt": "label",
    "current_phase": "label", "current_section": "label",
    "description": "note", "help_text": "note", "caption": "note", "prompt": "note",
    "src": "url",
    "suggestions": "suggestion",
    "covered_topics": "topic", "newly_covered": "topic",
    "source_id": "id", "location": "label", "quote": "quote",
}
# Numbers are sent as integers in these ranges; level and percentage are the contract's own.
_INTEGER_RANGES = {
    "level": (1, 6), "percentage": (0, 100),
    "remaining_topics": (0, 999), "sections_completed": (0, 999), "total_sections": (0, 999),
    "min": (-99999, 99999), "max": (-99999, 99999),
}
# The contract's numeric ranges are read only to check _INTEGER_RANGES against them.
_BOUNDED_KEYWORDS = STRICT_KEYWORDS | {"minimum", "maximum"}


@lru_cache(maxsize=64)
def bounds_for(max_tokens: int) -> Bounds:
    """The richest tier whose worst case fits `max_tokens`, its blocks lengthened into the rest."""
    fitting = [tier for tier in TIERS if _worst(tier).tokens <= max_tokens]
    base = fitting[-1] if fitting else replace(TIERS[0], block=BLOCK_CHARS_MIN)
    # Each character more per block adds `blocks` text characters to the worst case.
    spare = max_tokens - _worst(base).tokens
    longer = math.floor(spare * TEXT_CHARS_PER_TOKEN / base.blocks) if spare > 0 else 0
    return replace(base, block=min(BLOCK_CHARS_MAX, max(base.block, base.block + longer)))


def apply_bounds(bounds: Bounds, model: type[BaseModel] = TutorResponse) -> dict[str, Any]:
    """The strict schema of `model` with `bounds` on every array and free string."""
    limits = bounds.limits()
    too_big = {role: n for role, n in limits.items() if n > GRAMMAR_REPETITION_LIMIT}
    if too_big:
        raise ValueError(f"bounds above llama.cpp's repetition limit {GRAMMAR_REPETITION_LIMIT}: {too_big}")
    return _bound(_base_cached(model), None, limits)


def worst_case_tokens(schema: dict[str, Any]) -> int:
    """Estimated tokens of the largest document `schema` allows (see the module docstring)."""
    return math.ceil(worst_case_size(schema).tokens)


def worst_case_size(node: dict[str, Any]) -> Size:
    """The largest document `node` allows, in characters by kind, written with ", " and ": "."""
    if "anyOf" in node:
        return max((worst_case_size(alt) for alt in node["anyOf"]), key=lambda size: size.tokens)
    kind = node.get("type")
    if isinstance(kind, list):
        return max((worst_case_size({**node, "type": k}) for k in kind), key=lambda size: size.tokens)
    if "enum" in node:
        return Size(structure=max(len(json.dumps(v, ensure_ascii=False)) for v in node["enum"]))
    if kind == "object":
        props = node.get("properties", {})
        size = Size(structure=2 + 2 * max(0, len(props) - 1))  # braces and ", "
        for name, sub in props.items():
            size = size + Size(structure=len(json.dumps(name)) + 2) + worst_case_size(sub)
        return size
    if kind == "array":
        if "maxItems" not in node:
            raise ValueError("unbounded array: the worst case is endless")
        n = node["maxItems"]
        return Size(structure=2 + 2 * max(0, n - 1)) + worst_case_size(node.get("items", {})) * n
    if kind == "string":
        if "maxLength" not in node:
            raise ValueError("unbounded string: the worst case is endless")
        return Size(text=node["maxLength"], structure=2)
    if kind == "integer":
        if "minimum" in node and "maximum" in node:
            return Size(digits=max(len(str(node["minimum"])), len(str(node["maximum"]))))
        return Size(digits=17)  # llama.cpp: a sign and at most 16 digits
    if kind == "number":
        return Size(digits=52)  # llama.cpp: sign, 16 digits, point, 16 digits, exponent sign and 16 digits
    if kind == "boolean":
        return Size(structure=5)
    if kind == "null":
        return Size(structure=4)
    raise ValueError(f"cannot size schema node {node!r}")


def tier_table() -> list[str]:
    """The rows of the module docstring's tier table, computed (a test keeps them in step)."""
    rows = []
    for t in TIERS:
        form = f"{t.forms} x {t.fields} x {t.options}" if t.forms else "-"
        rows.append(
            f"{t.name:<7}{t.blocks:>6} {form:>10} {t.media:>5} {t.suggestions:>4} {t.topics:>6} {t.citations:>5} |"
            f"{t.block:>6} {t.id:>3} {t.label:>5} {t.note:>4} {t.url:>4} {t.suggestion:>4} {t.topic:>5} {t.quote:>5} |"
            f" {worst_case_tokens(apply_bounds(t)):>6}"
        )
    return rows


@lru_cache(maxsize=8)
def _base_cached(model: type[BaseModel]) -> dict[str, Any]:
    return make_strict(inline_refs(model.model_json_schema()), _BOUNDED_KEYWORDS)


@lru_cache(maxsize=64)
def _worst(bounds: Bounds) -> Size:
    return worst_case_size(apply_bounds(bounds))


def _bound(node: Any, name: str | None, limits: dict[str, int]) -> Any:
    """A copy of `node` with maxItems, maxLength and integer ranges; `name`: its property."""
    if isinstance(node, list):
        return [_bound(item, name, limits) for item in node]
    if not isinstance(node, dict):
        return node
    out = {
        k: ({n: _bound(sub, n, limits) for n, sub in v.items()} if k == "properties" else _bound(v, name, limits))
        for k, v in node.items()
    }
    kind = out.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if "array" in kinds:
        out["maxItems"] = limits[_ARRAY_ROLES[_known(_ARRAY_ROLES, name, "array")]]
        if name == "text_blocks":
            out["minItems"] = 1  # a grammar must not allow a reply with nothing to read
    if "string" in kinds and "enum" not in out:
        out["maxLength"] = limits[_STRING_ROLES[_known(_STRING_ROLES, name, "string")]]
    if "integer" in kinds or "number" in kinds:
        low, high = _INTEGER_RANGES[_known(_INTEGER_RANGES, name, "number")]
        if out.get("minimum", low) > low or out.get("maximum", high) < high:
            raise ValueError(f"{name}: the range {low}..{high} is wider than the contract's")
        integer = ["integer" if k == "number" else k for k in kinds]
        out["type"] = integer if isinstance(kind, list) else integer[0]
        out["minimum"], out["maximum"] = low, high
    return out


def _known(roles: dict[str, Any], name: str | None, what: str) -> str:
    if name not in roles:
        raise ValueError(f"no bound for the {what} property {name!r}: give it a role in tutor/llm/schema.py")
    return name
