using System;
using System.Collections.Generic;

namespace Stepway.Worker
{
    /// <summary>Bearer tokens for the Task API.</summary>
    public interface ITokenProvider
    {
        /// <summary>The token to send now, or null for no Authorization header.</summary>
        string GetToken();

        /// <summary>The server refused the last token (401): fetch a new one next time.</summary>
        void Invalidate();
    }

    /// <summary>No Authorization header (the embedded platform without auth).</summary>
    public sealed class NoToken : ITokenProvider
    {
        public string GetToken() => null;
        public void Invalidate() { }
    }

    /// <summary>A fixed token (<c>STEPWAY_TOKEN</c>: the embedded control plane's tokens file).</summary>
    public sealed class StaticToken : ITokenProvider
    {
        private readonly string value;

        public StaticToken(string value)
        {
            if (string.IsNullOrEmpty(value)) throw new ArgumentException("a token is required");
            this.value = value;
        }

        public string GetToken() => value;
        public void Invalidate() { }
        public override string ToString() => "StaticToken(***)";
    }

    /// <summary>A token with its expiry time.</summary>
    public sealed class ExpiringToken
    {
        public ExpiringToken(string value, DateTimeOffset expiresOn)
        {
            Value = value;
            ExpiresOn = expiresOn;
        }

        public string Value { get; }
        public DateTimeOffset ExpiresOn { get; }
    }

    /// <summary>
    /// Caches a token from <c>fetch</c> and fetches a new one <c>refreshMargin</c> before it
    /// expires and after a 401. Wrap Azure.Identity's credential with it for an Entra ID token
    /// for <c>STEPWAY_API_SCOPE</c> (see the README).
    /// </summary>
    public sealed class ExpiringTokenProvider : ITokenProvider
    {
        private readonly Func<ExpiringToken> fetch;
        private readonly TimeSpan refreshMargin;
        private readonly Func<DateTimeOffset> clock;
        private readonly object gate = new object();
        private ExpiringToken cached;

        public ExpiringTokenProvider(Func<ExpiringToken> fetch, TimeSpan? refreshMargin = null, Func<DateTimeOffset> clock = null)
        {
            if (fetch == null) throw new ArgumentNullException(nameof(fetch));
            this.fetch = fetch;
            this.refreshMargin = refreshMargin ?? TimeSpan.FromMinutes(5);
            this.clock = clock ?? (() => DateTimeOffset.UtcNow);
        }

        public string GetToken()
        {
            lock (gate)
            {
                if (cached == null || clock() >= cached.ExpiresOn - refreshMargin)
                    cached = fetch();
                return cached.Value;
            }
        }

        public void Invalidate()
        {
            lock (gate) cached = null;
        }
    }

    public static class TokenProviders
    {
        /// <summary><c>STEPWAY_TOKEN</c> as a <see cref="StaticToken"/>, else <see cref="NoToken"/>.
        /// <c>STEPWAY_API_SCOPE</c> needs Azure.Identity, which this package does not depend on:
        /// with it set, give <see cref="WorkerOptions.TokenProvider"/> (an
        /// <see cref="ExpiringTokenProvider"/> over a credential), or this throws.</summary>
        public static ITokenProvider FromEnvironment(IDictionary<string, string> env)
        {
            string scope, token;
            if (env != null && env.TryGetValue("STEPWAY_API_SCOPE", out scope) && !string.IsNullOrWhiteSpace(scope))
                throw new InvalidOperationException(
                    "STEPWAY_API_SCOPE is set: give WorkerOptions.TokenProvider an Entra ID token source for "
                    + scope.Trim() + " (an ExpiringTokenProvider over Azure.Identity's DefaultAzureCredential)");
            if (env != null && env.TryGetValue("STEPWAY_TOKEN", out token) && !string.IsNullOrWhiteSpace(token))
                return new StaticToken(token.Trim());
            return new NoToken();
        }
    }
}
