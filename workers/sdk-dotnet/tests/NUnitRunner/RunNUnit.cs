// Runs NUnit tests on Mono with Debian's NUnit 2.6 console runner library
// (libnunit-console-runner2.6.3-cil): `mono RunNUnit.exe Stepway.Worker.Tests.dll`.
// Debian ships the runner as a library; its nunit-console command is a separate package.
// The exit code is the number of failed tests (0 = all passed).
public static class RunNUnit
{
    public static int Main(string[] args)
    {
        return NUnit.ConsoleRunner.Runner.Main(args);
    }
}
