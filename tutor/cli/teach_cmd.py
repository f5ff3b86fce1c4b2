"""`tutor teach eval [--questions FILE] [--answers FILE] [--module ID] [--json]`.

Measures the teaching core on the repository's evidence suites: retrieval top-1 and top-3
accuracy (overall, per language, and on the held-out questions) and the built-in judge's
agreement with the answer suite's score bands, plus index build and query times. Exits 1
when a goal is missed (top-1 >= 85%, top-3 >= 95%, judge within band >= 90%, every check's
example answer mastered), 2 when a suite or the module cannot be used.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tutor.modules import REPO_ROOT

SUITES = REPO_ROOT / "evals" / "teach"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("teach", help="measure retrieval and the built-in judge on the teaching suites")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    ev = actions.add_parser("eval", help="retrieval accuracy and judge agreement; exit 1 below the goals")
    ev.add_argument("--questions", type=Path, default=SUITES / "questions.yaml", help="question suite")
    ev.add_argument("--answers", type=Path, default=SUITES / "answers.yaml", help="answer suite")
    ev.add_argument("--modules-dir", type=Path, help="where modules live (default: TUTOR_MODULES_DIR or ./modules)")
    ev.add_argument("-k", type=int, default=3, help="passages retrieved per question (default 3)")
    ev.add_argument("--json", action="store_true", help="print one JSON document instead of the tables")
    ev.add_argument("--misses", type=int, default=10, help="misses to list (default 10)")
    ev.set_defaults(func=run_eval)


def run_eval(args: argparse.Namespace) -> int:
    from tutor.modules import ModuleNotServable, load_library
    from tutor.teach.suites import GOALS, SuiteError, evaluate_judge, evaluate_retrieval, load_answers, load_questions

    try:
        library = load_library(args.modules_dir)
        module_id = _suite_module(args.questions)
        module = library.get(module_id)
        questions = load_questions(args.questions, module)
        answers = load_answers(args.answers, module)
    except (SuiteError, ModuleNotServable) as exc:
        print(f"tutor teach eval: {exc}", file=sys.stderr)
        return 2
    retrieval = evaluate_retrieval(module, questions, k=args.k)
    judge = evaluate_judge(module, answers)
    ok = retrieval.ok and judge.ok
    if args.json:
        print(json.dumps({
            "module": module.id,
            "goals": GOALS,
            "ok": ok,
            "retrieval": {
                "k": args.k,
                "groups": {name: t.rates() for name, t in retrieval.groups.items()},
                "passages": retrieval.passages,
                "build_ms": round(retrieval.build_ms, 2),
                "query_ms_p50": round(retrieval.query_ms_p50, 3),
                "query_ms_max": round(retrieval.query_ms_max, 3),
                "misses": retrieval.misses,
            },
            "judge": {
                "n": judge.n,
                "within_band": judge.within,
                "agreement": judge.agreement,
                "by_kind": {k: {"within": v[0], "n": v[1]} for k, v in judge.by_kind.items()},
                "examples_mastered": judge.examples_mastered,
                "examples": judge.examples,
                "ms_per_answer": round(judge.ms_per_answer, 3),
                "misses": judge.misses,
            },
        }, ensure_ascii=False, indent=2))
        return 0 if ok else 1
    print(f"Teaching suites for module {module.id}\n")
    print(f"Retrieval ({len(questions)} questions, {retrieval.passages} passages, k={args.k}); "
          f"goals top-1 >= {GOALS['top1']:.0%}, top-3 >= {GOALS['top3']:.0%}")
    print(f"  {'group':<10}{'n':>4}{'top-1':>9}{'top-3':>9}   strict (expected topic only)")
    for name, tally in retrieval.groups.items():
        r = tally.rates()
        print(f"  {name:<10}{tally.n:>4}{r['top1']:>9.1%}{r['top3']:>9.1%}   "
              f"{r['strict_top1']:.1%} / {r['strict_top3']:.1%}")
    print(f"  index build {retrieval.build_ms:.1f} ms; query p50 {retrieval.query_ms_p50:.2f} ms, "
          f"max {retrieval.query_ms_max:.2f} ms")
    print(f"\nBuilt-in judge ({judge.n} answers); goal within band >= {GOALS['judge']:.0%}")
    print(f"  within band: {judge.within}/{judge.n} = {judge.agreement:.1%}   "
          + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in judge.by_kind.items()))
    print(f"  example answers at or above their threshold: {judge.examples_mastered}/{judge.examples}")
    print(f"  {judge.ms_per_answer:.2f} ms per answer")
    if args.misses > 0:
        for miss in retrieval.misses[:args.misses]:
            mark = "top-3" if miss["top3"] else "MISS "
            print(f"\n{mark} [{miss['lang']}] {miss['question']}\n      expected {miss['expected']}, got {miss['got']}")
        for miss in judge.misses[:args.misses]:
            print(f"\nJUDGE {miss['check']} ({miss['kind']}, band {miss['band']}) scored {miss['score']}: "
                  f"{miss['answer'][:160]!r}")
    print(f"\n{'all goals met' if ok else 'BELOW GOALS'}")
    return 0 if ok else 1


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
