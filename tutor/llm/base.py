"""The one async interface every backend implements, and the data that crosses it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from tutor.content.modules import Module
    from tutor.progress import ProgressState

Role = Literal["system", "user", "assistant"]
Strategy = Literal["prompt", "json_object", "json_schema"]


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str
    # How many leading characters are the same on every turn (a system message's rules,
    # module and contract): providers with explicit prompt caching mark them (Anthropic's
    # cache_control). Not part of equality: it says how to send the text, not what it is.
    cached_prefix: int = field(default=0, compare=False)


@dataclass(frozen=True)
class LearnerInput:
    """What the learner sent: free text, or answers to a form (already validated)."""

    text: str | None = None
    form_id: str | None = None
    answers: dict[str, Any] | None = None

    @property
    def is_form(self) -> bool:
        return self.form_id is not None


@dataclass(frozen=True)
class PassageData:
    """A passage of the module's material that matches the learner's words (tutor.teach)."""

    source_id: str
    source_title: str
    section_id: str
    section_title: str
    topic_id: str | None
    text: str  # verbatim from the section
    score: float = 0.0
    shown: bool = False  # the tutor showed it in the last few turns: point to it, do not repeat it

    @property
    def header(self) -> str:
        """Seed 001's chunk header, for prompts."""
        return f'[Source: "{self.source_title}" (id: {self.source_id}), Section: "{self.section_title}"]'


@dataclass(frozen=True)
class CheckData:
    """A check of understanding the app asks this turn (it shows the question as a form)."""

    check_id: str
    topic_id: str
    topic_title: str
    question: str
    again: bool = False  # asked before: a retry, or still open after a question
    review: bool = False  # every topic is seen: coming back to what is not mastered


@dataclass(frozen=True)
class JudgedData:
    """The server's judgement of the learner's answer to a check (None score: the judge failed)."""

    check_id: str
    topic_id: str
    topic_title: str
    question: str
    score: int | None
    threshold: int
    mastered: bool
    feedback: str = ""


@dataclass(frozen=True)
class TeachingContext:
    """What the server decided about teaching this turn, as plain data (tutor.teach.teaching)."""

    # what the learner's input is: answer | question | skip | retry | summary | navigate |
    # form | other | opening, or what tutor.teach.understanding read (more, share, off_topic,
    # medical, exercise, social)
    intent: str = "other"
    passages: tuple[PassageData, ...] = ()
    judged: JudgedData | None = None
    ask: CheckData | None = None
    goto_topic: str | None = None  # a form answer leads here (an option's next_topic)
    # intent "social": thanks | goodbye | greeting | laugh (tutor.teach.intent.social); intent
    # "share": struggle | progress | help, "" for plain background (tutor.teach.shares); intent
    # "question": "near_check" when it may be meant as the open check's answer
    # (tutor.teach.understanding.NEAR_CHECK)
    kind: str = ""
    # intent "stuck" ("I don't know" to the open check): the built-in tutor's next step towards
    # its answer (not in a model's prompt: a model words its own hint, and a reply copying the
    # prompt's words is junk, tutor.llm.usable)
    hint: str = ""
    # the language the learner's message is plainly written in, when it is not the module's
    # (tutor.understand.accents.written_in): the reply then says, in it, that what it shows
    # from the module is in the module's language
    written_in: str = ""


# Messages the tutor answers while a check is open, leaving the check open and asking it again
# below the reply (tutor.teach.check_plan, the built-in tutor, the model's prompt).
ANSWERED_BESIDE_CHECK = ("question", "share", "more", "off_topic", "medical", "social", "stuck")


@dataclass(frozen=True)
class TurnContext:
    """A structured view of the turn for the built-in tutor; HTTP providers ignore it."""

    module: Module
    progress: ProgressState  # after this turn's learner evidence was counted
    detected: frozenset[str]  # topics the learner's input mentions
    learner: LearnerInput | None  # None for the tutor's opening turn
    turn_index: int  # 0 for the opening turn
    teaching: TeachingContext = field(default_factory=TeachingContext)
    # Everything the learner has written in the conversation, this turn's message too,
    # folded (`folded`): the built-in tutor never offers a question they already asked.
    asked: frozenset[str] = frozenset()


def folded(text: str) -> str:
    """Text as quick replies are compared: spaces collapsed, case folded."""
    return " ".join(text.split()).casefold()


@dataclass(frozen=True)
class Contract:
    """A reply shape other than the tutor's RESPONSE_SCHEMA (a risk screen, a judge): the
    providers ask for `schema` under `name` the way the strategy says (json_schema: the
    server's structured output or Anthropic's forced tool; json_object: any JSON object)."""

    name: str
    schema: dict[str, Any] = field(hash=False, compare=False)


@dataclass(frozen=True)
class CompletionRequest:
    messages: list[ChatMessage]
    temperature: float
    max_tokens: int
    strategy: Strategy = "prompt"
    context: TurnContext | None = None
    contract: Contract | None = None  # None: the tutor's reply (RESPONSE_SCHEMA)


@dataclass(frozen=True)
class Completion:
    text: str
    finish_reason: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    model: str = ""
    refusal: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    tokens_cached: int | None = None  # of tokens_in, read from the server's prompt cache (None: not said)


class Provider(Protocol):
    name: str  # "builtin" | "openai" | "anthropic"
    model: str

    async def complete(self, request: CompletionRequest) -> Completion: ...

    async def aclose(self) -> None: ...
