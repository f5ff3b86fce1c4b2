"""The evidence suite for acknowledging personal shares (tutor.teach.shares): learners'
shares, each with the kind a warm tutor would recognise (struggle, progress, help, plain).
`tutor teach eval` runs every `shares*.yaml` among the sets."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tutor.teach.suites import SuiteError, count
from tutor.understand.intent_bank import SHARE_KINDS

__all__ = ["ShareCase", "ShareReport", "evaluate_shares", "load_shares"]


@dataclass(frozen=True)
class ShareCase:
    text: str
    kind: str
    lang: str


def load_shares(path: str | Path) -> list[ShareCase]:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise SuiteError(f"{path}: cannot read the suite: {exc}") from None
    items = data.get("shares") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items or not all(isinstance(i, dict) for i in items):
        raise SuiteError(f"{path}: a shares suite is a mapping with a non-empty `shares:` list")
    out = []
    for i, item in enumerate(items):
        text, kind = item.get("text"), item.get("kind")
        if not isinstance(text, str) or not text.strip() or kind not in SHARE_KINDS:
            raise SuiteError(f"{path}: share {i + 1} needs `text` and a `kind` of {', '.join(SHARE_KINDS)}")
        out.append(ShareCase(text, kind, str(item.get("lang") or "")))
    return out


@dataclass
class ShareReport:
    n: int = 0
    right: int = 0
    by_kind: dict[str, list[int]] = field(default_factory=dict)  # expected -> [right, n]
    by_lang: dict[str, list[int]] = field(default_factory=dict)
    glad_wrongly: int = 0  # "that's good to hear" to a share that is not good news
    misses: list[dict[str, Any]] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return self.right / self.n if self.n else 0.0

    @property
    def ok(self) -> bool:
        return self.glad_wrongly == 0


def evaluate_shares(cases: list[ShareCase]) -> ShareReport:
    """Each share read as the tutor reads it; "" (not sure of a kind) counts as plain."""
    from tutor.teach.shares import share_kind
    from tutor.understand import embedder

    report = ShareReport()
    for case, vector in zip(cases, embedder().embed([c.text for c in cases])):
        got = share_kind(case.text, vector) or "plain"
        ok = got == case.kind
        report.n += 1
        report.right += ok
        count(((report.by_kind, case.kind), (report.by_lang, case.lang)), ok)
        report.glad_wrongly += got == "progress" and case.kind != "progress"
        if not ok:
            report.misses.append({"text": case.text, "lang": case.lang, "expected": case.kind, "got": got})
    return report
