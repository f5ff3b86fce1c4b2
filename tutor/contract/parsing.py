"""raw model text -> ParsedReply, by a ladder of recoveries, cheapest first.

1. strict: the whole text is a schema-valid reply (outcome ``valid``, untouched);
2. lossless extraction: reasoning blocks, BOM, fences and prose removed, every top-level
   JSON value found with the real decoder, the best one that validates wins;
3. syntax repair: json-repair on the most promising broken region (once or twice);
4. schema-aligned coercion and partial acceptance, applied to every candidate.

Every recovered candidate must pass the honesty guard (its strings occur in the raw text)
and carry something to show; otherwise the reply is ``invalid`` and the raw text is what
the learner sees (seed 000: keep raw, flag ``invalid_json``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from tutor.contract.coerce import Coercion, coerce_reply
from tutor.contract.coerce_util import format_validation_error
from tutor.contract.extract import (
    Scan,
    clean,
    outside_text_flags,
    scan_values,
    structural_depths,
)
from tutor.contract.honesty import Haystack, dishonest_strings, fix_surrogates
from tutor.contract.models import TutorResponse
from tutor.contract.repair import repair_region

__all__ = ["Outcome", "ParsedReply", "has_content", "parse"]

Outcome = Literal["valid", "repaired", "invalid"]

_MAX_REPAIRS = 2  # json-repair runs at most this many times per reply
_MAX_ERRORS = 12
# A decode that failed this far (characters) into a value was a JSON object, not a brace
# in prose ("{curly braces}" fails at once).
_SERIOUS_FAILURE = 24
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


@dataclass(frozen=True)
class ParsedReply:
    outcome: Outcome
    response: TutorResponse | None
    flags: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    raw: str = ""

    def to_json_dict(self) -> dict:
        return {
            "outcome": self.outcome,
            "flags": list(self.flags),
            "response": self.response.to_json_dict() if self.response else None,
            "errors": list(self.errors),
        }


def parse(raw: str, *, finish_reason: str | None = None) -> ParsedReply:
    """Turn one raw model reply into a ParsedReply. Never raises on any string input."""
    cut_by_provider = finish_reason == "length"
    try:
        # strict: "2" is not a heading level and "true" is not a boolean; such replies are
        # coerced (and flagged) further down instead of silently passing as untouched.
        response = TutorResponse.model_validate_json(raw, strict=True)
    except ValidationError:
        pass
    else:
        if has_content(response):
            return ParsedReply("valid", response, ["truncated"] if cut_by_provider else [], [], raw)
    return _Ladder(raw, cut_by_provider).run()


def has_content(response: TutorResponse) -> bool:
    """Something for the learner: a non-blank text block or a form."""
    content = response.content
    return bool(content.forms) or any(block.content.strip() for block in content.text_blocks)


@dataclass
class _Attempt:
    response: TutorResponse | None
    flags: list[str]
    errors: list[str]
    stage: int  # how far the candidate got: 0 shape, 1 schema, 2 content, 3 honesty, 4 accepted
    weight: int = 0


class _Ladder:
    def __init__(self, raw: str, cut_by_provider: bool) -> None:
        self.raw = raw
        self.cut_by_provider = cut_by_provider
        self.hay = Haystack(raw)
        self.failed: list[_Attempt] = []
        self.truncated = cut_by_provider
        # Decoders leave escaped surrogate halves unpaired (json-repair) or accept lone
        # ones (json): strings then need fixing, but only if the raw text has such escapes.
        self.surrogates = bool(_SURROGATE_ESCAPE.search(raw))

    def run(self) -> ParsedReply:
        if not self.raw.strip():
            return self._invalid(["(root): the reply is empty"])
        cleaned = clean(self.raw)
        found = self._recover(cleaned.text, cleaned.flags, allow_string=True)
        if found is None:
            return self._invalid()
        flags = _dedupe(found.flags + (["truncated"] if self.truncated else []))
        return ParsedReply("repaired", found.response, flags, found.errors[:_MAX_ERRORS], self.raw)

    def _recover(self, text: str, base: list[str], *, allow_string: bool) -> _Attempt | None:
        if not text:
            self.failed.append(_Attempt(None, [], ["(root): nothing left after removing reasoning and fences"], 0))
            return None
        if allow_string and text[0] == '"':
            inner = _loads(text)
            if isinstance(inner, str):
                again = clean(inner)
                return self._recover(again.text, [*base, "double_encoded", *again.flags], allow_string=False)
        scan = scan_values(text)
        depth_of = self._depths(text, scan)
        # Empty values ({} or []) cannot hold a reply; prose can contain thousands.
        values = [v for v in scan.values if v.value]
        top = [v for v in values if depth_of.get(v.start, 0) == 0]
        # 2. lossless: a whole top-level value, exactly as written.
        best: tuple[_Attempt, Any] | None = None
        for found in top:
            attempt = self._try(found.value, truncated=self.cut_by_provider)
            if attempt.response is not None and (best is None or attempt.weight >= best[0].weight):
                best = (attempt, found)
        # 3. syntax repair of the broken region that the decoder read furthest into.
        regions = sorted(
            ((start, err) for start, err in scan.failures if depth_of.get(start, 0) == 0),
            key=lambda se: (-(se[1] - se[0]), se[0]),
        )
        if best is not None:
            attempt, found = best
            if regions and regions[0][1] - regions[0][0] >= _SERIOUS_FAILURE:
                # A broken reply next to a whole one (an example echoed, then the real
                # reply with a syntax slip): the one with more to show wins.
                repaired = self._repair(text, regions[0][0], base)
                if repaired is not None and repaired.weight > attempt.weight:
                    return repaired
            around = outside_text_flags(text[: found.start], text[found.end :])
            objects = [v for v in top if isinstance(v.value, dict)]
            extra = ["multiple_values"] if len(objects) > 1 else []
            return self._accepted(attempt, [*base, *around, *extra])
        for start, _err in regions[:_MAX_REPAIRS]:
            attempt = self._repair(text, start, base)
            if attempt is not None:
                return attempt
        # Last resort: a whole value nested inside a structure too broken to repair.
        nested = [v for v in values if depth_of.get(v.start, 0) > 0]
        best = None
        for found in nested:
            attempt = self._try(found.value, truncated=self.cut_by_provider)
            if attempt.response is not None and (best is None or attempt.weight > best[0].weight):
                best = (attempt, found)
        if best is not None:
            return self._accepted(best[0], [*base, "fragment", "prose_around"])
        if not values and not scan.failures:
            problem = "an empty JSON object or array" if scan.values else "no JSON object found in the reply"
            self.failed.append(_Attempt(None, [], [f"(root): {problem}"], 0))
        return None

    def _repair(self, text: str, start: int, base: list[str]) -> _Attempt | None:
        region = text[start:]
        repaired = repair_region(region)
        truncated = repaired.truncated or self.cut_by_provider
        if repaired.truncated:
            self.truncated = True
        value = repaired.value
        # Several top-level values come back as a list; a region opening with '[' is one array.
        candidates = value if isinstance(value, list) and region[0] == "{" else [value]
        best: _Attempt | None = None
        for candidate in candidates:
            attempt = self._try(candidate, truncated=truncated)
            if attempt.response is not None and (best is None or attempt.weight >= best.weight):
                best = attempt
        if best is None:
            return None
        around = outside_text_flags(text[:start], repaired.after)
        extra = ["multiple_values"] if len(candidates) > 1 else []
        return self._accepted(best, [*base, *around, *repaired.flags, *extra])

    def _try(self, value: Any, *, truncated: bool) -> _Attempt:
        co = Coercion(truncated=truncated)
        if self.surrogates:
            value = _map_strings(value, lambda text: _fix_surrogates(co, text))
        data = coerce_reply(co, value)
        if data is None:
            return self._fail(_Attempt(None, co.flags, co.errors, 0))
        try:
            response = TutorResponse.model_validate(data, strict=True)
        except ValidationError as exc:
            return self._fail(_Attempt(None, co.flags, co.errors + format_validation_error(exc), 1))
        if not has_content(response):
            errors = [*co.errors, "content: the reply has no text block or form to show"]
            return self._fail(_Attempt(None, co.flags, errors, 2))
        dishonest = dishonest_strings(response.to_json_dict(), self.hay, co.synthesized)
        if dishonest:
            errors = [f"{path}: text that is not in the raw reply" for path in dishonest]
            return self._fail(_Attempt(None, co.flags, errors, 3))
        return _Attempt(response, co.flags, co.errors, 4, _weight(response))

    def _fail(self, attempt: _Attempt) -> _Attempt:
        self.failed.append(attempt)
        return attempt

    def _accepted(self, attempt: _Attempt, flags: list[str]) -> _Attempt:
        attempt.flags = [*flags, *attempt.flags]
        return attempt

    @staticmethod
    def _depths(text: str, scan: Scan) -> dict[int, int]:
        if not scan.failures:
            return {}  # every decoded value was read from depth 0
        starts = sorted({v.start for v in scan.values} | {s for s, _ in scan.failures})
        return dict(zip(starts, structural_depths(text, starts), strict=True))

    def _invalid(self, errors: list[str] | None = None) -> ParsedReply:
        if errors is None:
            ranked = sorted(self.failed, key=lambda a: -a.stage)
            errors = ranked[0].errors if ranked else ["(root): no reply could be read"]
        flags = ["invalid_json", *(["truncated"] if self.truncated else [])]
        return ParsedReply("invalid", None, flags, _dedupe(errors)[:_MAX_ERRORS], self.raw)


def _weight(response: TutorResponse) -> int:
    content = response.content
    text = sum(len(block.content.strip()) for block in content.text_blocks)
    return text + 200 * len(content.forms or ())


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _fix_surrogates(co: Coercion, text: str) -> str:
    fixed = fix_surrogates(text)
    if fixed.count("\ufffd") > text.count("\ufffd"):
        co.flag("lone_surrogate")  # half a character escaped alone: shown as U+FFFD
    return fixed


def _map_strings(value: Any, fn: Any) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: _map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_strings(v, fn) for v in value]
    return value


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
