"""The run model's types: what every tool home and the diagnosis above them exchange.

``report`` (facts, findings, the analysis report and its schema version), ``scores``,
``tool_facts`` (the fact shape the nsys and ncu homes produce), ``rank_coverage`` (which ranks an
input covers). Pure data and small helpers: it imports only the formats and hardware layers below.
"""
