"""A small module with a check and a source, written to a temporary modules folder."""

from __future__ import annotations

from pathlib import Path


MINI = """\
id: mini
title: Mini
description: A small module with checks and sources.
language: en
sources:
  - {id: guide, title: The guide, file: mini/guide.md}
phases:
  - id: p
    title: P
    sections:
      - id: s
        title: S
        topics:
          - id: breathing
            title: Breathing
            keywords: [breathe]
            content: Slow breathing calms the body. Breathe out for longer than you breathe in.
            sources: [guide#slow_breathing]
            checks:
              - id: breath_check
                question: How does slow breathing help?
                example_answer: A long slow out-breath calms the body and slows the heart.
                rubric:
                  criteria:
                    - name: long_out_breath
                      description: a long, slow breath out
                      key_points:
                        - {phrase: out-breath, alternatives: [breathe out, exhale]}
                    - name: calming
                      description: how it calms the body
                      key_points: [calm*]
"""

GUIDE = """\
# The guide

A short introduction that belongs to no heading.

## Slow breathing

Breathing out slowly tells the body it can stand down.
It works best with practice.

## Grounding {#grounding}

Name five things you can see.
"""


def write_mini(root: Path, module: str = MINI, guide: str | None = GUIDE) -> Path:
    (root / "mini").mkdir(parents=True, exist_ok=True)
    if guide is not None:
        (root / "mini" / "guide.md").write_text(guide, encoding="utf-8")
    path = root / "mini.yaml"
    path.write_text(module, encoding="utf-8")
    return path
