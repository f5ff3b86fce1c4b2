"""The offline safety screen's cost: `python -m benchmarks.safety_bench`.

Screens every message of the labelled sets (evals/safety/*.yaml: learners' messages of
every length, English and Vietnamese) and prints CPU time per message (this process's
CPU, so a busy machine's other work does not count) at p50, p95 and p99 for:

- baseline: the embedding model alone, one call on the whole message (the floor any
  semantic reading pays), measured in the same run;
- phrases: the phrase layer alone;
- both layers as the app runs them (phrases, windows, embeddings, classifier);

with the ratio of both layers to the baseline, the cost of a 4,000-character message (the
longest the app accepts), the process's memory before and after loading the model and the
classifier, and the time to load them from the disk cache. Goal (issue: safety by
meaning): both layers <= 25 ms of CPU per message at p99, <= 300 MB added per process.
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

from tutor.risk.evaluate import DEFAULT_SET, DEV_SET, HOLDOUT_SET, load_labelled_set

GOAL_P99_MS = 25.0
GOAL_MB = 300.0


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def percentiles(values: list[float]) -> tuple[float, float, float]:
    """p50, p95 and p99 of `values` (the nearest rank at or above)."""
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return pick(0.50), pick(0.95), pick(0.99)


def _cpu_ms(call, texts: list[str]) -> list[float]:
    out = []
    for text in texts:
        started = time.process_time()
        call(text)
        out.append((time.process_time() - started) * 1000)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--rounds", type=int, default=1, help="passes over the messages (default 1)")
    args = parser.parse_args(argv)

    from tutor.content.modules import load_library
    from tutor.risk import load_safety
    from tutor.risk.offline import offline_screen
    from tutor.risk.screen import screen
    from tutor.understand import embedder

    config = load_safety()
    texts = [m.text for path in (DEFAULT_SET, DEV_SET, HOLDOUT_SET) if Path(path).exists()
             for m in load_labelled_set(path)] * max(1, args.rounds)
    before = _rss_mb()
    started = time.perf_counter()
    model = embedder()
    semantic = load_library().semantic
    load_s = time.perf_counter() - started
    after = _rss_mb()
    if semantic is None:
        print("no semantic layer: see the error above")
        return 1
    # Each pass meets texts it has not seen: the model keeps recent texts, which would make
    # a second pass free. The keeper is emptied between the measured calls instead.
    fresh = lambda call: lambda text: (model._kept.clear(), call(text))  # noqa: E731, SLF001

    baseline = _cpu_ms(fresh(lambda text: model.embed([text])), texts)
    phrases = _cpu_ms(lambda text: screen(text, config), texts)
    both = _cpu_ms(fresh(lambda text: offline_screen(text, config, semantic)), texts)
    long_text = (" ".join(texts))[:4000]
    long_ms = _cpu_ms(fresh(lambda text: offline_screen(text, config, semantic)), [long_text] * 3)

    print(f"{len(texts)} messages (mean {sum(map(len, texts)) / len(texts):.0f} characters), CPU per message")
    print(f"{'':26}{'p50':>9}{'p95':>9}{'p99':>9}")
    rows = [("baseline: embedding alone", baseline), ("phrases alone", phrases), ("both layers", both)]
    for name, values in rows:
        p50, p95, p99 = percentiles(values)
        print(f"{name:26}{p50:8.2f} {p95:8.2f} {p99:8.2f}  ms")
    b50, b95, b99 = percentiles(baseline)
    o50, o95, o99 = percentiles(both)
    print(f"{'both / baseline':26}{o50 / b50:8.2f}x{o95 / b95:8.2f}x{o99 / b99:8.2f}x")
    print(f"4000-character message: {sum(long_ms) / len(long_ms):.0f} ms of CPU")
    print(f"model and classifier: loaded in {load_s:.2f} s (from the disk cache), memory {before:.0f} -> "
          f"{after:.0f} MB (+{after - before:.0f} MB)")
    print(f"goals: p99 <= {GOAL_P99_MS:.0f} ms ({'met' if o99 <= GOAL_P99_MS else 'NOT met'}), "
          f"<= {GOAL_MB:.0f} MB added ({'met' if after - before <= GOAL_MB else 'NOT met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
