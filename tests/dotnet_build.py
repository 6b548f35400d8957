"""Builds the C# worker SDK (``workers/sdk-dotnet``) with Mono for the tests that run it.

``build_dotnet(out_dir)`` runs ``workers/sdk-dotnet/build-mono.sh`` and returns the folder
with ``Stepway.Worker.dll``, the NUnit test assembly, ``RunNUnit.exe`` and the worker apps.
Without Mono's compiler and runtime the calling test is skipped, except in CI
(``CI=true``), where ``.ci/run`` installs them and their absence is a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SDK = REPO / "workers" / "sdk-dotnet"
NEEDS = (
    "/usr/lib/cli/Newtonsoft.Json-5.0/Newtonsoft.Json.dll",
    "/usr/lib/cli/nunit.framework-2.6.3/nunit.framework.dll",
    "/usr/lib/cli/nunit-console-runner-2.6.3/nunit-console-runner.dll",
)
INSTALL = "apt-get install mono-complete libnewtonsoft-json-cil-dev libnunit-cil-dev"


def require_mono() -> None:
    missing = [tool for tool in ("mcs", "mono") if shutil.which(tool) is None]
    missing += [path for path in NEEDS if not Path(path).exists()]
    if not missing:
        return
    reason = f"the C# worker SDK needs Mono: missing {', '.join(missing)} ({INSTALL})"
    if os.environ.get("CI") == "true":
        pytest.fail(reason + "; .ci/run should have installed them")
    pytest.skip(reason)


def build_dotnet(out_dir: Path) -> Path:
    require_mono()
    result = subprocess.run(
        ["bash", str(SDK / "build-mono.sh"), str(out_dir)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0:
        pytest.fail(f"build-mono.sh failed:\n{result.stdout}\n{result.stderr}")
    return out_dir
