"""``python -m dataflow viz ...``: see :mod:`dataflow.cli`."""
import sys

from .cli import main

sys.exit(main())
