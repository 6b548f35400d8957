#!/usr/bin/env bash
# Builds the worker SDK, its NUnit tests, the test runner and the example apps with Mono's
# compiler (mcs) against Debian's Newtonsoft.Json and NUnit 2.6 packages
# (apt-get install mono-complete libnewtonsoft-json-cil-dev libnunit-cil-dev).
# The .csproj files are for `dotnet build`; this is the path used where only Mono exists.
#
#   workers/sdk-dotnet/build-mono.sh OUT_DIR
#   mono OUT_DIR/RunNUnit.exe OUT_DIR/Stepway.Worker.Tests.dll     # run the tests
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:?usage: build-mono.sh OUT_DIR}"
mkdir -p "$out"
cli=/usr/lib/cli
newtonsoft="$cli/Newtonsoft.Json-5.0/Newtonsoft.Json.dll"
nunit="$cli/nunit.framework-2.6.3/nunit.framework.dll"
runner="$cli/nunit-console-runner-2.6.3/nunit-console-runner.dll"
flags=(-langversion:7.2 -nologo -warnaserror+ -nowarn:1591 -debug -r:System.Net.Http.dll -r:"$newtonsoft")

mcs "${flags[@]}" -target:library -out:"$out/Stepway.Worker.dll" -doc:"$out/Stepway.Worker.xml" \
  $(find "$here/src/Stepway.Worker" -name '*.cs' | sort)
mcs "${flags[@]}" -target:library -out:"$out/Stepway.Worker.Tests.dll" -r:"$out/Stepway.Worker.dll" -r:"$nunit" \
  $(find "$here/tests/Stepway.Worker.Tests" -name '*.cs' | sort)
mcs "${flags[@]}" -target:exe -out:"$out/RunNUnit.exe" -r:"$runner" "$here/tests/NUnitRunner/RunNUnit.cs"
mcs "${flags[@]}" -target:exe -out:"$out/E2eWorker.exe" -r:"$out/Stepway.Worker.dll" \
  $(find "$here/tests/E2eWorker" -name '*.cs' | sort)
mcs "${flags[@]}" -target:exe -out:"$out/ConnectorWorker.exe" -r:"$out/Stepway.Worker.dll" \
  $(find "$here/examples/ConnectorWorker" -name '*.cs' | sort)
# the apps load these from their own folder
cp "$newtonsoft" "$out/"
