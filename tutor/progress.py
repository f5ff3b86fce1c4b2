"""Progress: which topics a learner has seen and mastered, milestones. Pure functions, and
the server's word is final.

Two measures per learner and topic (docs/authoring.md, "Progress: seen and mastered"):

- **seen**: the tutor showed the topic, or the learner engaged with it over a turn. The
  evidence is the server's, from the turn as a whole, never from the learner's words alone:
  a reply that claims the topic by its canonical id (seed 003) *and* whose text mentions it
  (title, keywords, aliases) or cites a verified quote from its material; a submitted module
  form that `covers` it; an answer to one of its checks (what a text or a form mentions:
  tutor.topic_mentions). At most MAX_SEEN_PER_TURN topics become seen in one reply, so a
  message naming every topic cannot mark them all.
- **mastered**: every check of the topic has a judged score at or above its threshold
  (the judged attempts are stored; see tutor.teach.teaching). Model claims of mastery are ignored.

A topic is done when it is mastered (a topic with checks) or seen (one without). Each topic
weighs two units: one for seen, two for done; the percentage is units over twice the
topics, so seeing everything without answering a check stops near half way. The module is
complete (100%) when every topic is done.

Seen never decreases, and neither does mastered. Each milestone fires once: when a turn
crosses several thresholds at once (20% -> 80%), the highest one is reported and all of
them are recorded, so none of them fires later.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tutor.contract import ModuleState, Progress
from tutor.derived import per_module
from tutor.text import normalize
from tutor.topic_mentions import detect_text

if TYPE_CHECKING:  # pragma: no cover
    from tutor.content.modules import Module, Phase, Topic

log = logging.getLogger(__name__)

__all__ = [
    "MAX_SEEN_PER_TURN", "ProgressState", "ProgressUpdate", "Shown", "apply_evidence", "checked_count",
    "coverage_count", "covered_ids", "done_count", "is_complete", "mastered_ids", "milestones_reached", "module_state",
    "next_topic", "normalize", "percentage", "previous_topic", "reconcile", "server_progress", "shown_topics",
]

# A reply teaches one topic, maybe two that belong together; more is a list, not teaching.
MAX_SEEN_PER_TURN = 2


@dataclass(frozen=True)
class ProgressState:
    """What a learner has seen and mastered in one module, in the order it happened."""

    covered: tuple[str, ...] = ()  # seen topics
    milestones: tuple[str, ...] = ()  # "25%", ... in the order they fired
    mastered: tuple[str, ...] = ()  # topics whose checks all reached their threshold

    @property
    def seen(self) -> tuple[str, ...]:
        return self.covered

    def to_dict(self) -> dict[str, list[str]]:
        """What the progress record stores; mastery is read back from the judged attempts."""
        return {"covered": list(self.covered), "milestones": list(self.milestones)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> ProgressState:
        data = data or {}
        return cls(
            covered=tuple(dict.fromkeys(str(t) for t in data.get("covered") or ())),
            milestones=tuple(dict.fromkeys(str(m) for m in data.get("milestones") or ())),
            mastered=tuple(dict.fromkeys(str(t) for t in data.get("mastered") or ())),
        )


@dataclass(frozen=True)
class ProgressUpdate:
    state: ProgressState
    newly_covered: tuple[str, ...] = ()  # newly seen
    milestone: str | None = None  # the highest threshold crossed by this turn, if any
    ignored_claims: tuple[str, ...] = ()  # the model's labels that did not count
    newly_mastered: tuple[str, ...] = ()
    at: str | None = None  # the topic the turn's reply taught last (where the lesson is now)


@dataclass(frozen=True)
class Shown:
    """The topics a reply showed (see shown_topics)."""

    topics: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()  # claims that are not canonical ids, or that the reply did not back


# --- detection ------------------------------------------------------------------------------


def shown_topics(
    module: Module,
    state: ProgressState,
    claimed: Iterable[str],
    reply_text: str,
    preferred: Iterable[str] = (),
) -> Shown:
    """The topics a reply taught: claimed by canonical id and mentioned in the reply's text.
    A topic only quoted is not (one passage is a glimpse, not its lesson: it is taught in its
    turn, and its check comes after). At most MAX_SEEN_PER_TURN of them new, those the
    learner asked about (`preferred`) first, then in the author's order."""
    shape = _shape(module)
    canonical = shape.canonical
    claims = list(dict.fromkeys(str(c) for c in claimed))
    mentioned = detect_text(module, reply_text)
    backed = {c for c in claims if c in canonical and c in mentioned}
    already = set(state.covered)
    ignored = [c for c in claims if c not in backed and c not in already]  # seen before: nothing to count
    if ignored:
        log.info("module %s: claims not counted as seen %s", module.id, ignored)
    wanted = set(preferred)
    new = sorted((t for t in backed if t not in already),
                 key=lambda t: (t not in wanted, shape.position[t]))
    kept = set(new[:MAX_SEEN_PER_TURN])
    if len(new) > MAX_SEEN_PER_TURN:
        log.info("module %s: a reply showed %d new topics; %d counted", module.id, len(new), MAX_SEEN_PER_TURN)
        ignored += new[MAX_SEEN_PER_TURN:]
    topics = tuple(t for t in module.topic_ids if t in kept or (t in backed and t in already))
    return Shown(topics, tuple(ignored))


# --- measures -----------------------------------------------------------------------------


class _Shape:
    """What the measures read of a module's topics, derived once per topic list (they run
    several times a turn). A topic is done when it is mastered if it has checks, else seen."""

    __slots__ = ("canonical", "checked", "checked_count", "pairs", "sections", "phase_of", "position")

    def __init__(self, module: Module) -> None:
        topics = module.topics
        self.canonical = frozenset(module.topic_ids)
        self.checked = frozenset(t.id for t in topics if t.checks)
        self.pairs = tuple((t.id, bool(t.checks)) for t in topics)  # (id, has checks), one per topic
        self.checked_count = sum(1 for t in topics if t.checks)
        # Per section: the section, its topic ids, and its topics' ids with checks and without.
        self.sections = tuple((s, tuple(t.id for t in s.topics), frozenset(t.id for t in s.topics if t.checks),
                               frozenset(t.id for t in s.topics if not t.checks)) for s in module.sections)
        self.phase_of: dict[str, Phase] = {}  # Module.phase_of, as a lookup
        for phase in module.phases:
            for section in phase.sections:
                self.phase_of.setdefault(section.id, phase)
        self.position: dict[str, int] = {}  # topic id -> its first place in the author's order
        for i, topic_id in enumerate(module.topic_ids):
            self.position.setdefault(topic_id, i)


def _shape(module: Module) -> _Shape:
    return per_module("shape", module, _Shape)


def covered_ids(module: Module, state: ProgressState) -> list[str]:
    """Seen topics in the order they were seen; ids of topics an author has since removed
    from the module don't count."""
    canonical = _shape(module).canonical
    return [t for t in state.covered if t in canonical]


def coverage_count(module: Module, state: ProgressState) -> int:
    return len(covered_ids(module, state))


def mastered_ids(module: Module, state: ProgressState) -> list[str]:
    """Mastered topics that still have checks, in the order they were mastered."""
    checked = _shape(module).checked
    return [t for t in state.mastered if t in checked]


def checked_count(module: Module) -> int:
    """How many topics have checks."""
    return _shape(module).checked_count


def done_count(module: Module, state: ProgressState) -> int:
    return _tally(module, state)[1]


def is_complete(module: Module, state: ProgressState) -> bool:
    return bool(module.topics) and done_count(module, state) == len(module.topics)


def _tally(module: Module, state: ProgressState) -> tuple[int, int]:
    """(units, topics done): a topic weighs 2 units when done, 1 when only seen."""
    seen, mastered = set(state.covered), set(state.mastered)
    units = done = 0
    for topic_id, checked in _shape(module).pairs:
        if topic_id in mastered if checked else topic_id in seen:
            units += 2
            done += 1
        elif topic_id in seen:
            units += 1
    return units, done


def next_topic(module: Module, state: ProgressState) -> Topic | None:
    """The first topic, in the author's order, not seen yet."""
    seen = set(state.covered)
    return next((t for t in module.topics if t.id not in seen), None)


def previous_topic(module: Module, state: ProgressState) -> str | None:
    """"Go back": the topic before the one taught last, in the author's order (the first
    topic, again, when that is where the lesson is); None before any topic is taught."""
    ids = [t.id for t in module.topics]
    current = next((c for c in reversed(state.covered) if c in ids), None)
    return None if current is None else ids[max(ids.index(current) - 1, 0)]


def percentage(module: Module, state: ProgressState) -> float:
    return _percent(module, _tally(module, state)[0])


def _percent(module: Module, units: int) -> float:
    total = 2 * len(module.topics)
    return round(units * 100 / total, 1) if total else 0.0


def milestones_reached(module: Module, state: ProgressState) -> tuple[str, ...]:
    """The module's milestone labels reached in this state, lowest first."""
    total = 2 * len(module.topics)
    units = _tally(module, state)[0]
    # Integer comparison: 10 of 40 units is exactly 25%, with no float rounding at the edge.
    return tuple(f"{t}%" for t in module.milestones if total and units * 100 >= t * total)


# --- folding a turn in ----------------------------------------------------------------------


def reconcile(
    module: Module, state: ProgressState, seen: Iterable[str] = (), mastered: Iterable[str] = ()
) -> ProgressUpdate:
    """Fold one turn's server evidence into the state: topics `seen` and topics `mastered`
    (a mastered topic is seen too). Ids that are not the module's are ignored."""
    canonical = _shape(module).canonical
    gained = set(mastered) & canonical
    evidence = (set(seen) | gained) & canonical
    unknown = sorted((set(seen) | set(mastered)) - canonical)
    if unknown:
        log.warning("module %s: ignoring non-canonical topic ids %s", module.id, unknown)
    already = set(state.covered)
    newly = tuple(t for t in module.topic_ids if t in evidence and t not in already)
    had = set(state.mastered)
    newly_mastered = tuple(t for t in module.topic_ids if t in gained and t not in had)
    grown = ProgressState(state.covered + newly, state.milestones, state.mastered + newly_mastered)
    fired = tuple(m for m in milestones_reached(module, grown) if m not in state.milestones)
    new_state = ProgressState(grown.covered, state.milestones + fired, grown.mastered)
    return ProgressUpdate(new_state, newly, fired[-1] if fired else None, (), newly_mastered)


def apply_evidence(
    module: Module, state: ProgressState, seen: Iterable[str] = (), mastered: Iterable[str] = ()
) -> ProgressState:
    """The state after the learner's evidence, milestones as they were before the turn:
    the state to hand a tutor, which then sees which milestones are still to celebrate."""
    update = reconcile(module, state, seen, mastered)
    return ProgressState(update.state.covered, state.milestones, update.state.mastered)


# --- what the learner sees ------------------------------------------------------------------


def server_progress(module: Module, update: ProgressUpdate) -> Progress:
    """The `meta.progress` the learner sees: the server's, never the model's claim.
    `covered_topics` are the topics seen; `remaining_topics` those not done yet."""
    units, done = _tally(module, update.state)
    return Progress(
        percentage=_percent(module, units),
        covered_topics=covered_ids(module, update.state),
        newly_covered=list(update.newly_covered),
        remaining_topics=len(module.topic_ids) - done,
        milestone=update.milestone,
    )


def module_state(module: Module, state: ProgressState, at: str | None = None) -> ModuleState:
    """Where the learner is: the section of the topic the lesson is on (`at`, the topic the
    latest reply taught, so the "where" line follows the lesson when the learner asks
    about another part); without it, the section of the first topic not seen (once all are
    seen, of the first not done; the last section once the module is complete)."""
    seen, mastered = set(state.covered), set(state.mastered)
    shape = _shape(module)
    sections = shape.sections
    if at is not None:
        here = next((s for s, ids, _, _ in sections if at in ids), None)
        if here is not None:
            return _where(shape, here, sections, seen, mastered)
    # A section's topics are all done when those with checks are mastered and the others seen.
    current = next(
        (s for s, ids, _, _ in sections if not seen.issuperset(ids)),
        next((s for s, _, checked, unchecked in sections
              if not (mastered.issuperset(checked) and seen.issuperset(unchecked))),
             sections[-1][0] if sections else None),
    )
    return _where(shape, current, sections, seen, mastered)


def _where(shape: _Shape, current: Any, sections: tuple, seen: set[str], mastered: set[str]) -> ModuleState:
    done = sum(1 for s, ids, checked, unchecked in sections
               if ids and mastered.issuperset(checked) and seen.issuperset(unchecked))
    phase = shape.phase_of.get(current.id) if current else None
    return ModuleState(
        current_phase=phase.title if phase else None,
        current_section=current.title if current else None,
        sections_completed=done,
        total_sections=len(sections),
    )
