using System;
using System.Net.Http;
using Stepway.Worker;
#if AZURE_IDENTITY
using Azure.Core;
using Azure.Identity;
#endif

namespace Stepway.Examples.Connector
{
    /// <summary>The connector worker app: polls the Task API for fetch_bank_feed and
    /// lodge_return until SIGTERM, then finishes the tasks in hand (exit code 0 when every
    /// result was posted). Settings: the STEPWAY_* variables (workers/sdk-dotnet/README.md)
    /// and CONNECTOR_BANK_URL, CONNECTOR_TAX_URL, CONNECTOR_API_KEY.</summary>
    public static class Program
    {
        public static int Main()
        {
            var options = WorkerOptions.FromEnvironment();
#if AZURE_IDENTITY
            // In Azure: an Entra ID token for the Task API from the app's managed identity
            // (AZURE_CLIENT_ID picks a user-assigned one).
            var scope = Environment.GetEnvironmentVariable("STEPWAY_API_SCOPE");
            if (!string.IsNullOrWhiteSpace(scope))
            {
                var credential = new DefaultAzureCredential(new DefaultAzureCredentialOptions
                {
                    ManagedIdentityClientId = Environment.GetEnvironmentVariable("AZURE_CLIENT_ID"),
                });
                options.TokenProvider = new ExpiringTokenProvider(() =>
                {
                    var token = credential.GetToken(new TokenRequestContext(new[] { scope.Trim() }));
                    return new ExpiringToken(token.Token, token.ExpiresOn);
                });
            }
#endif
            using (var http = new HttpClient { Timeout = TimeSpan.FromSeconds(60) })
            using (var host = new WorkerHost(options))
            {
                host.AddHandlers(new ConnectorHandlers(http));
                return host.Run() ? 0 : 1;
            }
        }
    }
}
