"""Comparing two stored runs: the diff, its statistics and its report."""
