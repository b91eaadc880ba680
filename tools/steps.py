"""Install steps that a learner can follow: each is announced with its command, then timed.

Standard library only: ``course.py`` uses it before anything is installed. ``COURSE_DRY_RUN=1`` prints every step
and runs none.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from pathlib import Path


class Step:
    """One install step: a title for the learner, the command that does it, files written just before it runs."""

    def __init__(self, title: str, argv: list[str], files: dict[Path, str] | None = None):
        self.title, self.argv, self.files = title, argv, files or {}


class StepFailed(RuntimeError):
    """A step's command failed; the message names the step (its own output is above it)."""


def dry_run() -> bool:
    """``COURSE_DRY_RUN=1``: say what would be done, and do nothing."""
    return os.environ.get("COURSE_DRY_RUN") == "1"


def say(message: str) -> None:
    print(f"[course] {message}", flush=True)


def run_steps(steps: list[Step]) -> None:
    """Run the steps in order, each announced with its command and followed by its time."""
    for number, step in enumerate(steps, 1):
        say(f"step {number}/{len(steps)}: {step.title}")
        print(f"         $ {shlex.join(step.argv)}", flush=True)
        if dry_run():
            continue
        for path, text in step.files.items():
            path.write_text(text)
        start = time.monotonic()
        if subprocess.call(step.argv) != 0:
            raise StepFailed(f"step {number}/{len(steps)} failed: {step.title} (see the output above)")
        say(f"step {number}/{len(steps)} done in {time.monotonic() - start:.0f} s")
