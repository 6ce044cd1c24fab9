"""Issue 13: every option and positional argument of every command has a help text, and every
option that is not required states its default."""
from __future__ import annotations

import argparse
import re

import pytest

from dpledger.cli import COMMANDS, _present, build_parser, main


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser(name)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _arguments(p: argparse.ArgumentParser):
    return [a for a in p._actions if not isinstance(a, (argparse._HelpAction,
                                                        argparse._VersionAction))]


PRESENT = [n for n in COMMANDS if _present(n)]


def test_every_command_is_offered():
    assert set(PRESENT) == set(COMMANDS)


@pytest.mark.parametrize("name", PRESENT)
def test_every_argument_has_help(name):
    p = _subparser(name)
    args = _arguments(p)
    assert args, name
    missing = [a.dest for a in args if not (a.help or "").strip() or a.help == argparse.SUPPRESS]
    assert missing == [], f"{name}: no help for {missing}"


@pytest.mark.parametrize("name", PRESENT)
def test_every_optional_states_its_default(name):
    """An option a user may leave out says what happens then ("default …")."""
    p = _subparser(name)
    silent = [a.option_strings[0] for a in _arguments(p)
              if a.option_strings and not a.required and "default" not in a.help.lower()]
    assert silent == [], f"{name}: no default stated for {silent}"


@pytest.mark.parametrize("name", PRESENT)
def test_help_prints_and_exits_0(name, capsys):
    with pytest.raises(SystemExit) as exc:
        main([name, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: dpledger " + name)
    for a in _arguments(_subparser(name)):
        for opt in a.option_strings:
            assert opt in out


def test_numeric_options_state_their_unit_or_range():
    """Options that take a number say what kind (integer, a range, an interval)."""
    numeric = {"run": ["--horizon", "--runs", "--seed", "--workers", "--delta"],
               "audit": ["--trials", "--confidence", "--horizon", "--arms", "--seed", "--stop-at",
                         "--selection-fraction", "--workers"],
               "curve": ["--deltas", "--epsilons"], "compose": ["--delta"],
               "experiment": ["--workers"]}
    for name, opts in numeric.items():
        helps = {a.option_strings[0]: a.help for a in _arguments(_subparser(name))
                 if a.option_strings}
        for opt in opts:
            assert re.search(r"integer|\(0, 1\)|>= 0|in \[", helps[opt]), (name, opt, helps[opt])


def test_top_level_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for name in PRESENT:
        assert name in out


@pytest.mark.parametrize("command", [["compose"], ["ledger", "record"]])
def test_release_kinds_listed_with_their_syntax(command, capsys):
    """Every release kind the CLI parses (issue 15: rdp and zcdp too) is listed, with its
    syntax, by the help of each command that takes release specs; each listed syntax, filled
    with numbers, parses to its kind."""
    from dpledger.accounting.releases import RELEASE_TYPES, parse_release_spec
    from dpledger.commands.compose import RELEASE_SYNTAX
    assert {k for k, _, _ in RELEASE_SYNTAX} == set(RELEASE_TYPES)
    with pytest.raises(SystemExit) as exc:
        main([*command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    sample = {"E": "0.5", "B": "2", "D": "1", "M": "0.3", "S": "3", "T": "4", "R": "0.1",
              "A1;A2;...": "2;4", "R1;R2;...": "0.1;0.3", "N": "3", "F": "1.5", "P": "4",
              "K": "2000", "L": "1", "X": "1e-6"}
    for kind, syntax, _ in RELEASE_SYNTAX:
        assert syntax in out, (command, kind)
        for form in syntax.split(" | "):
            spec = re.sub(r"A1;A2;\.\.\.|R1;R2;\.\.\.|\b[A-Z]\b", lambda m: sample[m.group(0)],
                          form)
            assert parse_release_spec(spec)[0].kind == kind, spec
