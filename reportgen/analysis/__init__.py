"""Analysis: pure statistics and views over stored runs (summaries, history, timelines, ceilings)."""
