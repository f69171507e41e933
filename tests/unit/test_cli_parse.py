"""The pure parts of the CLI: parsing, tables, times and exit statuses (no Redis)."""

from __future__ import annotations

import argparse
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest

from cronlock.cli import COMMANDS, build_parser, main
from cronlock.cli._common import EXIT_CODES, CliError, redis_url, render_table, resolve_prefix
from cronlock.cli._exec_lock import child_status, command_of
from cronlock.cli._locks import key_from_redis_key
from cronlock.cli._next_times import fire_rows, format_offset, parse_after

ATHENS = ZoneInfo("Europe/Athens")


def test_global_options_work_before_and_after_the_command() -> None:
    """``--json``/``--prefix``/``--redis-url`` are accepted on either side of the command."""
    before = build_parser().parse_args(["--json", "--prefix", "app", "--redis-url", "u", "doctor"])
    after = build_parser().parse_args(["doctor", "--json", "--prefix", "app", "--redis-url", "u"])
    for args in (before, after):
        assert (args.json, args.prefix, args.redis_url) == (True, "app", "u")


def test_global_defaults_survive_a_subcommand() -> None:
    """A subcommand does not reset global options given before it to their defaults."""
    args = build_parser().parse_args(["--prefix", "app", "locks"])
    assert args.prefix == "app"
    plain = build_parser().parse_args(["locks"])
    # No --prefix: None until resolve_prefix() reads $CRONLOCK_PREFIX or the default.
    assert (plain.prefix, plain.json, plain.redis_url) == (None, False, None)


def test_prefix_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    """--prefix beats $CRONLOCK_PREFIX, which beats ``cronlock``; each is recorded."""
    monkeypatch.setenv("CRONLOCK_PREFIX", "myapp")
    given = build_parser().parse_args(["jobs", "--prefix", "other"])
    resolve_prefix(given)
    assert (given.prefix, given.prefix_from) == ("other", "--prefix")
    from_env = build_parser().parse_args(["jobs"])
    resolve_prefix(from_env)
    assert (from_env.prefix, from_env.prefix_from) == ("myapp", "CRONLOCK_PREFIX")
    monkeypatch.setenv("CRONLOCK_PREFIX", "")
    default = build_parser().parse_args(["jobs"])
    resolve_prefix(default)
    assert (default.prefix, default.prefix_from) == ("cronlock", "default")


def test_a_bad_cronlock_prefix_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRONLOCK_PREFIX", " padded")
    with pytest.raises(CliError) as error:
        resolve_prefix(build_parser().parse_args(["jobs"]))
    assert error.value.code == 2
    assert str(error.value).startswith("$CRONLOCK_PREFIX: ")
    assert "' padded'" in str(error.value)


def _options_without_help(parser: argparse.ArgumentParser, path: str) -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                missing += _options_without_help(sub, f"{path} {name}")
        elif not action.help or action.help == argparse.SUPPRESS:
            missing.append(f"{path}: {'/'.join(action.option_strings) or action.dest}")
    return missing


def test_every_option_of_every_command_has_help() -> None:
    """``--help`` of every command and subcommand explains each option and argument."""
    assert _options_without_help(build_parser(), "cronlock") == []


def test_run_offers_no_connection_options(capsys: pytest.CaptureFixture[str]) -> None:
    """`run` takes no --redis-url/--prefix/--json: its runner has its own client and prefix."""
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    run_parser = commands.choices["run"]
    offered = {o for action in run_parser._actions for o in action.option_strings}
    assert offered == {"-h", "--help", "-v", "--verbose", "--stop-timeout"}
    assert "ignored" not in run_parser.format_help()
    assert main(["--prefix", "app", "run", "nowhere:runner"]) == 2
    assert "--prefix given, but `run` does not use it" in capsys.readouterr().err
    with pytest.raises(SystemExit) as parse_error:
        main(["run", "--redis-url", "redis://h", "nowhere:runner"])
    assert parse_error.value.code == 2


def test_exec_keeps_the_command_options_for_the_command() -> None:
    """Everything after ``--`` is the command, even options cronlock also has."""
    args = build_parser().parse_args(
        ["exec", "--key", "k", "--ttl", "5", "--", "ls", "-la", "--key", "x"]
    )
    assert command_of(args) == ["ls", "-la", "--key", "x"]
    assert (args.key, args.ttl, args.wait) == ("k", 5.0, None)


def test_exec_without_a_command_is_a_usage_error() -> None:
    """``exec`` with nothing after ``--`` raises a CliError with exit status 2."""
    args = build_parser().parse_args(["exec", "--key", "k", "--ttl", "5", "--"])
    with pytest.raises(CliError) as caught:
        command_of(args)
    assert caught.value.code == 2


def test_exec_requires_key_and_ttl() -> None:
    """argparse refuses ``exec`` without ``--key`` or ``--ttl`` with exit status 2."""
    with pytest.raises(SystemExit) as caught:
        build_parser().parse_args(["exec", "--", "true"])
    assert caught.value.code == 2


@pytest.mark.parametrize(("returncode", "status"), [(0, 0), (3, 3), (-9, 137), (-15, 143)])
def test_child_status_is_shell_style(returncode: int, status: int) -> None:
    """A child's exit code passes through; death by signal N becomes 128+N."""
    assert child_status(returncode) == status


def test_every_command_module_registers() -> None:
    """Each module in COMMANDS adds one subcommand with a handler."""
    parser = build_parser()
    for argv in (
        ["next", "* * * * *"],
        ["doctor"],
        ["exec", "--key", "k", "--ttl", "1"],
        ["locks"],
        ["demo", "--no-kill"],
    ):
        assert callable(parser.parse_args(argv).handler)
    assert len(COMMANDS) == len(set(COMMANDS))


def test_epilog_documents_every_exit_code() -> None:
    """``--help`` lists each documented exit status."""
    text = build_parser().format_help()
    for code, meaning in EXIT_CODES:
        assert code in text
        assert meaning[:30] in text


def test_redis_url_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    """--redis-url beats CRONLOCK_REDIS_URL, which beats REDIS_URL; none is exit 2."""
    monkeypatch.setenv("REDIS_URL", "redis://b")
    monkeypatch.setenv("CRONLOCK_REDIS_URL", "redis://a")
    assert redis_url(argparse.Namespace(redis_url="redis://cli")) == "redis://cli"
    assert redis_url(argparse.Namespace(redis_url=None)) == "redis://a"
    monkeypatch.delenv("CRONLOCK_REDIS_URL")
    assert redis_url(argparse.Namespace(redis_url=None)) == "redis://b"
    monkeypatch.delenv("REDIS_URL")
    with pytest.raises(CliError) as caught:
        redis_url(argparse.Namespace(redis_url=None))
    assert caught.value.code == 2


def test_main_without_url_returns_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``main(["doctor"])`` with no URL anywhere returns 2 and explains on stderr."""
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("CRONLOCK_REDIS_URL", raising=False)
    assert main(["doctor"]) == 2
    assert "no Redis URL" in capsys.readouterr().err


def test_render_table_aligns_columns() -> None:
    """Columns line up, separated by two spaces, without trailing blanks."""
    text = render_table(["A", "LONG HEADER", "C"], [("xxxx", 1, "z"), ("y", None, "")])
    assert text.splitlines() == ["A     LONG HEADER  C", "xxxx  1            z", "y"]


@pytest.mark.parametrize(
    ("text", "expected_ms"),
    [
        ("2025-01-01T00:00:00Z", 1735689600000),
        ("2025-01-01T02:00:00+02:00", 1735689600000),
        ("2025-01-01T02:00", 1735689600000),  # naive: read in the schedule's zone (+02:00)
        ("2025-01-01 02:00:00", 1735689600000),
    ],
    ids=["z", "offset", "naive-local", "space"],
)
def test_parse_after(text: str, expected_ms: int) -> None:
    """``--after`` accepts ISO times with Z, an offset, or none (the schedule's zone)."""
    assert parse_after(text, ATHENS, now=0) == expected_ms


def test_parse_after_defaults_to_now_and_rejects_junk() -> None:
    """No ``--after`` means now; junk is a usage error."""
    assert parse_after(None, ATHENS, now=12.5) == 12500
    with pytest.raises(CliError) as caught:
        parse_after("next tuesday", ATHENS, now=0)
    assert caught.value.code == 2


@pytest.mark.parametrize(
    ("offset", "text"),
    [
        (timedelta(hours=3), "+03:00"),
        (timedelta(hours=5, minutes=30), "+05:30"),
        (timedelta(hours=-3, minutes=-30), "-03:30"),
        (None, "+00:00"),
    ],
)
def test_format_offset(offset: timedelta | None, text: str) -> None:
    """UTC offsets print as ±HH:MM."""
    assert format_offset(offset) == text


def test_fire_rows_note_only_where_the_offset_changes() -> None:
    """Across the spring-forward night, only the first fire after it carries a DST note."""
    day = 86_400_000
    first = 1743242400000  # 2025-03-29T10:00Z = 12:00 EET
    rows = fire_rows(
        [first, first + day - 3_600_000, first + 2 * day - 3_600_000], ATHENS, first - 1
    )
    assert rows[0]["note"] is None
    assert rows[1]["note"] == "UTC offset +02:00 -> +03:00 (DST change)"
    assert rows[2]["note"] is None
    assert rows[1]["local"] == "2025-03-30T12:00:00+03:00"
    assert rows[1]["utc"] == "2025-03-30T09:00:00Z"
    assert rows[0]["zone"] == "EET"


@pytest.mark.parametrize(
    ("redis_key", "key"),
    [("cronlock:lock:{a:b}", "a:b"), ("cronlock:lockmeta:{a}", None), ("other:lock:{a}", None)],
)
def test_key_from_redis_key(redis_key: str, key: str | None) -> None:
    """Only ``PREFIX:lock:{KEY}`` names map back to a lock key."""
    assert key_from_redis_key(redis_key, "cronlock") == key
