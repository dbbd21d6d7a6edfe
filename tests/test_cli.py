"""The ``tilecute`` command behaves like other Python tools, and what the docs and messages
say of it exists: ``--help`` / ``--version`` / ``python -m tilecute``, exit status 0 / 1 / 2,
one-line errors on stderr, the commands and environment variables the docs name.

More per-command tests: test_cache.py (``cache``), test_compile.py (``show``),
test_autotune.py (``tune``), test_export.py (``export`` / ``verify``)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from test_cache import fake_build, key_for
from tilecute import cache
from tilecute.cli import build_parser, main
from tilecute.options import PASS_CONFIGS, from_pass_configs

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _tilecute(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "tilecute", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def test_version_and_help_on_stdout():
    from tilecute import __version__

    r = _tilecute("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"tilecute {__version__}" and not r.stderr
    r = _tilecute("--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: tilecute")
    assert "Exit status: 0 success, 1 failure, 2 usage error" in " ".join(r.stdout.split())
    for command in ("cache", "show", "tune", "export", "verify"):
        assert re.search(rf"^\s+{command}\s", r.stdout, re.M), command


@pytest.mark.parametrize("argv", [["cache"], ["cache", "ls"], ["cache", "clear"],
                                  ["cache", "verify"], ["cache", "path"], ["show"], ["tune"],
                                  ["tune", "ls"], ["tune", "show"], ["tune", "clear"],
                                  ["export"], ["verify"]])
def test_every_command_has_help(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main([*argv, "--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0 and out.startswith(f"usage: tilecute {' '.join(argv)}")


def test_show_a_folder_that_is_not_an_entry(cache_dir, tmp_path, capsys):
    # a path is a folder the user meant: said so, not "not a cache key"
    assert main(["show", str(tmp_path / "nowhere")]) == 1
    captured = capsys.readouterr()
    assert captured.err == f"tilecute: error: {tmp_path / 'nowhere'} is not a cache entry " \
                           "folder (no manifest.json)\n" and captured.out == ""
    assert main(["show", str(tmp_path)]) == 1
    assert "is not a cache entry folder" in capsys.readouterr().err
    # an entry folder and a key prefix print the same source
    path = cache.get_or_build(key_for("shown"), fake_build(function="shown"))
    assert main(["show", str(path)]) == 0
    by_folder = capsys.readouterr().out
    assert main(["show", path.name[:10]]) == 0
    assert capsys.readouterr().out == by_folder == (path / "kernel_cute.py").read_text()
    assert main(["show", path.name[:10], "--kind", "abi"]) == 0
    assert '"function": "shown"' in capsys.readouterr().out
    # a kind the entry lacks (fake_build writes no ir_script.txt): named, exit 1
    assert main(["show", path.name[:10], "--kind", "script"]) == 1
    assert capsys.readouterr().err == f"tilecute: error: {path} has no ir_script.txt " \
                                      "(--kind script)\n"


def test_counts_are_singular_for_one(cache_dir, capsys):
    cache.get_or_build(key_for("one"), fake_build(function="one"))
    assert main(["cache", "ls"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("1 entry, ")
    assert main(["cache", "verify"]) == 0
    assert capsys.readouterr().out.startswith("1 entry checked, 0 damaged")


@pytest.mark.parametrize("source, shown", [
    ("def f(:\n", ["bad.py\", line 1", "SyntaxError"]),
    ("import math\nraise RuntimeError('boom at import')\n",
     ["bad.py\", line 2, in <module>", "raise RuntimeError('boom at import')",
      "RuntimeError: boom at import"]),
    ("import tilecute.language as T\n\n@T.prim_func\ndef f(A: T.Tensor((16,), 'float16')):\n"
     "    with T.Kernel(1, threads=32) as bx:\n        T.no_such_form(A)\n",
     ["bad.py:6: in prim_func 'f': T.no_such_form is not a tilecute form"]),
    # raised in tilecute's runtime package (its own folder in an editable install)
    ("import tilecute\nimport tilecute.language as T\n\n@T.prim_func\n"
     "def f(A: T.Tensor((16,), 'float16')):\n    with T.Kernel(1, threads=32) as bx:\n"
     "        A[0] = A[1]\n\nk = tilecute.compile(f, target='sm_99')\n",
     ["bad.py\", line 9, in <module>", "TargetError: f: target 'sm_99' is not an architecture"]),
])
def test_export_a_module_that_raises(tmp_path, source, shown):
    """The module's error and its own frames, as `python bad.py` shows them; none of
    tilecute's or importlib's frames; exit 1 (a failure, not a usage error)."""
    (tmp_path / "bad.py").write_text(source)
    r = _tilecute("export", str(tmp_path / "bad.py"), "-o", str(tmp_path / "dist"),
                  "--arch", "sm_90a")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith(f"tilecute: error: importing {tmp_path / 'bad.py'} raised:\n")
    for text in shown:
        assert text in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "importlib" not in r.stderr
    assert not any(d in r.stderr.replace(str(tmp_path), "")
                   for d in ("tilecute/", "backend/", "runtime/"))


def _doc_commands():
    """Every `tilecute SUB ...` command line written in the docs (code spans, lines of code
    blocks, `# or: tilecute ...` comments), with at least one word after SUB: a bare
    `tilecute show` or `tilecute cache ...` names a command, it is no command line."""
    found = set()
    for doc in DOCS:
        text = doc.read_text()
        spans = re.findall(r"`(tilecute (?:cache|show|tune|export|verify)[^`]*)`", text)
        spans += re.findall(r"^(tilecute (?:cache|show|tune|export|verify).*)$", text, re.M)
        spans += re.findall(r"# or: (tilecute .*)$", text, re.M)
        found |= {" ".join(s.split()) for s in spans}
    return sorted(c for c in found if len(c.replace("...", "").split()) > 2)


_PLACEHOLDERS = {"KEY": "0" * 64, "<key>": "0" * 64, "DURATION": "7d", "KIND": "cute"}


def _concrete(command: str) -> list:
    """A doc's command line as argv lists: placeholders given values, [optional] parts
    taken, one argv per alternative of `--kind a|b|c`."""
    command = re.sub(r"\[([^\[\]]*)\]", r"\1", command).replace("...", "")
    argv = [_PLACEHOLDERS.get(a, a) for a in shlex.split(command)[1:]]
    if "--kind" in argv:
        i = argv.index("--kind") + 1
        return [argv[:i] + [kind] + argv[i + 1:] for kind in argv[i].split("|")]
    return [argv]


def test_every_documented_command_parses():
    commands = _doc_commands()
    assert len(commands) >= 10 and any("--kind script" in c for c in commands)
    parser = build_parser()
    for command in commands:
        for argv in _concrete(command):
            try:
                parser.parse_args(argv)
            except SystemExit as e:
                pytest.fail(f"documented command {command!r} ({argv}) is a usage error "
                            f"({e.code})")


def test_pass_config_refusals_name_what_exists():
    """A pass config tilecute keeps at TileLang's default is refused at another value with a
    reason; a command or environment variable that reason names exists."""
    flags = {a for p in _subparsers(build_parser()) for a in p._option_string_actions}
    code = "\n".join(p.read_text() for d in ("backend", "runtime", "templates")
                     for p in (ROOT / d).rglob("*") if p.suffix in (".py", ".cpp", ".h", ".j2"))
    for key, rule in PASS_CONFIGS.items():
        why = getattr(rule, "why", "")
        for flag in re.findall(r"`tilecute [^`]*?(--[\w-]+)", why):
            assert flag in flags, (key, flag)
        for var in re.findall(r"\bTILECUTE_[A-Z_]+\b", why):
            assert re.search(rf"environ[^\n]*{var}|-D{var}|ENV\w* = \"{var}\"|ifdef {var}",
                             code), (key, var)
    with pytest.raises(ValueError, match="TILECUTE_PHASE_TIMING"):
        from_pass_configs({"tl.pass_profile": True}, "k")
    with pytest.raises(ValueError, match="run_passes"):
        from_pass_configs({"tl.enable_dump_ir": True}, "k")


def _subparsers(parser):
    yield parser
    for action in parser._actions:
        if isinstance(action.choices, dict):  # a subcommand's choices: their parsers
            for sub in action.choices.values():
                yield from _subparsers(sub)


def test_every_environment_variable_read_is_documented():
    code = [p.read_text() for d in ("backend", "runtime") for p in (ROOT / d).rglob("*.py")]
    read = set()
    for text in code:
        read |= set(re.findall(r"environ(?:\.get)?[(\[]\s*\"([A-Z_]+)\"", text))
        read |= set(re.findall(r"^ENV\w* = \"([A-Z_]+)\"", text, re.M))
    read -= {"TMPDIR"}  # set for a child, not read
    assert {"TILECUTE_CACHE_DIR", "TILECUTE_ARCH", "TILECUTE_LOCK_TIMEOUT"} <= read
    docs = "\n".join(d.read_text() for d in DOCS)
    assert not sorted(v for v in read if v not in docs)


def test_every_flag_is_documented():
    docs = "\n".join(d.read_text() for d in DOCS)
    flags = {f for p in _subparsers(build_parser()) for f in p._option_string_actions
             if f.startswith("--") and f != "--help"}
    assert {"--version", "--kind", "--older-than", "--arch", "--wheel"} <= flags
    assert not sorted(f for f in flags if f"{f}" not in docs)


def test_export_a_file_that_is_not_python(tmp_path):
    (tmp_path / "kernels.json").write_text('{"schema": "tilecute.ir"}')
    r = _tilecute("export", str(tmp_path / "kernels.json"), "-o", str(tmp_path / "dist"),
                  "--arch", "sm_90a")
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert r.stderr == f"tilecute: error: {tmp_path / 'kernels.json'}: not a Python file " \
                       "(.py); a tilecute IR JSON document is exported from a .py file that " \
                       "reads it (tilecute.ir.from_json)\n"
