"""The study modules' doctests (small hand-checked examples of the verifiers and the statistics) hold."""

import doctest

import pytest

from teamrl.study import cells, power_plan, protocol, provenance
from teamrl.tasks import split_calc, split_nav


@pytest.mark.parametrize("module", [protocol, cells, power_plan, provenance, split_calc, split_nav])
def test_doctests(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
