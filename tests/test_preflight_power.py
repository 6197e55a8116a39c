"""benchmarks/preflight_power.py: the pre-flight's flag probability per probe groups, from a task's rollouts."""

from __future__ import annotations

import random
from math import comb

import pytest

from benchmarks.preflight_power import flag_probability

EPS = 0.05


def test_one_group_flags_a_task_at_its_dead_rate():
    rewards = [0.0] * 8 + [1.0] * 8
    assert flag_probability(rewards, 4, 1, EPS, random.Random(0)) == pytest.approx(2 * comb(8, 4) / comb(16, 4))


@pytest.mark.parametrize(("rewards", "lo", "hi"), [([0.0] * 16, 1.0, 1.0), ([0.0] * 8 + [1.0] * 8, 0.0, 0.02)])
def test_two_groups_flag_a_dead_task_always_and_a_varying_one_almost_never(rewards, lo, hi):
    assert lo <= flag_probability(rewards, 4, 2, EPS, random.Random(0)) <= hi
