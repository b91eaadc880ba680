"""``python3 course.py remake [what]``: regenerate what the lessons and tests compare against, from one table.

Standard library only. Every regenerator of the project is an entry of :data:`REMAKES`, with the command it runs in
the course's environment; ``remake --list`` prints them, ``remake NAME ...`` runs those, ``remake all`` every one
(hours: it trains every shipped model and measures every band). ``COURSE_DRY_RUN=1`` prints the commands and runs
nothing. The modules the commands name keep their ``main`` (``python -m ...`` still works); this is the one door.

A lesson that trains adds its entries here: its shipped weights, and its bands, measured by the shared band system
(``attention_lib/training/bands.py``) from the lesson's ``training/<slug>/band_figures.py`` (``LESSON``, ``KINDS``,
``figures(seed)``). An entry runs a module (``module(...)``) or a function (``call("module:function")``).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Remake:
    """One regenerator: what it makes, the arguments of the environment's Python that make it, and how long."""

    what: str
    argv: tuple[str, ...]
    takes: str


def module(name: str, *args: str) -> tuple[str, ...]:
    """``python -m name args...``."""
    return ("-m", name, *args)


def call(target: str, *args: str) -> tuple[str, ...]:
    """``python -c`` that calls ``module:function`` with ``args`` (strings); a non-zero int it returns fails."""
    name, _, function = target.partition(":")
    return ("-c", f"import sys, {name} as m; r = m.{function}(*sys.argv[1:]); sys.exit(r if type(r) is int else 0)",
            *args)


BANDS = "attention_lib.training.bands"
#: Every regenerator, by the name ``remake`` takes.
REMAKES: dict[str, Remake] = {
    "weights-12": Remake("lesson 12's shipped models (training/trained/reversal.pt, agreement*.pt)",
                         module("attention_lib.training.learning_to_attend"), "about 1 min"),
    "weights-13": Remake("lesson 13's shipped models (training/trained/induction-*.pt)",
                         module("attention_lib.training.induction_heads"), "about 1 min"),
    "weights-15": Remake("lesson 15's shipped models (training/trained/generation-*.pt)",
                         module("attention_lib.training.generation"), "about 3 min"),
    "weights-17": Remake("lesson 17's shipped latent models (training/trained/latent-*.pt)",
                         module("attention_lib.training.latent_and_paged"), "about 3 min"),
    "weights-18": Remake("lesson 18's shipped drafts (training/trained/draft-*.pt)",
                         module("attention_lib.training.speculative_decoding"), "about 1 min"),
    "bands-12": Remake("lesson 12's bands (training/bands_measured.py), 5 seeds on 3 CPU paths",
                       module(BANDS, "--lesson", "12"), "about 30 min"),
    "bands-13": Remake("lesson 13's bands (training/bands_measured.py), 5 seeds on 3 CPU paths",
                       module(BANDS, "--lesson", "13"), "about 15 min"),
    "bands-15": Remake("lesson 15's bands (training/bands_measured.py), 5 seeds on 3 CPU paths",
                       module(BANDS, "--lesson", "15"), "about 10 min"),
    "held-out-13": Remake("lesson 13's bands checked on seeds 10-14, which they were not fitted on "
                          "(training/induction_heads/bands_held_out.py)", module(BANDS, "--held-out", "--lesson", "13"),
                          "about 3 min"),
    "held-out-15": Remake("lesson 15's bands checked on seeds 10-14, which they were not fitted on "
                          "(training/generation/bands_held_out.py)", module(BANDS, "--held-out", "--lesson", "15"),
                          "about 3 min"),
    "study-13": Remake("lesson 13's recipe on seeds 0-9: its claims and controls (training/induction_heads/"
                       "study_measured.py)", module("attention_lib.training.induction_heads.study"), "about 8 min"),
    "study-15": Remake("lesson 15's recipe on seeds 0-9: the bug gallery, MHA and MQA (training/generation/"
                       "study_measured.py)", module("attention_lib.training.generation.study"), "about 8 min"),
    "study-19": Remake("lesson 19's four variants on lessons 13's and 15's tasks over seeds 0-4, and the sweep of "
                       "copying against the state's size (training/linear_attention/study_measured.py, "
                       "sweep_measured.py)", module("attention_lib.training.linear_attention.study"), "about 25 min"),
    "attraction": Remake("lesson 12's attraction study (training/learning_to_attend/attraction_measured.py)",
                         module("attention_lib.training.learning_to_attend.attraction"), "about 30 min"),
    "seeds-12": Remake("lesson 12's seed study, its interventions and controls on 12 seeds of both recipes, 4 more "
                       "to check (training/learning_to_attend/over_seeds_measured.py)",
                       module("attention_lib.training.learning_to_attend.over_seeds"), "about 10 min"),
    "triton-targets": Remake("lesson 14's kernel compiled for a T4, an A100 and an H100: the table its launch "
                             "configs are checked against (Linux, Triton)",
                             module("attention_lib.memory_efficient.triton_targets"), "about 5 min"),
    "readme-figure": Remake("the README's figure, docs/12_learned_attention.png",
                            ("-c", "from attention_lib.plotting import plot_shipped_overview; "
                                   "plot_shipped_overview().savefig('docs/12_learned_attention.png', dpi=100)"),
                            "seconds"),
}


def table() -> str:
    """The entries as ``remake --list`` prints them: name, what it makes, how long, and its command."""
    width = max(map(len, REMAKES))
    lines = []
    for name, entry in REMAKES.items():
        lines.append(f"{name:<{width}}  {entry.what} ({entry.takes})")
        lines.append(f"{'':<{width}}  $ python {shlex.join(entry.argv)}")
    return "\n".join(lines)


def main(args: list[str], python: str | None = None, *, dry: bool = False) -> int:
    """Run the entries named in ``args`` (``all``: every one) with ``python``; ``--list`` or nothing: the table."""
    if not args or args == ["--list"]:
        print(f"python3 course.py remake NAME ... (or all), each in the course's environment:\n\n{table()}")
        return 0
    names = list(REMAKES) if args == ["all"] else args
    unknown = [n for n in names if n not in REMAKES]
    if unknown:
        print(f"{unknown} are not entries of remake; the entries:\n\n{table()}", file=sys.stderr)
        return 2
    for name in names:
        argv = [python or sys.executable, *REMAKES[name].argv]
        print(f"[remake] {name}: {REMAKES[name].what}\n         $ {shlex.join(argv)}", flush=True)
        if not dry and subprocess.call(argv, cwd=ROOT) != 0:
            print(f"[remake] {name} failed", file=sys.stderr)
            return 1
    return 0
