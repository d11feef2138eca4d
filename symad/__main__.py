"""``python -m symad``: the ``symad`` command line (see :mod:`symad.cli`)."""

import sys

from symad.cli import main

if __name__ == "__main__":
    sys.exit(main())
