"""Project configuration: found from the working directory upwards, every value with its origin,
flags over environment over file over defaults, and a bad value as one line naming file, key and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from reportgen.cli import main
from reportgen.config import load_config, parse_param_flags
from reportgen.errors import ConfigError


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_pyproject_table_found_from_a_subfolder(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n\n[tool.reportgen]\nscenarios = ["bench"]\n'
                                       'store = "out/results"\nmachine = "ci-cpu"\nthreshold = 2.5\n')
    (tmp_path / "bench").mkdir()
    sub = tmp_path / "src" / "deep"
    sub.mkdir(parents=True)
    cfg = load_config(sub, environ={})
    assert cfg.file == tmp_path.resolve() / "pyproject.toml" and cfg.root == tmp_path.resolve()
    assert cfg.scenarios == (tmp_path.resolve() / "bench",)
    assert cfg.store == tmp_path.resolve() / "out" / "results"  # relative to the file, not to the cwd
    assert cfg.site == tmp_path.resolve() / "site"
    assert cfg.machine == "ci-cpu" and cfg.threshold_pct == 2.5
    assert cfg.origin("machine") == f"{tmp_path.resolve() / 'pyproject.toml'}: tool.reportgen.machine"
    assert cfg.origin("device") == "default" and cfg.device == "auto"


def test_reportgen_toml_wins_over_a_pyproject_without_the_table(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n')
    write(tmp_path / "reportgen.toml", 'device = "cpu"\n[params]\neps = 1e-5\n')
    cfg = load_config(tmp_path, environ={})
    assert cfg.file == tmp_path.resolve() / "reportgen.toml"
    assert cfg.device == "cpu" and cfg.params == {"eps": "1e-05"}
    assert cfg.origin("params") == f"{tmp_path.resolve() / 'reportgen.toml'}: params"


def test_no_file_means_defaults_relative_to_the_cwd(tmp_path: Path) -> None:
    cfg = load_config(tmp_path, environ={})
    assert cfg.file is None and cfg.store == Path("results") and cfg.site == Path("site")
    assert cfg.threshold_pct == 5.0 and cfg.base_url == "/" and cfg.machine is None
    assert all(origin == "default" for _k, _v, origin in cfg.describe())


def test_precedence_flag_over_environment_over_file(tmp_path: Path) -> None:
    write(tmp_path / "reportgen.toml", 'machine = "from-file"\ndevice = "cpu"\nstore = "r"\n[params]\neps = "1"\n'
                                       'dim = "-1"\n')
    env = {"REPORTGEN_MACHINE": "from-env", "REPORTGEN_STORE": "/elsewhere"}
    cfg = load_config(tmp_path, environ=env)
    assert (cfg.machine, cfg.origin("machine")) == ("from-env", "environment $REPORTGEN_MACHINE")
    assert cfg.store == Path("/elsewhere")
    cfg = load_config(tmp_path, flags={"machine": "from-flag", "device": None, "params": {"eps": "2"}}, environ=env)
    assert (cfg.machine, cfg.origin("machine")) == ("from-flag", "flag --machine")
    assert cfg.device == "cpu" and cfg.origin("device").endswith("reportgen.toml: device")  # None: not given
    assert cfg.params == {"eps": "2", "dim": "-1"} and cfg.origin("params").startswith("flag --param over ")


@pytest.mark.parametrize(("text", "message"), [
    ('threshold = "fast"\n', r"reportgen.toml: threshold 'fast': expected a positive number of percent"),
    ('threshold = -1\n', r"reportgen.toml: threshold -1: expected a positive number"),
    ('device = "tpu"\n', r"reportgen.toml: device 'tpu': expected one of auto, neuron, cuda, cpu"),
    ('machine = "my laptop"\n', r"reportgen.toml: machine 'my laptop': expected a machine name of letters"),
    ('scenarios = ["nope/"]\n', r"reportgen.toml: scenarios: .*nope does not exist; fix the path"),
    ('scenarios = 3\n', r"reportgen.toml: scenarios: expected a list of scenario files or folders"),
    ('store = 1\n', r"reportgen.toml: store: expected a folder path as a string"),
    ('base_url = "repo"\n', r"reportgen.toml: base_url 'repo': expected a path like /myrepo/ or an http\(s\) URL"),
    ('treshold = 5\n', r"reportgen.toml: treshold: unknown key; known keys are scenarios, store"),
    ('params = 3\n', r"reportgen.toml: params: expected a table of parameter defaults"),
    ('[params]\nshape = "1"\n', r"reportgen.toml: params.shape: not a parameter name"),
    ('threshold = \n', r"reportgen.toml: not valid TOML"),
])
def test_bad_value_names_the_file_the_key_and_the_fix(tmp_path: Path, text: str, message: str) -> None:
    write(tmp_path / "reportgen.toml", text)
    with pytest.raises(ConfigError, match=message):
        load_config(tmp_path, environ={})


def test_bad_value_in_pyproject_names_the_table_key(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.reportgen]\ndevice = 3\n')
    with pytest.raises(ConfigError, match=r"pyproject.toml: tool.reportgen.device 3: expected one of auto"):
        load_config(tmp_path, environ={})


def test_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match=r"\$REPORTGEN_MACHINE '../x': expected a machine name"):
        load_config(Path("/"), environ={"REPORTGEN_MACHINE": "../x"})


def test_a_bad_flag_value_is_a_usage_error(tmp_path: Path) -> None:
    from reportgen.errors import UsageError

    with pytest.raises(UsageError, match=r"^--machine 'a b': expected a machine name"):
        load_config(tmp_path, flags={"machine": "a b"}, environ={})


def test_param_flags() -> None:
    assert parse_param_flags(["eps=1e-5", "dim = -1"]) == {"eps": "1e-5", "dim": "-1"}
    with pytest.raises(ConfigError, match=r"^param 'eps': expected NAME=VALUE, e.g. eps=1e-5$") as err:
        parse_param_flags(["eps"])
    assert err.value.as_flag_message() == "--param 'eps': expected NAME=VALUE, e.g. eps=1e-5"


def test_config_command_prints_values_and_origins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "reportgen.toml", 'machine = "box"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REPORTGEN_STORE", raising=False)
    monkeypatch.delenv("REPORTGEN_MACHINE", raising=False)
    monkeypatch.setenv("REPORTGEN_DEVICE", "cpu")
    assert main(["config"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"config file: {tmp_path.resolve() / 'reportgen.toml'}"
    rows = {line.split()[0]: line for line in out[2:]}
    assert rows["machine"].split()[1] == "box" and rows["machine"].endswith("reportgen.toml: machine]")
    assert rows["device"].endswith("[environment $REPORTGEN_DEVICE]") and " cpu " in rows["device"]
    assert rows["threshold"].endswith("[default]")


def test_a_bad_config_is_one_line_exit_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "reportgen.toml", 'threshold = "x"\n')
    monkeypatch.chdir(tmp_path)
    assert main(["runs"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"reportgen: error: {tmp_path.resolve() / 'reportgen.toml'}: "
                                                   "threshold 'x': expected a positive number of percent")
    assert not (tmp_path / "results").exists()


def test_build_and_compare_take_their_defaults_from_the_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from factories import synthetic_run, write_synthetic

    write(tmp_path / "reportgen.toml", 'store = "store"\nsite = "public"\nthreshold = 60\nbase_url = "/proj/"\n')
    for i in range(4):  # steady earlier runs: the drift between runs is known, so a change can gate
        write_synthetic(tmp_path / "store", synthetic_run(run_id=f"r-hist{i}", created_utc=f"2026-11-29T0{i}:00:00Z"))
    write_synthetic(tmp_path / "store", synthetic_run())
    write_synthetic(tmp_path / "store", synthetic_run(run_id="r-head", created_utc="2026-11-30T00:01:00Z",
                                                      times_us={"naive": 150.0, "fused": 60.0, "compiled": 30.0}))
    sub = tmp_path / "sub"
    sub.mkdir()
    monkeypatch.chdir(sub)
    monkeypatch.delenv("REPORTGEN_STORE", raising=False)
    assert main(["compare", "latest~1", "latest", "--fail-on-regression"]) == 0  # +50 % < threshold 60
    assert main(["compare", "latest~1", "latest", "--fail-on-regression", "--threshold", "5"]) == 1
    assert main(["build"]) == 0
    assert (tmp_path / "public" / "index.html").is_file() and not (sub / "site").exists()
    assert '"base_url": "/proj/"' in (tmp_path / "public" / "manifest.json").read_text()


def test_scenarios_names_lists_what_profile_runs_by_default_without_loading(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["scenarios", "--names"]) == 0
    assert capsys.readouterr().out == "rmsnorm\n"  # no config: profile's default
    write(tmp_path / "bench" / "softer.py", "raise SystemExit('never loaded')\n")
    write(tmp_path / "bench" / "_helpers.py", "")
    write(tmp_path / "more.py", "")
    write(tmp_path / "reportgen.toml", 'scenarios = ["bench/", "more.py"]\n')
    assert main(["scenarios", "--names"]) == 0
    assert capsys.readouterr().out == "softer\nmore\n"


def test_ab_takes_threshold_and_device_defaults_from_the_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import reportgen.ab.command
    from reportgen.ab.command import AbRequest

    seen: list[AbRequest] = []
    monkeypatch.setattr(reportgen.ab.command, "run_ab_command", lambda request: seen.append(request) or 0)
    monkeypatch.chdir(tmp_path)
    for var in ("REPORTGEN_STORE", "REPORTGEN_DEVICE"):
        monkeypatch.delenv(var, raising=False)
    write(tmp_path / "reportgen.toml", 'threshold = 12\ndevice = "cpu"\nstore = "st"\nparams = { eps = "1e-5" }\n')
    assert main(["ab", "--base", ".", "--head", "."]) == 0
    assert main(["ab", "--base", ".", "--head", ".", "--threshold", "3", "--device", "auto"]) == 0
    first, second = seen
    assert (first.settings.threshold_pct, first.settings.device, first.store) == (12.0, "cpu", tmp_path.resolve() / "st")
    assert dict(first.settings.param_defaults) == {"eps": "1e-5"}  # the scenario parameters' defaults, for both workers
    assert (second.settings.threshold_pct, second.settings.device) == (3.0, "auto")
