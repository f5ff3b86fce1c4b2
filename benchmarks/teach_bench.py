"""Reading a learner's message for teaching, its cost: `python -m benchmarks.teach_bench`.

Every message of the teaching sets (evals/teach/dev and holdout: questions, answers and
lesson messages, English and Vietnamese) is read as a turn reads it, and this process's CPU
time per message (a busy machine's other work does not count) is printed at p50 and p95:

- baseline: words only, as before the semantic layer (the intent rules, BM25 retrieval);
- by meaning: what the app runs (one embedding call for the message and, with a check
  open, the check; the intent reader; hybrid retrieval with the topic reader);
- the built-in judge on every answer of the answer sets;

with by-meaning's ratio to the baseline. Goal (issue: teach by meaning): understanding +
retrieval + judging <= 30 ms of CPU per turn at p95, the model loaded once per process.
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml

GOAL_P95_MS = 30.0
ROOT = Path(__file__).resolve().parents[1]


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def _cpu_ms(work) -> float:
    start = time.thread_time()
    work()
    return (time.thread_time() - start) * 1000


def main() -> int:
    from tutor.content.modules import load_library
    from tutor.teach.builtin_judge import judge_builtin
    from tutor.teach.intent import classify
    from tutor.teach.retrieval import retrieve
    from tutor.teach.understanding import check_text, understand, warm
    from tutor.understand import embedder
    from tutor.understand.embedder import MAX_CHARS

    library = load_library()
    warm(library.modules.values())  # from the disk cache; what a worker does at start
    cases = []  # (module, text, check or None)
    answers = []  # (check, text)
    for name in ("dev", "holdout"):
        for path in sorted((ROOT / "evals" / "teach" / name).glob("*.yaml")):
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
            if "module" not in data:  # shares: read the same in every module, not timed here
                continue
            module = library.get(data["module"])
            for item in data.get("questions") or ():
                cases.append((module, item["q"], None))
            for item in data.get("intents") or ():
                found = module.find_check(item["check"]) if item.get("check") else None
                cases.append((module, item["text"], found[1] if found else None))
            for item in data.get("answers") or ():
                found = module.find_check(item["check"])
                answers.append((found[1], item["text"]))
    model = embedder()
    words, meaning, judging = [], [], []
    for module, text, check in cases:
        if check is not None:
            model.embed([check_text(check)])  # a check's words: embedded once, then kept
        words.append(_cpu_ms(lambda m=module, t=text, c=check: (
            classify(t, check_open=c is not None), retrieve(m, t, k=3, on_topic_only=True))))

        def read(m=module, t=text, c=check):
            vectors = model.embed([t] + ([check_text(c)] if c else []))
            understand(m, t, vectors[0], vectors[1] if c else None)

        model._kept.pop(text[:MAX_CHARS], None)  # noqa: SLF001 - embedded afresh, as a new message is
        meaning.append(_cpu_ms(read))
    for check, text in answers:
        judging.append(_cpu_ms(lambda c=check, t=text: judge_builtin(c, t)))
    print(f"{len(cases)} messages, {len(answers)} answers; CPU ms per message (this thread)")
    print(f"  {'':<28}{'p50':>8}{'p95':>8}")
    print(f"  {'baseline: words only':<28}{_p(words, .5):>8.2f}{_p(words, .95):>8.2f}")
    print(f"  {'by meaning (the app)':<28}{_p(meaning, .5):>8.2f}{_p(meaning, .95):>8.2f}"
          f"   x{_p(meaning, .95) / max(_p(words, .95), 1e-6):.1f} the baseline at p95")
    print(f"  {'built-in judge':<28}{_p(judging, .5):>8.2f}{_p(judging, .95):>8.2f}")
    total = _p(meaning, .95) + _p(judging, .95)
    print(f"understanding + retrieval + judging at p95: {total:.1f} ms (goal <= {GOAL_P95_MS:.0f} ms): "
          f"{'met' if total <= GOAL_P95_MS else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
