from typing import Any

from typer.testing import CliRunner

from control_plane.cli.main import app


def test_cli_lists_its_commands() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "dev" in result.output


def test_dev_refuses_a_non_loopback_address_without_auth(monkeypatch: Any) -> None:
    monkeypatch.delenv("STEPWAY_ALLOW_ANONYMOUS", raising=False)
    result = CliRunner().invoke(app, ["dev", "--host", "0.0.0.0", "--port", "1"])
    assert result.exit_code != 0
    assert "no authentication" in str(result.exception) + result.output
