"""``python -m my_utils.core`` runs the ``myutils`` CLI."""

from my_utils.core.cli import main

main()
