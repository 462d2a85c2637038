package envelope

import _ "embed"

//go:embed envelope.schema.json
var schemaJSON string

// Schema returns the envelope's JSON Schema (draft 2020-12), a fresh copy.
// It describes what Decoder accepts with its default limits; the rules
// JSON Schema cannot express (byte lengths, integers written with a
// fraction, duplicate member names, payload depth) are listed in its
// description and enforced only by Decode. A test keeps the two in
// lockstep over the fixtures in testdata/schema.
func Schema() []byte { return []byte(schemaJSON) }
