// Package envelope owns ddbworker's message envelope: the JSON document
// carried in an SQS message body that wraps one unit of work destined for
// DynamoDB.
//
// It owns:
//
//   - the wire format (Envelope, AttemptPolicy) and its schema versions
//     (SchemaV1; Config.SupportedVersions selects which are accepted);
//   - decoding with a fixed, documented validation order (Decoder.Decode)
//     and the matching producer-side encoder (Encode);
//   - the canonical request hash (RequestHash), which identifies the work a
//     message asks for independently of delivery metadata, so that a
//     re-sent message can be recognised and a reused idempotency key with
//     different work can be detected; its versions (HashVersion: a stored
//     hash names its canonical form, and Envelope.HashLike computes an
//     envelope's hash in that form, so records written by older workers
//     compare like with like) and the canonical payload a typed handler
//     decodes (Envelope.CanonicalPayload: work that hashes the same decodes
//     the same); JSON is parsed, validated and formatted by jsontext
//     (github.com/go-json-experiment/json), json.go;
//   - payloads by reference (PayloadRef): decoding and validating the
//     reference, and checking fetched bytes against it (ResolvePayload) —
//     not fetching them, which the worker does;
//   - the envelope's JSON Schema (Schema, envelope.schema.json), kept in
//     lockstep with Decode by a test over the fixtures in testdata/schema;
//   - the classification of rejected envelopes (Error, Code, ErrInvalid);
//   - adapted bodies (adapt.go, tree.go): messages that are not envelopes —
//     an SNS notification (wrapped, or as raw delivery hands it over), an
//     EventBridge event, a service's own JSON — read into the same
//     *Envelope by an Adapter whose JMESPath expressions say where each
//     field comes from (AdapterSpec, NewAdapter); the ordered list of
//     adapted message types (Adapters) and the rule by which
//     Decoder.Read picks the reading of a body (an envelope first, then
//     the adapters in order); and holding an adapted body to the
//     decoder's rules, limits, codes and request hash.
//
// It does not own, and knows nothing about: which handler a message type
// has (the root package's Registry ties a route to its Adapter),
// verifying SNS signatures (a queue's subscription is trusted by its
// access policy), idempotency records and how the request hash is
// compared against them, DynamoDB, SQS (receiving, deleting, visibility,
// dead-lettering), or failure policy (what to do with a rejected message,
// retry decisions; AttemptPolicy is only decoded and validated here).
// Callers decide what a Code means operationally.
//
// Decoding is strict about the envelope's own fields and lenient about the
// future: unknown top-level fields are ignored, while schemaVersion is
// checked before anything else so that a message from a newer schema is
// reported as CodeUnknownSchemaVersion rather than as a field error. An
// adapted body is parsed whole: a member name repeated anywhere in it is
// refused. All functions are safe for concurrent use and never panic on
// any input (FuzzDecode, FuzzRead).
package envelope
