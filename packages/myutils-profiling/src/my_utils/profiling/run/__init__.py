"""The run model: one run's files, read once, and what the analysis makes of them (ARCHITECTURE.md §9).

``inputs`` says what each file of a run is and which rank it belongs to; ``read`` reads them all
once, in parallel across files; ``api`` is the notebook's door onto the same run the
``analyze`` command opens (``open_run``).
"""
