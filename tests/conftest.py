"""Shared pytest fixtures."""
import pytest

import dataflow as df


@pytest.fixture
def graph():
    """A fresh graph installed as the default graph for the test, so op names and
    counts are predictable and tests do not see each other's ops."""
    with df.Graph().as_default() as g:
        yield g
