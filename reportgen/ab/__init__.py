"""Interleaved A/B profiling: base and head measured in alternating rounds on one machine (``reportgen ab``).

``settings`` (how a pair is measured and judged: ``ab``'s defaults), ``pairstats`` (pure statistics over
rounds), ``worker`` (one process per side), ``coordinator``
(the rounds and the verdict), ``drift`` (widening a stored-run comparison by between-run drift),
``command`` (the CLI edge: processes, bundles, the comment).
"""
