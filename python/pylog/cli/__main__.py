"""``python -m pylog.cli``: the ``pylog`` command."""

from pylog.cli import main

main()
