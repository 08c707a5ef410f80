"""reportgen's templates, stylesheet, icon and help page: package data, found with importlib.resources."""
