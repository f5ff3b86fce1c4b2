"""`tutor teach eval [--set PATH ...] [--json]`.

Measures the teaching core on evidence suites, set by set (default: the project's own
suites in evals/teach, the development set evals/teach/dev that tuning may look at, and
the held-out set evals/teach/holdout that it never does): what a message is doing (intent
accuracy), retrieval top-1 and top-3 and refusal of off-topic and medical questions, and the
built-in judge's agreement with score bands (and who reaches mastery). Exits 1 when a goal
is missed in any set, 2 when a suite or its module cannot be used.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tutor.content.modules import REPO_ROOT

SUITES = REPO_ROOT / "evals" / "teach"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("teach", help="measure intent, retrieval and the built-in judge on the teaching suites")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    ev = actions.add_parser("eval", help="intent, retrieval and judge numbers per set; exit 1 below the goals")
    ev.add_argument("--set", dest="sets", action="append", type=Path, metavar="PATH",
                    help="a suite file or a folder of them (questions*, answers*, intents*, shares*.yaml); repeatable. "
                         "Default: the project's own suites, then evals/teach/dev and evals/teach/holdout")
    ev.add_argument("--questions", type=Path, help="one question suite (instead of the sets)")
    ev.add_argument("--answers", type=Path, help="one answer suite (instead of the sets)")
    ev.add_argument("--modules-dir", type=Path, help="where modules live (default: TUTOR_MODULES_DIR or ./modules)")
    ev.add_argument("-k", type=int, default=3, help="passages retrieved per question (default 3)")
    ev.add_argument("--json", action="store_true", help="print one JSON document instead of the tables")
    ev.add_argument("--misses", type=int, default=10, help="misses to list per suite (default 10)")
    ev.set_defaults(func=run_eval)
    prep = actions.add_parser("prepare", help="build what reading messages by meaning needs now (kept on disk)")
    prep.add_argument("--modules-dir", type=Path, help="where modules live (default: TUTOR_MODULES_DIR or ./modules)")
    prep.set_defaults(func=run_prepare)


def run_prepare(args: argparse.Namespace) -> int:
    import time

    from tutor.content.modules import load_library

    started = time.perf_counter()
    return 0 if teaching_ready(list(load_library(args.modules_dir).modules.values()), started,
                               "tutor teach prepare") else 1


def teaching_ready(modules: list, started: float, command: str) -> bool:
    """Build what reading messages by meaning needs for `modules` (tutor.teach.understanding.warm)
    and say on stderr how it went."""
    import time

    from tutor.teach.understanding import warm

    if not warm(modules):
        print(f"{command}: the semantic layer is not installed (see the message above)", file=sys.stderr)
        return False
    print(f"teaching ready: {len(modules)} module(s), {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return True


def _suite_files(args: argparse.Namespace) -> list[tuple[str, Path, str]]:
    """(set name, file, kind) for every suite file to run; the kind is the file name's start
    (questions, answers, intents) unless given by --questions or --answers."""
    if args.questions or args.answers:
        return [("given", path, kind) for path, kind in ((args.questions, "question"), (args.answers, "answer"))
                if path]
    out = []
    for path in args.sets or [SUITES, SUITES / "dev", SUITES / "holdout"]:
        files = sorted(p for p in path.glob("*.yaml")) if path.is_dir() else [path]
        name = {SUITES: "own", SUITES / "dev": "dev", SUITES / "holdout": "holdout"}.get(path, str(path))
        out += [(name, file, file.stem.split("_")[0].rstrip("s")) for file in files]
    return out


def run_eval(args: argparse.Namespace) -> int:
    from tutor.content.modules import ModuleNotServable, load_library
    from tutor.teach.suites import (
        GOALS,
        SuiteError,
        evaluate_intents,
        evaluate_judge,
        evaluate_retrieval,
        load_answers,
        load_intents,
        load_questions,
    )
    from tutor.teach.share_suite import evaluate_shares, load_shares

    reports: list[dict] = []
    try:
        library = load_library(args.modules_dir)
        plan = []
        for name, path, kind in _suite_files(args):
            if kind == "share":  # read the same in every module
                plan.append((name, path, None, kind, load_shares(path)))
                continue
            loader = {"question": load_questions, "answer": load_answers, "intent": load_intents}.get(kind)
            if loader is None:
                raise SuiteError(f"{path}: a suite file's name starts with questions, answers, intents or shares")
            module = library.get(_suite_module(path))
            plan.append((name, path, module, kind, loader(path, module)))
    except (SuiteError, ModuleNotServable, OSError) as exc:
        print(f"tutor teach eval: {exc}", file=sys.stderr)
        return 2
    screen = _screen(library)
    ok = True
    for name, path, module, kind, cases in plan:
        if kind == "share":
            report = evaluate_shares(cases)
            entry = {"n": report.n, "right": report.right, "accuracy": report.accuracy,
                     "by_kind": {k: {"right": v[0], "n": v[1]} for k, v in report.by_kind.items()},
                     "by_lang": {k: {"right": v[0], "n": v[1]} for k, v in report.by_lang.items()},
                     "glad_wrongly": report.glad_wrongly, "misses": report.misses}
        elif kind == "question":
            report = evaluate_retrieval(module, cases, k=args.k)
            entry = {"groups": {g: t.rates() for g, t in report.groups.items()}, "passages": report.passages,
                     "query_ms_p50": round(report.query_ms_p50, 3), "misses": report.misses}
        elif kind == "answer":
            report = evaluate_judge(module, cases)
            entry = {"n": report.n, "within_band": report.within, "agreement": report.agreement,
                     "by_kind": {k: {"within": v[0], "n": v[1]} for k, v in report.by_kind.items()},
                     "by_lang": {k: {"within": v[0], "n": v[1]} for k, v in report.by_lang.items()},
                     "good_mastered": report.good_mastered, "good": report.good,
                     "wrongly_mastered": report.wrongly_mastered, "examples_mastered": report.examples_mastered,
                     "examples": report.examples, "ms_per_answer": round(report.ms_per_answer, 3),
                     "misses": report.misses}
        else:
            report = evaluate_intents(module, cases, screen)
            entry = {"n": report.n, "right": report.right, "accuracy": report.accuracy,
                     "by_intent": {k: {"right": v[0], "n": v[1]} for k, v in report.by_intent.items()},
                     "by_lang": {k: {"right": v[0], "n": v[1]} for k, v in report.by_lang.items()},
                     "answers_missed": report.answers_missed, "judged_non_answers": report.judged_non_answers,
                     "misses": report.misses}
        passed = report.ok if kind != "intent" else report.accuracy >= GOALS["intent"]
        ok &= passed
        reports.append({"set": name, "file": str(path), "module": module.id if module else "any", "kind": kind,
                        "ok": passed, **entry})
    if args.json:
        print(json.dumps({"goals": GOALS, "ok": ok, "suites": reports}, ensure_ascii=False, indent=2))
    else:
        _print(reports, args.misses)
        print(f"\n{'all goals met' if ok else 'BELOW GOALS'}")
    return 0 if ok else 1


def _screen(library):
    """The offline safety screen as the app runs it: a message it flags never reaches teaching."""
    from tutor.risk.config import load_safety
    from tutor.risk.offline import offline_screen

    config, semantic = load_safety(), library.semantic
    return lambda text: offline_screen(text, config, semantic)


def _pct(right: int, n: int) -> str:
    return f"{right}/{n} = {right / n:.1%}" if n else "-"


def _print(reports: list[dict], misses: int) -> None:
    from tutor.teach.suites import GOALS

    current = None
    for r in reports:
        if r["set"] != current:
            current = r["set"]
            print(f"\n=== set {current} ===")
        print(f"\n{r['kind']}s: {r['file']} (module {r['module']})")
        if r["kind"] == "question":
            print(f"  {'group':<9}{'n':>4}{'top-1':>8}{'top-3':>8}   refused (off topic, medical)   wrongly refused")
            for g, t in r["groups"].items():
                print(f"  {g:<9}{t['n']:>4}{t['top1']:>8.1%}{t['top3']:>8.1%}   "
                      f"{round(t['refused'] * t['refusals'])}/{t['refusals']}{'':<22}{t['wrongly_refused']:.1%}")
            shown = [m for m in r["misses"]][:misses]
            for m in shown:
                print(f"    miss [{m['lang']}] {m['question'][:90]!r}: expected {m['expected']}, "
                      f"read {m['intent']}, got {m['got'][:3]}")
        elif r["kind"] == "share":
            print(f"  right {_pct(r['right'], r['n'])}; glad at news that is not good: {r['glad_wrongly']}")
            print("  by kind " + ", ".join(f"{k} {v['right']}/{v['n']}" for k, v in sorted(r["by_kind"].items()))
                  + "; by language " + ", ".join(f"{k} {v['right']}/{v['n']}" for k, v in r["by_lang"].items()))
            for m in r["misses"][:misses]:
                print(f"    [{m['lang']}] {m['text'][:80]!r}: expected {m['expected']}, read {m['got']}")
        elif r["kind"] == "answer":
            print(f"  within band {_pct(r['within_band'], r['n'])} (goal {GOALS['judge']:.0%}); by kind "
                  + ", ".join(f"{k} {v['within']}/{v['n']}" for k, v in r["by_kind"].items())
                  + "; by language " + ", ".join(f"{k} {v['within']}/{v['n']}" for k, v in r["by_lang"].items()))
            print(f"  good answers at mastery {_pct(r['good_mastered'], r['good'])}; wrong, swapped or gaming "
                  f"at mastery: {len(r['wrongly_mastered'])}; example answers mastered "
                  f"{r['examples_mastered']}/{r['examples']}; {r['ms_per_answer']:.2f} ms per answer")
            for m in r["misses"][:misses]:
                print(f"    judge {m['check']} ({m['kind']}, band {m['band']}) scored {m['score']}: "
                      f"{m['answer'][:100]!r}")
        else:
            print(f"  right {_pct(r['right'], r['n'])}; answers not judged {r['answers_missed']}, "
                  f"other messages judged as answers {r['judged_non_answers']}")
            print("  by intent " + ", ".join(f"{k} {v['right']}/{v['n']}" for k, v in sorted(r["by_intent"].items()))
                  + "; by language " + ", ".join(f"{k} {v['right']}/{v['n']}" for k, v in r["by_lang"].items()))
            for m in r["misses"][:misses]:
                print(f"    [{m['lang']}] {m['text'][:80]!r} (check {m['check']}): expected {m['expected']}, "
                      f"read {m['got']}")


def _suite_module(path: Path) -> str:
    import yaml

    from tutor.teach.suites import SuiteError

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise SuiteError(f"{path}: cannot read the suite: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("module"), str):
        raise SuiteError(f"{path}: set `module:` to a module id")
    return data["module"]
