"""The one type of every numeric command-line option: `inputs.number`'s rule (finite, decimal, in range, whole where
the option counts things), checked by argparse while the command line is parsed, so a bad value exits 2 before any
input is read or any workload runs (`--dry-run` included)."""
from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from madengine_rocprof import inputs

# a year: a longer time limit is no limit, and Infinity or NaN would reach run.json (strict JSON refuses them)
MAX_TIMEOUT_S = 366 * 24 * 3600


def number_option(low: float = -math.inf, high: float = math.inf, *, integer: bool = False,
                  low_open: bool = False) -> Callable[[str], int | float]:
    """An argparse `type=`: the value by `inputs.number`, or argparse's error (exit 2) with what to give."""

    def parse(raw: str) -> int | float:
        try:
            return inputs.number(raw, low=low, high=high, integer=integer, low_open=low_open)
        except ValueError as err:
            what, _, give = str(err).partition("; ")
            raise argparse.ArgumentTypeError(f"{what}\n  fix: {give}") from None

    parse.__name__ = "whole number" if integer else "number"  # argparse names the type in its messages
    return parse


COUNT = number_option(1, 1_000_000, integer=True)            # --top N and similar: at least one
COUNT_OR_ZERO = number_option(0, 1_000_000, integer=True)
NAME_WIDTH = number_option(1, 100_000, integer=True)        # characters of a kernel name shown
PERCENT = number_option(0, 100)
SECONDS = number_option(0, MAX_TIMEOUT_S, low_open=True)    # a time limit
PEAK = number_option(0, 1e9, low_open=True)                 # a device peak (GB/s, TFLOP/s): positive
