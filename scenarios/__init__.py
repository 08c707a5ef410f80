"""reportgen's built-in scenarios (one file per workload): package data, found with importlib.resources."""
