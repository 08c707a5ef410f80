"""The wheel's package list: every package folder under reportgen/ is shipped (a new subpackage must be listed)."""

from __future__ import annotations

import tomllib
from conftest import ROOT


def test_every_package_folder_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "reportgen").rglob("__init__.py")
               if "__pycache__" not in p.parts}
    assert on_disk <= listed, sorted(on_disk - listed)
    assert config["package-dir"] == {"reportgen.templates": "templates", "reportgen.scenarios": "scenarios"}
    assert {"reportgen.templates", "reportgen.scenarios"} <= listed
