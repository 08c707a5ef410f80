"""Interleaved A/B profiling: base and head measured in alternating rounds on one machine (``reportgen ab``).

``settings`` (how a pair is measured and judged: ``ab``'s defaults), ``pair`` (what a pair measured and
concluded: side reports, variant outcomes, rounds), ``session`` (one session's conversation with its two
workers: load, warm, rounds in ABBA order), ``coordinator`` (the sessions and the verdict), ``worker`` (one
process per side), ``process`` (the workers as child processes), ``bundles`` (both sides stored as runs of one
pair), ``report`` (the PR comment and the JSON document), ``command`` (the entry point: ``AbRequest`` ->
exit code). The paired statistics over sessions are ``analysis.paired``.
"""
