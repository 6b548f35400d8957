"""The C# worker SDK's NUnit tests (``workers/sdk-dotnet/tests/Stepway.Worker.Tests``),
built with Mono and run with NUnit's console runner; any failing NUnit test fails this
test with the runner's output."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.dotnet_build import build_dotnet

pytestmark = pytest.mark.timeout(300)


def test_nunit_tests_of_the_csharp_worker_sdk_pass(tmp_path: Path) -> None:
    out = build_dotnet(tmp_path / "build")
    report = tmp_path / "nunit.xml"
    result = subprocess.run(
        [
            "mono",
            "--debug",
            str(out / "RunNUnit.exe"),
            str(out / "Stepway.Worker.Tests.dll"),
            "-nologo",
            f"-xml={report}",
        ],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=240,
    )
    output = f"{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, output
    summary = ET.parse(report).getroot()
    # the runner found and ran the tests (an empty assembly would also exit 0)
    assert int(summary.get("total", "0")) >= 20, output
    assert summary.get("failures") == "0" and summary.get("errors") == "0", output
