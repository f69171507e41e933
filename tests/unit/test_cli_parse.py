"""The pure parts of the CLI: parsing, tables, times and exit statuses (no Redis)."""

from __future__ import annotations

import argparse
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest

from cronlock.cli import COMMANDS, build_parser, main
from cronlock.cli._common import EXIT_CODES, CliError, render_table, resolve_prefix
from cronlock.cli._connect import store_url
from cronlock.cli._exec_lock import child_status, command_of
from cronlock.cli._locks import key_from_redis_key
from cronlock.cli._next_times import fire_rows, format_offset, parse_after

ATHENS = ZoneInfo("Europe/Athens")


def test_global_options_work_before_and_after_the_command() -> None:
    """``--json``/``--prefix``/``--store-url``/``--redis-url`` work on either side."""
    options = ["--json", "--prefix", "app", "--redis-url", "u", "--store-url", "s"]
    before = build_parser().parse_args([*options, "doctor"])
    after = build_parser().parse_args(["doctor", *options])
    for args in (before, after):
        assert (args.json, args.prefix, args.redis_url, args.store_url) == (True, "app", "u", "s")


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


def _args(store: str | None = None, redis: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(store_url=store, redis_url=redis)


@pytest.fixture
def no_url_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("CRONLOCK_STORE_URL", "CRONLOCK_REDIS_URL", "REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_store_url_precedence(no_url_env: pytest.MonkeyPatch) -> None:
    """Flags beat CRONLOCK_STORE_URL / CRONLOCK_REDIS_URL, which beat REDIS_URL; none is 2."""
    no_url_env.setenv("REDIS_URL", "redis://b")
    no_url_env.setenv("CRONLOCK_REDIS_URL", "redis://a")
    assert store_url(_args(redis="redis://cli")) == ("redis://cli", "--redis-url")
    assert store_url(_args(store="redis://s")) == ("redis://s", "--store-url")
    assert store_url(_args()) == ("redis://a", "CRONLOCK_REDIS_URL")
    no_url_env.setenv("CRONLOCK_STORE_URL", "redis://a")  # the same URL twice is fine
    assert store_url(_args()) == ("redis://a", "CRONLOCK_STORE_URL")
    no_url_env.delenv("CRONLOCK_REDIS_URL")
    no_url_env.delenv("CRONLOCK_STORE_URL")
    assert store_url(_args()) == ("redis://b", "REDIS_URL")
    no_url_env.delenv("REDIS_URL")
    with pytest.raises(CliError) as caught:
        store_url(_args())
    assert caught.value.code == 2


def test_a_cronlock_setting_beats_an_applications_redis_url(no_url_env: pytest.MonkeyPatch) -> None:
    """REDIS_URL is often the app's own: CRONLOCK_STORE_URL wins without a conflict."""
    no_url_env.setenv("REDIS_URL", "redis://app-cache")
    no_url_env.setenv("CRONLOCK_STORE_URL", "sqlite:///jobs.db")
    assert store_url(_args()) == ("sqlite:///jobs.db", "CRONLOCK_STORE_URL")


@pytest.mark.parametrize(
    ("env", "args", "names"),
    [
        ({}, _args("redis://a", "redis://u:secret@b"), ("--store-url", "--redis-url")),
        (
            {"CRONLOCK_STORE_URL": "redis://a", "CRONLOCK_REDIS_URL": "redis://u:secret@b"},
            _args(),
            ("CRONLOCK_STORE_URL", "CRONLOCK_REDIS_URL"),
        ),
    ],
)
def test_two_names_for_different_urls_is_a_usage_error(
    no_url_env: pytest.MonkeyPatch,
    env: dict[str, str],
    args: argparse.Namespace,
    names: tuple[str, str],
) -> None:
    """Both names of one setting, different URLs: exit 2 naming both, passwords masked."""
    for name, value in env.items():
        no_url_env.setenv(name, value)
    with pytest.raises(CliError) as caught:
        store_url(args)
    assert caught.value.code == 2
    message = str(caught.value)
    assert all(name in message for name in names)
    assert "'redis://a'" in message
    assert "***@b" in message
    assert "secret" not in message


@pytest.mark.parametrize(
    ("args", "env", "hint"),
    [
        (_args(redis="sqlite:///x.db"), {}, "use --store-url"),
        (_args(), {"CRONLOCK_REDIS_URL": "postgresql://h/d"}, "use CRONLOCK_STORE_URL"),
    ],
)
def test_a_redis_name_takes_only_redis_urls(
    no_url_env: pytest.MonkeyPatch, args: argparse.Namespace, env: dict[str, str], hint: str
) -> None:
    for name, value in env.items():
        no_url_env.setenv(name, value)
    with pytest.raises(CliError, match=f"takes a Redis URL.*{hint}") as caught:
        store_url(args)
    assert caught.value.code == 2


def test_main_without_url_returns_2(
    no_url_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``main(["doctor"])`` with no URL anywhere returns 2 and explains on stderr."""
    assert main(["doctor"]) == 2
    err = capsys.readouterr().err
    assert "no store URL" in err
    assert "CRONLOCK_STORE_URL" in err


@pytest.mark.parametrize("command", [["exec", "--key", "k", "--ttl", "5", "--", "true"], ["locks"]])
def test_lock_commands_refuse_a_store_url_that_cannot_work(
    no_url_env: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
) -> None:
    """exec and locks take any store URL; one that cannot work (a SQLite file in a
    directory that does not exist) exits 2 naming where it came from and the directory."""
    url = "sqlite:////no/such/dir/jobs.db"
    assert main(["--store-url", url, *command]) == 2
    err = capsys.readouterr().err
    assert "--store-url" in err
    assert "'/no/such/dir' does not exist" in err


def test_an_unknown_store_scheme_is_a_usage_error_naming_the_source(
    no_url_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    no_url_env.setenv("CRONLOCK_STORE_URL", "mysql://u:secret@h/db")
    assert main(["jobs"]) == 2
    err = capsys.readouterr().err
    assert "CRONLOCK_STORE_URL: a store URL must start with one of" in err
    assert "mysql://***@h/db" in err


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


def test_the_demo_refuses_a_store_that_is_not_redis(
    no_url_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --store the replicas run on Redis: a SQLite URL exits 2 before anything
    starts, saying which --store would take it."""
    assert main(["--store-url", "sqlite:///x.db", "demo"]) == 2
    assert (
        "the demo runs on Redis unless --store sqlite or --store postgres says otherwise; "
        "--store-url names 'sqlite:///x.db'"
    ) in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (
            ["demo", "--store", "postgres"],
            {"REDIS_URL": "redis://app-cache"},
            "--store postgres needs a PostgreSQL URL; REDIS_URL names 'redis://app-cache'",
        ),
        (
            ["demo", "--store", "postgres"],
            {},
            "--store postgres needs a PostgreSQL URL: pass --store-url "
            "postgresql://USER@HOST/DATABASE or set CRONLOCK_STORE_URL",
        ),
        (
            ["--store-url", "postgresql://app:s3cret@db", "demo", "--store", "postgres"],
            {},
            "--store postgres: a PostgreSQL URL must name its database",
        ),
        (
            ["demo", "--store", "sqlite", "--store-url", "sqlite:///jobs.db"],
            {},
            "--store sqlite makes a file of its own; --store-url names 'sqlite:///jobs.db'",
        ),
    ],
    ids=["postgres-given-redis", "postgres-no-url", "postgres-no-database", "sqlite-given-url"],
)
def test_the_demo_refuses_a_store_url_that_does_not_fit_store(
    no_url_env: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    env: dict[str, str],
    message: str,
) -> None:
    """A --store and a store URL that do not fit exit 2 naming both, before anything
    starts (the password of a URL masked)."""
    for name, value in env.items():
        no_url_env.setenv(name, value)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "s3cret" not in err
