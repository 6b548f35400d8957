using System;
using System.IO;
using System.Reflection;
using Newtonsoft.Json;
using Newtonsoft.Json.Linq;
using Newtonsoft.Json.Serialization;

namespace Stepway.Worker
{
    /// <summary>
    /// JSON as the worker reads and writes it. Properties of output objects are written in
    /// camelCase (<c>LodgementId</c> becomes <c>lodgementId</c>) unless a
    /// <c>[JsonProperty("name")]</c> names them; dictionary keys are written as they are.
    /// Input binds to properties case-insensitively. Strings that look like dates stay
    /// strings.
    /// </summary>
    public static class WorkerJson
    {
        /// <summary>A new serializer with the worker's settings (serializers are not shared
        /// between threads on purpose: they are cheap).</summary>
        public static JsonSerializer CreateSerializer()
        {
            return JsonSerializer.Create(new JsonSerializerSettings
            {
                ContractResolver = new CamelCasePropertiesResolver(),
                DateParseHandling = DateParseHandling.None,
                NullValueHandling = NullValueHandling.Include,
                MissingMemberHandling = MissingMemberHandling.Ignore,
            });
        }

        /// <summary>Parses JSON text without turning date-like strings into dates.</summary>
        public static JToken Parse(string text)
        {
            using (var reader = new JsonTextReader(new StringReader(text)))
            {
                reader.DateParseHandling = DateParseHandling.None;
                var token = JToken.ReadFrom(reader);
                while (reader.Read())
                {
                    if (reader.TokenType != JsonToken.Comment)
                        throw new JsonReaderException("additional text after the JSON value");
                }
                return token;
            }
        }

        /// <summary>Compact JSON text of a token.</summary>
        public static string Serialize(JToken token)
        {
            return token.ToString(Formatting.None);
        }

        /// <summary>A value as a JSON token (null for null).</summary>
        public static JToken ToToken(object value)
        {
            if (value == null) return JValue.CreateNull();
            var token = value as JToken;
            if (token != null) return token.DeepClone();
            return JToken.FromObject(value, CreateSerializer());
        }

        /// <summary>An output object: null is <c>{}</c>, a JSON object as it is, any other
        /// value <c>{"result": value}</c>.</summary>
        public static JObject ToOutput(object value)
        {
            if (value == null) return new JObject();
            var token = ToToken(value);
            var obj = token as JObject;
            if (obj != null) return obj;
            return new JObject { ["result"] = token };
        }

        private sealed class CamelCasePropertiesResolver : DefaultContractResolver
        {
            protected override JsonProperty CreateProperty(MemberInfo member, MemberSerialization memberSerialization)
            {
                var property = base.CreateProperty(member, memberSerialization);
                var named = member.GetCustomAttribute<JsonPropertyAttribute>(true);
                if (named == null || string.IsNullOrEmpty(named.PropertyName))
                    property.PropertyName = CamelCase(property.PropertyName);
                return property;
            }
        }

        internal static string CamelCase(string name)
        {
            if (string.IsNullOrEmpty(name) || !char.IsUpper(name[0])) return name;
            var chars = name.ToCharArray();
            for (var i = 0; i < chars.Length; i++)
            {
                // "URLValue" -> "urlValue", "ID" -> "id", "Name" -> "name"
                if (i > 0 && i + 1 < chars.Length && !char.IsUpper(chars[i + 1])) break;
                if (!char.IsUpper(chars[i])) break;
                chars[i] = char.ToLowerInvariant(chars[i]);
            }
            return new string(chars);
        }

        internal static string SnakeCase(string name)
        {
            var sb = new System.Text.StringBuilder();
            for (var i = 0; i < name.Length; i++)
            {
                var c = name[i];
                if (char.IsUpper(c))
                {
                    if (i > 0 && name[i - 1] != '_') sb.Append('_');
                    sb.Append(char.ToLowerInvariant(c));
                }
                else sb.Append(c);
            }
            return sb.ToString();
        }
    }
}
