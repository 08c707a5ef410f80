"""The run model: typed records of a run, their JSON codec and schema migrations (the bottom layer)."""
