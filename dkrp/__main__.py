"""``python -m dkrp``: the ``dkrp`` command (see :mod:`dkrp.cli`)."""

from .cli import main

if __name__ == "__main__":  # pragma: no cover - exercised through a subprocess
    main(prog_name="dkrp")
