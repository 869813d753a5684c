"""manage.py in a demo checkout: the demo's settings when the environment gives none, and never
over settings the environment gives."""

from __future__ import annotations

import shlex
import socket

from auditweb.demoenv import demo_running, load_demo_env, read_env

DEMO = {
    "DATABASE_URL": "postgres://postgres@/auditweb?host=%2Fnowhere%2Frun",
    "REDIS_URL": "redis+socket:///nowhere/run/redis.sock?virtual_host=0",
    "SECRET_KEY": 'k\'ey $with `shell` "characters"',
    "DEBUG": "true",
}


def write_env(devdata, values):
    path = devdata / "demo" / "env"
    path.parent.mkdir(parents=True)
    path.write_text("".join(f"{name}={shlex.quote(value)}\n" for name, value in values.items()))
    return path


def test_it_reads_back_exactly_what_the_demo_wrote(tmp_path) -> None:
    assert read_env(write_env(tmp_path, DEMO)) == DEMO


def test_a_bare_environment_takes_the_demos_settings(tmp_path, capsys) -> None:
    write_env(tmp_path, DEMO)
    environ = {"AUDITWEB_DEVDATA": str(tmp_path), "PATH": "/usr/bin"}
    assert load_demo_env(environ) == tmp_path / "demo" / "env"
    assert environ == {"AUDITWEB_DEVDATA": str(tmp_path), "PATH": "/usr/bin", **DEMO}
    err = capsys.readouterr().err
    assert "using the demo's settings" in err and "the demo is not running: start ./dev demo" in err


def test_an_environment_naming_a_database_or_a_key_is_left_alone(tmp_path) -> None:
    write_env(tmp_path, DEMO)
    for given in ({"DATABASE_URL": "postgres://db/x"}, {"SECRET_KEY": "mine"}):
        environ = {"AUDITWEB_DEVDATA": str(tmp_path), **given}
        assert load_demo_env(environ) is None
        assert environ == {"AUDITWEB_DEVDATA": str(tmp_path), **given}


def test_without_a_demo_nothing_is_loaded(tmp_path) -> None:
    environ = {"AUDITWEB_DEVDATA": str(tmp_path)}
    assert load_demo_env(environ) is None and environ == {"AUDITWEB_DEVDATA": str(tmp_path)}


def test_the_demo_runs_while_its_postgresql_socket_is_there(tmp_path) -> None:
    url = f"postgres://postgres@/auditweb?host={str(tmp_path).replace('/', '%2F')}"
    assert not demo_running(url)
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(tmp_path / ".s.PGSQL.5432"))
        assert demo_running(url)
    assert demo_running("postgres://postgres@127.0.0.1:5432/auditweb")  # a server: not ours to judge


def test_the_demo_writes_what_its_processes_run_with_for_other_terminals(tmp_path) -> None:
    from devtools.demo import demo_env
    from devtools.services import Stack

    stack = Stack(profile="demo", env={"DATABASE_URL": DEMO["DATABASE_URL"], "REDIS_URL": DEMO["REDIS_URL"]})
    stack.home = tmp_path
    written = demo_env(stack)
    path = tmp_path / "env"
    assert path.stat().st_mode & 0o777 == 0o600  # it holds the key
    assert read_env(path) == written == {name: stack.env[name] for name in written}
    assert set(written) == {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "AUDITWEB_LOG_ROOTS"}
    assert written["AUDITWEB_LOG_ROOTS"] == f"/var/log,{tmp_path / 'followed'}"
    assert len(written["SECRET_KEY"]) > 40
    # Started again: the same key (logins survive), the followed folder named once.
    again = Stack(profile="demo", env={**DEMO, "SECRET_KEY": "", "AUDITWEB_LOG_ROOTS": "/srv/logs"})
    again.home = tmp_path
    assert demo_env(again)["SECRET_KEY"] == written["SECRET_KEY"]
    assert demo_env(again)["AUDITWEB_LOG_ROOTS"] == f"/srv/logs,{tmp_path / 'followed'}"


def test_the_banner_gives_new_passwords_or_says_how_to_reset_one() -> None:
    from devtools.demo import password_lines

    made = [f"Created login {n} ({n}) with password pw-{n} (shown only this once).\n" for n in ("a", "b")]
    assert password_lines(made)[:2] == [line.strip() for line in made]
    kept = password_lines(["Login admin exists already; its password and role are unchanged.\n"] * 3)
    assert "keep the passwords" in kept[0] and "create_login admin --reset-password" in kept[1]
    assert not any("Created" in line for line in kept)
