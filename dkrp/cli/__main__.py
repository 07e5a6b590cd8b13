"""``python -m dkrp.cli``: the ``dkrp`` command (as ``python -m dkrp``)."""

import sys

from . import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
