from typer.testing import CliRunner

from control_plane.cli import app


def test_cli_lists_its_commands() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "dev" in result.output
