"""``python -m tickwork``: the same as the ``tickwork`` command."""

from tickwork.cli.main import main

main()
