"""Views: what a run's analysis looks like to a reader (the fourth layer of ARCHITECTURE.md §9).

The report pages still live in ``reports/``; this package holds the views added with the
notebook API and the terminal headline: report tables as pandas DataFrames (``frames``), the
report's charts as plotly Figures built by the same function the page draws with (``figures``),
and the headline as terminal lines (``terminal``). Nothing here computes a number.
"""
