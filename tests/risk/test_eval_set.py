"""The labelled set keeps the screen honest: its goals are asserted here so they cannot
regress, and the held-out set's numbers guard how well the phrases generalise."""

from __future__ import annotations

from pathlib import Path

from tutor.risk.evaluate import DEFAULT_SET, MAX_FALSE_POSITIVE_RATE, MIN_RECALL, evaluate, format_report, load_labelled_set

HOLDOUT = Path(__file__).parent / "holdout_messages.yaml"


def test_the_labelled_set_is_big_enough_and_bilingual(config):
    messages = load_labelled_set(DEFAULT_SET, set(config.labels))
    assert len(messages) >= 90
    vietnamese = [m for m in messages if m.language == "vi"]
    assert len(vietnamese) / len(messages) >= 0.30
    assert any(m.text.isascii() for m in vietnamese) and any(not m.text.isascii() for m in vietnamese)
    for label in config.labels:
        assert sum(label in m.labels for m in messages) >= 5, label
    assert sum(not m.labels for m in messages) >= 60


def test_the_screen_meets_its_goals_on_the_labelled_set_per_label_and_overall(config):
    report = evaluate(load_labelled_set(DEFAULT_SET, set(config.labels)), config, rounds=1)
    assert report.failures() == [], format_report(report)
    assert report.recall() >= MIN_RECALL and report.false_positive_rate() <= MAX_FALSE_POSITIVE_RATE


def test_held_out_numbers_do_not_regress(config):
    # Measured when the held-out set was written (phrases never tuned on it): recall 30%,
    # false positives 3.4%. A phrase list generalises poorly to new wordings; these floors
    # only stop it getting worse. Raise them when a broader vocabulary lifts the numbers.
    report = evaluate(load_labelled_set(HOLDOUT, set(config.labels)), config, rounds=1)
    print(format_report(report, show_misses=False))
    assert report.recall() >= 0.30, format_report(report)
    assert report.false_positive_rate() <= 0.05, format_report(report)
