"""A hostile user at the ``kvbudget`` command line (issue 13).

Every bad input ends, within 5 seconds, in exactly one ``kvbudget: error: ...``
line on stderr with exit status 2 (usage) or 1 (planning, output), and never a
traceback: numbers too big for 64 bits (refused before they are computed, so
``1e9999999999`` does not hang), malformed separators, negative byte counts,
configs that are huge, endless (``/dev/zero``), binary, not UTF-8 or nested
10,000 deep, output paths that cannot be written, and a stdout that fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from kvbudget.cli import main
from kvbudget.cli.numbers import INT64_MAX, parse_bytes, parse_int

from hf_configs import LLAMA_2_LAYERS

GIB = 1 << 30
TIMEOUT_S = 5
ENV = {**os.environ, "COLUMNS": "160", "NO_COLOR": "1"}
ENV.pop("KVBUDGET_DEBUG", None)
SCRIPT = shutil.which("kvbudget")
LLAMA = ["plan", "llama-3.1-8b", "--available", "40GiB"]
SWEEP = ["sweep", "llama-3.1-8b", "--available", "40GiB", "--vary", "tp", "--values", "1", "2",
         "--no-progress"]  # fmt: skip
LLAMA_CONFIG = LLAMA_2_LAYERS


def run(
    *args: str, stdout: int | None = subprocess.PIPE, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m kvbudget.cli ARGS``, killed after TIMEOUT_S seconds (a hang fails the test)."""
    return subprocess.run(
        [sys.executable, "-m", "kvbudget.cli", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV if env is None else env,
        timeout=TIMEOUT_S,
    )


def assert_one_error_line(r: subprocess.CompletedProcess[str], statuses: set[int]) -> str:
    """Exit status in ``statuses``, stderr exactly one ``kvbudget: error:`` line; returns it."""
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode in statuses, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("kvbudget: error: "), r.stderr
    return lines[0]


# --------------------------------------------------------------------------- files


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The hostile files, written once."""
    d = tmp_path_factory.mktemp("hostile")
    (d / "latin1.json").write_bytes(b'{"model_type": "caf\xe9"}')
    (d / "binary.bin").write_bytes(bytes(range(256)) * 64)
    (d / "deep.json").write_text("[" * 10_000 + "]" * 10_000)
    (d / "deep_objects.json").write_text('{"a":' * 10_000 + "1" + "}" * 10_000)
    deep100 = json.loads("[" * 100 + "]" * 100)
    (d / "deep100.json").write_text(json.dumps({**LLAMA_CONFIG, "x": deep100}))
    (d / "list.json").write_text("[1, 2, 3]")
    (d / "huge.json").write_text('{"a": "' + "x" * 20_000_000 + '"}')  # 20 MB
    # 16 MiB of containers or numbers: under the size limit, refused before parsing
    (d / "wide.json").write_text('{"a": [' + "[]," * 5_000_000 + "[]]}")
    (d / "numbers.json").write_text('{"a": [' + "1," * 8_000_000 + "1]}")
    (d / "bigint.json").write_text(json.dumps({**LLAMA_CONFIG, "head_dim": 10**30}))
    (d / "manydigits.json").write_text('{"a": ' + "1" * 5000 + "}")
    (d / "empty.json").write_text("")
    (d / "llama.json").write_text(json.dumps(LLAMA_CONFIG))
    (d / "config_dir").mkdir()
    (d / "a_dir").mkdir()
    readonly = d / "readonly.csv"
    readonly.write_text("")
    readonly.chmod(0o444)
    if hasattr(os, "mkfifo"):
        os.mkfifo(d / "fifo")
    return d


def _unwritable(d: Path) -> str:
    """A file that cannot be written: read-only (root writes those anyway: /proc/version)."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        if not Path("/proc/version").exists():
            pytest.skip("root, and no /proc/version to fail a write")
        return "/proc/version"
    return str(d / "readonly.csv")


# Each case: (the arguments given the files' folder, the exit statuses allowed, a text the
# error line must hold).
Case = tuple[Callable[[Path], list[str]], set[int], str]
CASES: dict[str, Case] = {
    # numbers beyond signed 64 bits, refused before they are computed
    "available 1e400": (lambda d: ["plan", "--available", "1e400"], {2}, "beyond 2**63-1"),
    "available 2**63": (
        lambda d: ["plan", "--available", str(2**63)], {2}, "beyond 2**63-1"
    ),
    "available 1e9999999999": (
        lambda d: ["plan", "--available", "1e9999999999"], {2}, "beyond 2**63-1"
    ),
    "available 2e10TiB": (lambda d: ["plan", "--available", "2e10TiB"], {2}, "beyond 2**63-1"),
    "available 400 digits": (lambda d: ["plan", "--available", "9" * 400], {2}, "longer than"),
    "tp 10**30": (lambda d: [*LLAMA, "--tp", str(10**30)], {2}, "2**63-1"),
    "tp 5000 digits": (lambda d: [*LLAMA, "--tp", "7" * 5000], {2}, "longer than"),
    "page-size 2**63": (lambda d: [*LLAMA, "--page-size", str(2**63)], {2}, "2**63-1"),
    "draft 20-digit layers": (
        lambda d: [*LLAMA, "--draft", "eagle3:12345678901234567890"], {2}, "beyond 2**63-1"
    ),
    "weights-gib 1e308": (
        lambda d: ["plan", "llama-3.1-8b", "--gpu", "h100", "--weights-gib", "1e308"],
        {2},
        "beyond 2**63-1",
    ),
    "weights-gib inf": (
        lambda d: ["plan", "llama-3.1-8b", "--gpu", "h100", "--weights-gib", "inf"], {2}, "finite"
    ),
    "max-running-requests 2**64": (
        lambda d: [*LLAMA, "--max-running-requests", str(2**64)], {2}, "2**63-1"
    ),
    "swa-eviction-interval -2**63-1": (
        lambda d: [*LLAMA, f"--swa-eviction-interval={-(2**63) - 1}"], {2}, ">= -2**63"
    ),
    # byte counts: separators, signs, not numbers
    "available 1,,,0GiB": (
        lambda d: ["plan", "--available", "1,,,0GiB"], {2}, "malformed thousands separators"
    ),
    "available 10,00GiB": (
        lambda d: ["plan", "--available", "10,00GiB"], {2}, "malformed thousands separators"
    ),
    "available 1__0": (
        lambda d: ["plan", "--available", "1__0"], {2}, "malformed thousands separators"
    ),
    "available -5GiB": (lambda d: ["plan", "--available", "-5GiB"], {2}, "negative"),
    "available=-5GiB": (lambda d: ["plan", "--available=-5GiB"], {2}, "negative"),
    "available empty": (lambda d: ["plan", "--available", ""], {2}, "not a byte count"),
    "available nan": (lambda d: ["plan", "--available", "nan"], {2}, "not a byte count"),
    "available inf": (lambda d: ["plan", "--available", "inf"], {2}, "not a byte count"),
    "available 40XB": (lambda d: ["plan", "--available", "40XB"], {2}, "unknown unit"),
    # other flags
    "tp 0": (lambda d: [*LLAMA, "--tp", "0"], {2}, ">= 1"),
    "tp -1": (lambda d: [*LLAMA, "--tp", "-1"], {2}, ">= 1"),
    "tp fullwidth digits": (lambda d: [*LLAMA, "--tp", "\uff11\uff12"], {2}, "expected an integer"),
    "page-size 1.5": (lambda d: [*LLAMA, "--page-size", "1.5"], {2}, "expected an integer"),
    "ratio nan": (lambda d: [*LLAMA, "--ratio", "nan"], {2}, "finite"),
    "unknown flag": (lambda d: [*LLAMA, "--bogus"], {2}, "unrecognized arguments: --bogus"),
    "unknown flag of models": (lambda d: ["models", "--tp", "2"], {2}, "unrecognized"),
    "command typo plna": (lambda d: ["plna"], {2}, "did you mean plan?"),
    "command typo swep": (lambda d: ["swep", "--vary", "tp"], {2}, "did you mean sweep?"),
    "command typo modles": (lambda d: ["modles"], {2}, "did you mean models?"),
    "model name 100k long": (lambda d: ["a" * 100_000, "--available", "1GiB"], {2}, "unknown"),
    "non-UTF-8 argument": (lambda d: ["plan", "--gpu", "\udcff"], {2}, "unknown GPU"),
    # configs
    "config not UTF-8": (
        lambda d: ["plan", "--config", str(d / "latin1.json"), "--available", "1GiB"],
        {2},
        "not UTF-8",
    ),
    "config binary": (
        lambda d: ["plan", "--config", str(d / "binary.bin"), "--available", "1GiB"],
        {2},
        "not UTF-8",
    ),
    "config 10,000 deep lists": (
        lambda d: ["plan", "--config", str(d / "deep.json"), "--available", "1GiB"],
        {1, 2},
        "nested deeper than 64",
    ),
    "config 10,000 deep objects": (
        lambda d: ["plan", "--config", str(d / "deep_objects.json"), "--available", "1GiB"],
        {2},
        "nested deeper than 64",
    ),
    "config 100 deep": (
        lambda d: ["plan", "--config", str(d / "deep100.json"), "--available", "1GiB"],
        {2},
        "nested deeper than 64",
    ),
    "config a JSON list": (
        lambda d: ["plan", "--config", str(d / "list.json"), "--available", "1GiB"],
        {1},
        "expected a JSON object, got list",
    ),
    "config 20 MB": (
        lambda d: ["plan", "--config", str(d / "huge.json"), "--available", "1GiB"],
        {2},
        "larger than 16 MiB",
    ),
    "config 5 million arrays": (
        lambda d: ["plan", "--config", str(d / "wide.json"), "--available", "1GiB"],
        {2},
        "more than 100,000 JSON arrays",
    ),
    "config 8 million numbers": (
        lambda d: ["plan", "--config", str(d / "numbers.json"), "--available", "1GiB"],
        {2},
        "1,000,000 values",
    ),
    "config /dev/zero": (
        lambda d: ["plan", "--config", "/dev/zero", "--available", "1GiB"],
        {2},
        "larger than 16 MiB",
    ),
    "config integer beyond 64 bits": (
        lambda d: ["plan", "--config", str(d / "bigint.json"), "--available", "1GiB"],
        {1},
        "'head_dim'",
    ),
    "config 5000-digit integer": (
        lambda d: ["plan", "--config", str(d / "manydigits.json"), "--available", "1GiB"],
        {1},
        "not valid JSON",
    ),
    "config empty": (
        lambda d: ["plan", "--config", str(d / "empty.json"), "--available", "1GiB"],
        {1},
        "not valid JSON",
    ),
    "config missing": (
        lambda d: ["plan", "--config", str(d / "nope.json"), "--available", "1GiB"],
        {1},
        "no such file",
    ),
    "config dir without config.json": (
        lambda d: ["plan", "--config", str(d / "config_dir"), "--available", "1GiB"],
        {1},
        "no such file",
    ),
    "config FIFO without a writer": (
        lambda d: ["plan", "--config", str(d / "fifo"), "--available", "1GiB"],
        {1},
        "not valid JSON",
    ),
    "draft config 10,000 deep": (
        lambda d: [*LLAMA, "--draft", f"standalone:{d / 'deep_objects.json'}"],
        {2},
        "nested deeper than 64",
    ),
    "draft config not UTF-8": (
        lambda d: [*LLAMA, "--draft", f"eagle3:{d / 'latin1.json'}"], {2}, "not UTF-8"
    ),
    # outputs
    "out in a missing directory": (
        lambda d: [*SWEEP, "--out", str(d / "missing" / "x.csv")], {2}, "does not exist"
    ),
    "plot in a missing directory": (
        lambda d: [*SWEEP, "--plot", str(d / "missing" / "x.png")], {2}, "does not exist"
    ),
    "out is a directory": (lambda d: [*SWEEP, "--out", str(d / "a_dir")], {2}, "is a directory"),
    "out unwritable": (lambda d: [*SWEEP, "--out", _unwritable(d)], {1, 2}, "--out"),
    "out a FIFO without a reader": (
        lambda d: [*SWEEP, "--out", str(d / "fifo")], {1}, "no process reads"
    ),
    "out and plot the same file": (
        lambda d: [*SWEEP, "--out", str(d / "x.png"), "--plot", str(d / "x.png")], {2}, "same file"
    ),
    # sweep and ratio values
    "sweep tp 10**21": (
        lambda d: ["sweep", "--vary", "tp", "--values", str(10**21), "--no-progress"],
        {2},
        "2**63-1",
    ),
    "sweep stop 1e400": (
        lambda d: ["sweep", "--vary", "tp", "--start", "1", "--stop", "1e400", "--no-progress"],
        {2},
        "finite",
    ),
    "sweep available stop 1e400": (
        lambda d: ["sweep", "--vary", "available", "--start", "1GiB", "--stop", "1e400"],
        {2},
        "beyond 2**63-1",
    ),
    "sweep steps 10**9": (
        lambda d: ["sweep", "--vary", "tp", "--start", "1", "--stop", "2", "--steps", "1000000000"],
        {2},
        "<= 10,000",
    ),
    "sweep 10,001 values": (
        lambda d: ["sweep", "--vary", "tp", "--values", ",".join(["1"] * 10_001)],
        {2},
        "at most 10,000",
    ),
    "ratio weights abc": (
        lambda d: ["ratio", "--context-lengths", "100", "--weights", "abc", "--available", "40GiB"],
        {2},
        "--weights",
    ),
    "ratio context length 10**27": (
        lambda d: ["ratio", "--context-lengths", str(10**27), "--available", "40GiB"],
        {2},
        "2**63-1",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_input_is_one_error_line(case: str, files: Path) -> None:
    build, statuses, text = CASES[case]
    args = build(files)
    if "fifo" in " ".join(args) and not (files / "fifo").exists():
        pytest.skip("no FIFOs here")
    line = assert_one_error_line(run(*args), statuses)
    assert text in line, line


def test_plot_bad_format_is_a_usage_error(files: Path) -> None:
    pytest.importorskip("matplotlib")
    line = assert_one_error_line(run(*SWEEP, "--plot", str(files / "x.xyz")), {2})
    assert "cannot write .xyz" in line
    assert not (files / "x.xyz").exists()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
@pytest.mark.parametrize(
    "args",
    [LLAMA, [*LLAMA, "--json"], ["models"], ["models", "--json"], [*SWEEP, "--out", "-"]],
    ids=["plan", "plan-json", "models", "models-json", "sweep-csv"],
)
def test_stdout_on_a_full_device(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        r = run(*args, stdout=full.fileno())
    line = assert_one_error_line(r, {1})
    assert "cannot write the output" in line and "No space left" in line


@pytest.mark.skipif(not hasattr(os, "pipe") or sys.platform == "win32", reason="POSIX pipes")
@pytest.mark.parametrize("args", [LLAMA, ["models", "--json"]], ids=["plan", "models-json"])
def test_stdout_a_closed_pipe(args: list[str]) -> None:
    read, write = os.pipe()
    os.close(read)  # nobody reads: every write fails with EPIPE
    try:
        r = run(*args, stdout=write)
    finally:
        os.close(write)
    line = assert_one_error_line(r, {1})
    assert "broken pipe" in line


def test_entry_point_script() -> None:
    if SCRIPT is None:
        pytest.skip("no kvbudget script on PATH")
    r = subprocess.run(
        [SCRIPT, "plan", "--available", "1e400"], capture_output=True, text=True, env=ENV,
        timeout=TIMEOUT_S,
    )  # fmt: skip
    assert "beyond 2**63-1" in assert_one_error_line(r, {2})


# --------------------------------------------------------------------------- what still works


def test_thousands_separators_still_work() -> None:
    ok = run("plan", "llama-3.1-8b", "--available", "1,000GiB", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["budget"]["available_bytes"] == 1000 * GIB
    assert_one_error_line(run("plan", "llama-3.1-8b", "--available", "1,,,0GiB"), {2})


def test_config_from_a_pipe_and_a_file(files: Path) -> None:
    r = run("plan", "--config", str(files / "llama.json"), "--available", "1GiB", "--json")
    assert r.returncode == 0, r.stderr
    if sys.platform != "win32":  # /dev/stdin: a pipe, read to its end
        p = subprocess.run(
            [sys.executable, "-m", "kvbudget.cli", "plan", "--config", "/dev/stdin",
             "--available", "1GiB", "--json"],
            input=json.dumps(LLAMA_CONFIG), capture_output=True, text=True, env=ENV,
            timeout=TIMEOUT_S,
        )  # fmt: skip
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["plan"] == json.loads(r.stdout)["plan"]


def test_sweep_writes_csv_and_plot(files: Path) -> None:
    out = files / "ok.csv"
    r = run(*SWEEP, "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_text().startswith("vary,value,")


def test_debug_shows_the_traceback() -> None:
    r = run("plan", "--available", "1e400", env={**ENV, "KVBUDGET_DEBUG": "1"})
    assert r.returncode == 2
    assert "Traceback" in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("kvbudget: error: ")


def test_a_bug_is_reported_as_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import kvbudget.cli.models

    def broken(args: object) -> int:
        raise TypeError("a bug")

    monkeypatch.setattr(kvbudget.cli.models, "run", broken)
    monkeypatch.delenv("KVBUDGET_DEBUG", raising=False)
    assert main(["models"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kvbudget: error: internal error: TypeError: a bug")
    assert "KVBUDGET_DEBUG=1" in err[0]


# --------------------------------------------------------------------------- the parsers


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1,000GiB", 1000 * GIB),
        ("1,000,000", 10**6),
        ("1_000_000", 10**6),
        ("1,000.5 KiB", 1000 * 1024 + 512),
        ("1e3", 1000),
        ("1.5e3MiB", 1500 << 20),
        ("5e-1GiB", GIB // 2),
        ("0e9999999999", 0),
        ("1e-9999999999", 0),
        ("-0", 0),
        ("+2GiB", 2 * GIB),
        (str(INT64_MAX), INT64_MAX),
        ("8388607TiB", 8388607 << 40),
        ("8388607.5TiB", (8388607 << 40) + (1 << 39)),
    ],
)
def test_parse_bytes_values(text: str, value: int) -> None:
    assert parse_bytes(text) == value


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (str(INT64_MAX + 1), "beyond 2**63-1"),
        ("8EiB", "unknown unit"),
        ("8388608TiB", "beyond 2**63-1"),
        ("1e19", "beyond 2**63-1"),
        ("1e9999999999", "beyond 2**63-1"),
        ("-5GiB", "negative"),
        ("-1", "negative"),
        ("1,,,0GiB", "malformed"),
        (",100", "not a byte count"),
        ("100,", "malformed"),
        ("1,0000", "malformed"),
        ("1,000_000", "malformed"),
        ("", "not a byte count"),
        (".", "not a byte count"),
        ("1" * 101, "longer than"),
    ],
)
def test_parse_bytes_refusals(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("*", r"\*")):
        parse_bytes(text)


def test_parse_int_bounds() -> None:
    assert parse_int(str(INT64_MAX)) == INT64_MAX
    assert parse_int(str(-(2**63))) == -(2**63)
    for bad in (str(2**63), str(-(2**63) - 1), "1.5", "", "1e3", "9" * 200):
        with pytest.raises(ValueError):
            parse_int(bad)
    with pytest.raises(ValueError, match=">= 1"):
        parse_int("0", 1)
