"""Project configuration: ``[tool.reportgen]`` in ``pyproject.toml`` or a ``reportgen.toml``.

Found from the working directory upwards (the first folder holding ``reportgen.toml``, or a
``pyproject.toml`` with a ``[tool.reportgen]`` table). Every effective value records where it
came from: a command-line flag, an environment variable, the file and key, or the default.
Precedence: flag > environment variable > file > default. Paths in the file are relative to
the folder that holds it. No torch, no I/O beyond reading the one file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reportgen.errors import ConfigError, UsageError
from reportgen.store.location import cache_folder, store_value
from reportgen.text.documents import Limits, load_toml
from reportgen.text.markdown import clip
from reportgen.text.terminal import printable

CONFIG_FILE = "reportgen.toml"
PYPROJECT = "pyproject.toml"
DEVICES = ("auto", "neuron", "cuda", "cpu")
MACHINE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
PARAM_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
ENV_VARS = {"store": "REPORTGEN_STORE", "machine": "REPORTGEN_MACHINE", "device": "REPORTGEN_DEVICE"}
KEYS = ("scenarios", "store", "site", "base_url", "device", "machine", "threshold", "baseline", "params", "sweep",
        "sweep_params")
DEFAULT_ORIGIN = "default"
CONFIG_LIMITS = Limits(max_bytes=16 * 1024 * 1024, max_depth=16)
"""A config file (or a pyproject.toml holding one): 16 MB, 16 levels of tables and arrays."""
SHOWN_CHARS = 60
"""A value from the config echoed in a message is cut to this many characters."""


@dataclass(frozen=True)
class Config:
    """The effective settings of one invocation; ``origins[key]`` says where each value came from."""

    root: Path
    """The folder holding the config file (the working directory when there is none): put on sys.path."""
    file: Path | None
    scenarios: tuple[Path, ...] = ()
    store: Path = Path("results")
    """The store's folder; for an object store (``store_url``), its local cache."""
    store_url: str | None = None
    """An object store's URL (``s3://`` or ``gs://bucket/prefix``), checked and free of credentials; None for a folder."""
    site: Path = Path("site")
    base_url: str = "/"
    device: str = "auto"
    machine: str | None = None
    threshold_pct: float = 5.0
    baseline: str | None = None
    params: Mapping[str, str] = field(default_factory=dict)
    sweep: str | None = None
    """Shapes ``reportgen profile`` also times, as ``--sweep`` takes them (``default``, ``1,4096; 64,4096``)."""
    sweep_params: Mapping[str, str] = field(default_factory=dict)
    """Parameter values ``reportgen profile`` also times, as ``--sweep-param`` takes them: name -> ``v1,v2``."""
    origins: Mapping[str, str] = field(default_factory=dict)

    def origin(self, key: str) -> str:
        """Where ``key``'s value came from (``default`` when nothing set it)."""
        return self.origins.get(key, DEFAULT_ORIGIN)

    def describe(self) -> list[tuple[str, str, str]]:
        """``(key, shown value, origin)`` for every key, in a fixed order: what ``reportgen config`` prints."""
        shown = {
            "scenarios": ", ".join(str(p) for p in self.scenarios) or "(built-in scenarios only)",
            "store": self.store_url or str(self.store),
            "site": str(self.site),
            "base_url": self.base_url,
            "device": self.device,
            "machine": self.machine or "(unnamed: the CPU or device model)",
            "threshold": f"{self.threshold_pct:g} %",
            "baseline": self.baseline or "(each scenario's own)",
            "params": ", ".join(f"{k}={v}" for k, v in sorted(self.params.items())) or "(none)",
            "sweep": self.sweep or "(none: one shape per run)",
            "sweep_params": "; ".join(f"{k}={v}" for k, v in sorted(self.sweep_params.items())) or "(none)",
        }
        return [(k, shown[k], self.origin(k)) for k in KEYS]


def find_config_file(start: Path) -> tuple[Path, dict[str, Any]] | None:
    """The nearest config file from ``start`` upwards and its ``[tool.reportgen]`` table, or None.

    A ``pyproject.toml`` that cannot be read as TOML (not UTF-8, too deep, not TOML at all) is skipped when
    its bytes do not hold the word ``reportgen`` in UTF-8 or UTF-16: it cannot have a ``[tool.reportgen]``
    table, so it belongs to another project (often a parent folder's). One that does hold it is refused.
    """
    for folder in (start, *start.parents):
        own = folder / CONFIG_FILE
        if own.is_file():
            return own, _read_toml(own)
        pyproject = folder / PYPROJECT
        if pyproject.is_file():
            data = _read_pyproject(pyproject)
            tool = data.get("tool", {})
            if isinstance(tool, dict) and "reportgen" in tool:
                table = tool["reportgen"]
                if not isinstance(table, dict):
                    raise ConfigError(f"{pyproject}: [tool.reportgen] must be a table; write it as [tool.reportgen]")
                return pyproject, {"tool": {"reportgen": table}}
    return None


def _read_pyproject(path: Path) -> dict[str, Any]:
    """A ``pyproject.toml``'s TOML; {} for one that fails to parse and cannot be reportgen's (see above)."""
    raw = _read_bytes(path)
    try:
        return load_toml(raw, path, CONFIG_LIMITS, fix="fix the file", error=ConfigError)
    except ConfigError:
        if any(word in raw for word in _REPORTGEN_WORDS):
            raise
        return {}


_REPORTGEN_WORDS = tuple("reportgen".encode(codec) for codec in ("utf-8", "utf-16-le", "utf-16-be"))


def _read_bytes(path: Path) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(CONFIG_LIMITS.max_bytes + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from None


def _read_toml(path: Path) -> dict[str, Any]:
    return load_toml(_read_bytes(path), path, CONFIG_LIMITS, fix="fix the file", error=ConfigError)


def _table(path: Path, data: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The settings table of a config file and the prefix its keys are named with in messages."""
    if path.name == PYPROJECT:
        return data["tool"]["reportgen"], "tool.reportgen."
    return data, ""


def load_config(cwd: Path | None = None, flags: Mapping[str, Any] | None = None,
                environ: Mapping[str, str] | None = None) -> Config:
    """The effective config: the file found from ``cwd`` upwards, then the environment, then ``flags``.

    ``flags`` maps config keys to command-line values; None means the flag was not given.
    """
    cwd = (cwd or Path.cwd()).resolve()
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    found = find_config_file(cwd)
    root, file = cwd, None
    if found is not None:
        file, data = found
        root = file.parent
        table, prefix = _table(file, data)
        for key, raw in table.items():
            values[key] = _parse_file_value(file, prefix, key, raw, root)
            origins[key] = f"{file}: {prefix}{key}"
    for key, var in ENV_VARS.items():
        raw_env = environ.get(var)
        if raw_env:
            values[key] = _parse_text_value(f"${var}", key, raw_env)
            origins[key] = f"environment ${var}"
    for key, raw_flag in (flags or {}).items():
        if raw_flag is None:
            continue
        if key == "params":
            values[key] = {**values.get(key, {}), **raw_flag}
            origins[key] = "flag --param" + (f" over {origins[key]}" if key in origins else "")
            continue
        try:
            values[key] = _parse_text_value(f"--{key.replace('_', '-')}", key, raw_flag)
        except ConfigError as exc:  # a flag's value: a usage error (exit 2), as argparse's own are
            raise UsageError(exc.message) from None
        origins[key] = f"flag --{key.replace('_', '-')}"
    defaults = {"store": root / "results", "site": root / "site"} if file else {}
    kwargs = {("threshold_pct" if k == "threshold" else k): v for k, v in {**defaults, **values}.items()}
    if isinstance(kwargs.get("store"), str):  # an object store: its commands work through a local cache
        kwargs["store_url"] = kwargs["store"]
        kwargs["store"] = cache_folder(kwargs["store"])
    return Config(root=root, file=file, origins=origins, **kwargs)


# --- validation: one line naming the file (or variable, or flag), the key and the fix -------------


def _parse_file_value(file: Path, prefix: str, key: str, raw: Any, root: Path) -> Any:
    where = f"{file}: {prefix}{clip(key, SHOWN_CHARS)}"
    if key not in KEYS:
        raise ConfigError(f"{where}: unknown key; known keys are {', '.join(KEYS)}")
    if key == "scenarios":
        items = [raw] if isinstance(raw, str) else raw
        if not isinstance(items, list) or not items or not all(isinstance(x, str) and x for x in items):
            raise ConfigError(f'{where}: expected a list of scenario files or folders, e.g. ["bench/"]')
        for x in items:
            _check_no_controls(where, x)
        paths = tuple((root / x) for x in items)
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            raise ConfigError(f"{where}: {clip(missing[0], 200)} does not exist; fix the path (relative to {root})")
        return paths
    if key in ("store", "site"):
        if not isinstance(raw, str) or not raw:
            raise ConfigError(f'{where}: expected a folder path as a string, e.g. "{key if key == "site" else "results"}"')
        _check_no_controls(where, raw)
        value = store_value(raw, where) if key == "store" else Path(raw)
        return root / value if isinstance(value, Path) else value
    if key == "sweep":
        items = [raw] if isinstance(raw, str) else raw
        if not isinstance(items, list) or not items or not all(isinstance(x, str) and x.strip() for x in items):
            raise ConfigError(f'{where}: expected "default" or a list of shapes, e.g. ["1,4096", "64,4096"]')
        for x in items:
            _check_no_controls(where, x)
        return "; ".join(x.strip() for x in items)
    if key == "sweep_params":
        if not isinstance(raw, dict) or not raw:
            raise ConfigError(f'{where}: expected a table of parameter values, e.g. sweep_params = {{ eps = ["1e-5", "1e-6"] }}')
        out: dict[str, str] = {}
        for name, values in raw.items():
            items = [values] if isinstance(values, str) else values
            if not PARAM_NAME_RE.fullmatch(str(name)) or not isinstance(items, list) or not items \
                    or not all(isinstance(x, str) and x.strip() and "," not in x for x in items):
                raise ConfigError(f"{where}.{clip(str(name), SHOWN_CHARS)}: expected a list of values as strings, "
                                  'e.g. ["1e-5", "1e-6"]')
            for x in items:
                _check_no_controls(f"{where}.{name}", x)
            out[str(name)] = ",".join(x.strip() for x in items)
        return out
    if key == "params":
        if not isinstance(raw, dict):
            raise ConfigError(f'{where}: expected a table of parameter defaults, e.g. params = {{ eps = "1e-5" }}')
        return _check_params(where, raw)
    kinds = (str, int, float) if key == "threshold" else (str,)
    if isinstance(raw, bool) or not isinstance(raw, kinds):  # machine = 5.5 is a mistake, not the name "5.5"
        raise ConfigError(f"{where} {_shown(raw)}: expected {_EXPECTED[key]}")
    return _parse_text_value(where, key, raw)


_EXPECTED = {
    "base_url": "a path like /myrepo/ or an http(s) URL",
    "device": f"one of {', '.join(DEVICES)}",
    "machine": "a machine name of letters, digits, '.', '_' or '-' (e.g. \"ci-cpu\")",
    "threshold": "a positive number of percent, e.g. 5",
    "baseline": "the name of a variant, e.g. \"naive\"",
    "sweep": "\"default\" or shapes separated by ';', e.g. \"1,4096; 64,4096\"",
}


def _parse_text_value(where: str, key: str, raw: Any) -> Any:
    """A value from the file, the environment or a flag, checked; ``where`` names its origin in errors."""
    if key == "store":
        return store_value(raw, where)
    if key == "site":
        return raw if isinstance(raw, Path) else Path(str(raw))
    if key == "scenarios":
        return tuple(Path(x) for x in raw)
    if key == "threshold":
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise ConfigError(f"{where} {_shown(raw)}: expected {_EXPECTED[key]}") from None
        if not 0 < value < 1000:
            raise ConfigError(f"{where} {_shown(raw)}: expected {_EXPECTED[key]}")
        return value
    text = str(raw)
    _check_no_controls(where, text)
    if key == "device" and text not in DEVICES:
        raise ConfigError(f"{where} {_shown(text)}: expected {_EXPECTED[key]}")
    if key == "machine" and not MACHINE_RE.fullmatch(text):
        raise ConfigError(f"{where} {_shown(text)}: expected {_EXPECTED[key]}")
    if key == "base_url" and not (text.startswith("/") or text.startswith(("https://", "http://"))):
        raise ConfigError(f"{where} {_shown(text)}: expected {_EXPECTED[key]}")
    if key == "baseline" and not PARAM_NAME_RE.fullmatch(text) and not text.replace("-", "_").isidentifier():
        raise ConfigError(f"{where} {_shown(text)}: expected {_EXPECTED[key]}")
    return text


def _check_params(where: str, raw: dict[str, Any]) -> dict[str, str]:
    out = {}
    for name, value in raw.items():
        if not PARAM_NAME_RE.fullmatch(name) or name in ("shape", "dtype", "seed"):
            raise ConfigError(f"{where}.{clip(str(name), SHOWN_CHARS)}: not a parameter name (letters, digits, _; "
                              "not shape/dtype/seed)")
        if isinstance(value, bool):
            out[name] = "true" if value else "false"
        elif isinstance(value, (str, int, float)):
            _check_no_controls(f"{where}.{name}", str(value))
            out[name] = str(value)
        else:
            raise ConfigError(f"{where}.{name}: expected a string or number, e.g. {name} = \"1e-5\"")
    return out


def parse_param_flags(items: list[str] | None) -> dict[str, str]:
    """``["eps=1e-5", "dim=-1"]`` (repeated ``--param``) -> ``{"eps": "1e-5", "dim": "-1"}``."""
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not PARAM_NAME_RE.fullmatch(name):
            raise ConfigError(f"param {_shown(item)}: expected NAME=VALUE, e.g. eps=1e-5", field="param")
        _check_no_controls("param", value.strip(), field="param")
        out[name] = value.strip()
    return out


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _check_no_controls(where: str, text: str, field: str | None = None) -> None:
    """Refuse a control character (a trailing newline, NUL, ESC) in a value: no name, path or number holds one."""
    m = _CONTROL.search(text)
    if m:
        raise ConfigError(f"{where} {_shown(text)}: has the control character {m.group()!r}; remove it", field=field)


def _shown(value: object) -> str:
    """``value`` as a message shows it: repr, cut to SHOWN_CHARS (a 10 MB value is not echoed whole)."""
    return repr(clip(value, SHOWN_CHARS)) if isinstance(value, str) else clip(repr(value), SHOWN_CHARS)


def print_config(config: Config) -> None:
    """``reportgen config``: the effective values and where each came from."""
    print(f"config file: {config.file or '(none found from ' + str(Path.cwd()) + ' upwards: defaults)'}")
    print(f"project root (on sys.path for scenarios): {config.root}")
    width = max(len(k) for k in KEYS)
    for key, shown, origin in config.describe():
        print(f"{key:<{width}}  {printable(shown)}  [{printable(origin)}]")

