using System;
using System.Net.Http;
using System.Net.Http.Headers;
using System.Text;
using System.Text.RegularExpressions;
using Newtonsoft.Json;
using Newtonsoft.Json.Linq;
using Stepway.Worker;

namespace Stepway.Examples.Connector
{
    /// <summary>
    /// The connector code area's task types in C# (the Python ones are in
    /// workers/connector/handlers.py; same inputs, outputs and settings): calls to systems
    /// whose credential only this worker holds.
    ///
    /// * <c>fetch_bank_feed</c>: <c>GET {CONNECTOR_BANK_URL}/feeds?period=&amp;accountId=</c>
    /// * <c>lodge_return</c>: <c>POST {CONNECTOR_TAX_URL}/returns</c> with an <c>Idempotency-Key</c>
    ///   (the task id, stable across retries) so that a retried lodgement is not lodged twice.
    ///
    /// The credential is <c>CONNECTOR_API_KEY</c> (in Azure the catalog's <c>connector-api-key</c>
    /// Key Vault secret), sent as a bearer token and never put in task output, logs or errors.
    /// A 4xx answer (except 408/429) is a terminal error; a connection error, 5xx, 408 or 429
    /// fails the attempt so that the engine retries it.
    /// </summary>
    public class ConnectorHandlers
    {
        private static readonly Regex Period = new Regex(@"^\d{4}-\d{2}$");
        private readonly HttpClient http;

        public ConnectorHandlers(HttpClient http)
        {
            this.http = http;
        }

        public class FetchBankFeedInput
        {
            [JsonProperty(Required = Required.Always)]
            public string Period { get; set; }
            public string AccountId { get; set; }
        }

        public class BankFeed
        {
            public string Period { get; set; }
            public string AccountId { get; set; }
            public JArray Transactions { get; set; }
        }

        public class LodgeReturnInput
        {
            [JsonProperty(Required = Required.Always)]
            public string DocumentUrl { get; set; }
            public decimal? Amount { get; set; }
            public string Reference { get; set; }
        }

        public class Lodgement
        {
            public string LodgementId { get; set; }
            public string Status { get; set; }
        }

        [WorkerTask("fetch_bank_feed")]
        public BankFeed FetchBankFeed(FetchBankFeedInput input, TaskContext ctx)
        {
            if (!Period.IsMatch(input.Period))
                throw new TerminalError("invalid input for fetch_bank_feed: period: must look like 2024-01");
            var url = Setting("CONNECTOR_BANK_URL").TrimEnd('/') + "/feeds?period=" + Uri.EscapeDataString(input.Period)
                + (string.IsNullOrEmpty(input.AccountId) ? "" : "&accountId=" + Uri.EscapeDataString(input.AccountId));
            var body = Call(new HttpRequestMessage(HttpMethod.Get, url));
            var transactions = body is JObject ? body["transactions"] as JArray : body as JArray;
            if (transactions == null) throw new TerminalError("the bank feed has no transactions list");
            ctx.Log("fetched " + transactions.Count + " transactions for " + input.Period);
            return new BankFeed { Period = input.Period, AccountId = input.AccountId, Transactions = transactions };
        }

        [WorkerTask("lodge_return")]
        public Lodgement LodgeReturn(LodgeReturnInput input, TaskContext ctx)
        {
            var request = new HttpRequestMessage(HttpMethod.Post, Setting("CONNECTOR_TAX_URL").TrimEnd('/') + "/returns")
            {
                Content = new StringContent(
                    new JObject { ["documentUrl"] = input.DocumentUrl, ["amount"] = input.Amount, ["reference"] = input.Reference }
                        .ToString(Formatting.None),
                    Encoding.UTF8, "application/json"),
            };
            request.Headers.Add("Idempotency-Key", ctx.TaskId);
            var body = Call(request) as JObject;
            var id = body == null ? null : (string)body["lodgementId"];
            if (string.IsNullOrEmpty(id)) throw new InvalidOperationException("the tax authority's answer has no lodgementId");
            ctx.Log("lodged " + (input.Reference ?? input.DocumentUrl) + ": " + id);
            return new Lodgement { LodgementId = id, Status = (string)body["status"] ?? "LODGED" };
        }

        private static string Setting(string name)
        {
            var value = Environment.GetEnvironmentVariable(name);
            if (string.IsNullOrWhiteSpace(value))
                throw new TerminalError("the connector worker is not configured: set " + name);
            return value.Trim();
        }

        private JToken Call(HttpRequestMessage request)
        {
            request.Headers.Authorization = new AuthenticationHeaderValue("Bearer", Setting("CONNECTOR_API_KEY"));
            var what = request.Method + " " + request.RequestUri.GetLeftPart(UriPartial.Path);
            HttpResponseMessage response;
            try
            {
                response = http.SendAsync(request).GetAwaiter().GetResult();
            }
            catch (Exception exc) when (exc is HttpRequestException || exc is OperationCanceledException)
            {
                throw new InvalidOperationException(what + ": " + exc.GetType().Name); // retried
            }
            using (response)
            {
                var status = (int)response.StatusCode;
                var text = response.Content.ReadAsStringAsync().GetAwaiter().GetResult();
                if (status >= 500 || status == 408 || status == 429)
                    throw new InvalidOperationException(what + ": " + status); // retried
                if (status >= 400)
                    throw new TerminalError(what + ": " + status + " " + (text.Length > 300 ? text.Substring(0, 300) : text));
                return text.Trim().Length == 0 ? new JObject() : WorkerJson.Parse(text);
            }
        }
    }
}
