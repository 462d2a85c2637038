package envelope

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jmespath-community/go-jmespath"
)

// Adapted bodies: messages that are not ddbworker's envelope — an SNS
// notification, an EventBridge event, a service's own JSON — read into the
// same *Envelope Decode returns, so that everything after decoding (the
// request hash, the gate, the inbox, the DLQ) treats them alike.
//
// An Adapter says how: which bodies it recognises and, by JMESPath
// expressions over the body, where the envelope's fields come from.
// Adapters are tied to message types in an ordered list (Adapters), and
// Decoder.Read picks the reading of a body:
//
//  1. A body over Config.MaxBodyBytes and one that is not a JSON object
//     are envelopes: Decode reads them, exactly as without adapters.
//  2. A body whose top-level object has a schemaVersion member is an
//     envelope when Decode accepts it. When Decode rejects it, it may be
//     JSON of a producer's own that has a schemaVersion of its own (a
//     common member), or a malformed envelope: it is offered to the
//     adapters (3), but only one that recognises it by what it says takes
//     it — its Match holds, its type (Type, TypeAttribute) is its message
//     type, it is an EventBridge event of its detail-type or an SNS
//     notification. A JSON adapter with neither Match nor type (a
//     catch-all, which would take every malformed envelope and might read
//     it into work of its own type) does not. When none takes it, Decode's
//     rejection stands, so a malformed envelope keeps its precise code; it
//     names a catch-all that did not take the body.
//  3. Otherwise the adapters are asked in the list's order; the first that
//     takes the body for its message type reads it. A JSON adapter takes a
//     body when its Match (if any) holds and its Type or TypeAttribute (if
//     any) yields the message type; an EventBridge adapter, an event
//     (detail-type, source and detail members) whose detail-type is its
//     DetailType (by default the message type), from its Source (if set),
//     whose Match (if any) holds; an SNS adapter unwraps a notification
//     (Type "Notification" with a TopicArn: its Message, parsed) or takes
//     any other body as raw delivery hands it over, and asks its inner
//     adapter.
//  4. An adapter that recognised the body without taking it — an SNS
//     notification or EventBridge event no adapter takes, a type no
//     adapter's message type is, a type expression that yields nothing —
//     leaves a rejection, the answer when no adapter takes the body
//     (CodeUnknownMessageType, CodeMissingField messageType, or what
//     unwrapping the notification found wrong): the first, in the list's
//     order, of an adapter that recognised the body's shape (a
//     notification, an event), else the first. A body nobody recognised
//     is read by Decode, which rejects it as it always did; so is, by (2),
//     a body with a schemaVersion member that no adapter took.
//
// Two message types whose adapters could both take a body are resolved by
// the order; Adapters.With refuses a message type that an earlier one
// would always take first (an earlier JSON adapter with neither Match nor
// type takes every body).
//
// An adapted body is held to the decoder's rules: Config.MaxBodyBytes for
// the body (an SNS notification as received); the whole body, and an SNS
// notification's Message, must be one JSON value without a repeated
// member name anywhere (CodeInvalidJSON, Field naming the member); the
// fields the expressions yield pass the envelope's own rules in the
// envelope's order (CodeMissingField, CodeInvalidField, CodeKeyTooLong,
// with Field the envelope field and Expression the expression); and the
// payload the adapter yields is canonicalized and hashed as an envelope's
// (nesting, UTF-8, numbers by value). An expression that yields a value of
// the wrong JSON type is CodeInvalidJSON, as the envelope's wrong types
// are. A key is never defaulted: a Key expression that yields nothing is
// CodeMissingField "idempotencyKey".

// Input is one message body to read, with what its transport says of it.
type Input struct {
	// Body is the message body.
	Body []byte
	// Attributes are the message's attributes of type String or Number, by
	// name (an adapter's TypeAttribute reads them).
	Attributes map[string]string
	// MessageID is the transport's id of the message (SQS MessageId): the
	// messageId of an adapted body that carries none of its own (a JSON
	// body on SQS, an SNS message delivered raw). Never a key.
	MessageID string
	// SentAt is when the transport took the message (SQS SentTimestamp):
	// the occurredAt of such a body.
	SentAt time.Time
}

// AdapterKind is the shape of body an Adapter reads.
type AdapterKind int

const (
	// KindJSON reads any JSON object: every field by expression.
	KindJSON AdapterKind = iota + 1
	// KindEventBridge reads an EventBridge event: detail is the payload,
	// id the messageId, time the occurredAt, source the producer, and the
	// event's detail-type decides the message type.
	KindEventBridge
)

// AdapterSpec describes an Adapter. Every expression is JMESPath, searched
// over the body (an SNS notification's Message; an EventBridge event as a
// whole); a fixed value is a raw string literal: 'Order'.
type AdapterSpec struct {
	// Kind is the shape of body read. Required.
	Kind AdapterKind
	// SNS unwraps SNS notifications (a body with Type "Notification" and a
	// TopicArn): the notification's Message is the body read, its
	// MessageId the messageId, its Timestamp the occurredAt, its TopicArn
	// the producer (unless expressions say otherwise) and its
	// MessageAttributes the attributes. Any other body is taken as raw
	// message delivery hands it over: the publisher's message itself.
	SNS bool

	// Match, when set, must hold (be JMESPath-truthy) for the adapter to
	// take a body. An expression that fails on a body does not hold.
	Match string
	// Type (KindJSON) yields the body's message type: the adapter takes
	// the bodies of its own message type only. Empty: every body Match
	// lets through is of its message type.
	Type string
	// TypeAttribute (KindJSON), instead of Type, names the message
	// attribute that carries the type (an SNS notification's
	// MessageAttributes; on SQS, the message's own).
	TypeAttribute string
	// DetailType (KindEventBridge) is the detail-type taken. Default: the
	// message type.
	DetailType string
	// Source (KindEventBridge), when set, is the only source taken.
	Source string

	// Key yields the idempotency key: from the domain, the same for every
	// copy of the same work. Required.
	Key string
	// AggregateType and AggregateID yield the aggregate. Required.
	AggregateType, AggregateID string
	// AggregateVersion, when set, yields the aggregateVersion (an integer).
	AggregateVersion string
	// Payload yields the payload. Default: the body itself (KindJSON),
	// detail (KindEventBridge).
	Payload string
	// MessageID, OccurredAt and Producer yield the delivery's metadata,
	// never hashed. Defaults: KindEventBridge id, time and source; KindJSON
	// the notification's MessageId, Timestamp and TopicArn (SNS), or the
	// transport's message id and send time (Input) and "sqs" ("sns" for a
	// raw SNS delivery). Where one yields nothing, the KindJSON default
	// stands in.
	MessageID, OccurredAt, Producer string
}

// Adapter reads bodies of one shape into envelopes (see AdapterSpec). It is
// immutable and safe for concurrent use.
type Adapter struct {
	kind                   AdapterKind
	sns                    bool
	name                   string
	typeAttr, detail, from string
	match, typ             *expr
	key, aggType, aggID    *expr
	aggVersion, payload    *expr
	messageID, occurredAt  *expr
	producer               *expr
}

// expr is a compiled JMESPath expression.
type expr struct {
	text string
	jp   jmespath.JMESPath
}

// ErrAdapter is matched by every *AdapterError.
var ErrAdapter = errors.New("envelope: invalid adapter")

// AdapterError is an adapter that cannot be built (NewAdapter) or a
// message type that cannot be given one (Adapters.With).
type AdapterError struct {
	// MessageType is the message type being given the adapter (With), or "".
	MessageType string
	// Field is the AdapterSpec field at fault ("Key"), or "".
	Field string
	// Expression is the field's expression, when it does not compile.
	Expression string
	// Reason is human-readable text.
	Reason string
	// Err is the JMESPath compiler's error, or nil.
	Err error
}

func (e *AdapterError) Error() string {
	s := "envelope: adapter"
	if e.MessageType != "" {
		s += " of message type " + strconv.Quote(e.MessageType)
	}
	if e.Field != "" {
		s += ": " + e.Field
	}
	if e.Expression != "" {
		s += " " + strconv.Quote(e.Expression)
	}
	s += ": " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns ErrAdapter and, when non-nil, Err.
func (e *AdapterError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrAdapter}
	}
	return []error{ErrAdapter, e.Err}
}

// NewAdapter compiles s. Every problem is reported (errors.Join of
// *AdapterError).
func NewAdapter(s AdapterSpec) (*Adapter, error) {
	a := &Adapter{kind: s.Kind, sns: s.SNS, typeAttr: s.TypeAttribute, detail: s.DetailType, from: s.Source}
	var errs []error
	bad := func(field, reason string) { errs = append(errs, &AdapterError{Field: field, Reason: reason}) }
	switch s.Kind {
	case KindJSON:
		a.name = "JSON"
		if s.DetailType != "" {
			bad("DetailType", "only an EventBridge adapter takes events by detail-type")
		}
		if s.Source != "" {
			bad("Source", "only an EventBridge adapter takes events by source")
		}
		if s.Type != "" && s.TypeAttribute != "" {
			bad("TypeAttribute", "the type comes from Type or from TypeAttribute, not both")
		}
	case KindEventBridge:
		a.name = "EventBridge"
		if s.Type != "" || s.TypeAttribute != "" {
			bad("Type", "an EventBridge event's type is its detail-type: set DetailType")
		}
		s.Payload = cmp.Or(s.Payload, "detail")
		s.MessageID = cmp.Or(s.MessageID, "id")
		s.OccurredAt = cmp.Or(s.OccurredAt, "time")
		s.Producer = cmp.Or(s.Producer, "source")
	default:
		bad("Kind", "must be KindJSON or KindEventBridge")
	}
	if s.SNS {
		a.name = "SNS(" + a.name + ")"
	}
	for _, f := range [...]struct {
		field, text string
		dst         **expr
		required    bool
	}{
		{"Match", s.Match, &a.match, false},
		{"Type", s.Type, &a.typ, false},
		{"Key", s.Key, &a.key, true},
		{"AggregateType", s.AggregateType, &a.aggType, true},
		{"AggregateID", s.AggregateID, &a.aggID, true},
		{"AggregateVersion", s.AggregateVersion, &a.aggVersion, false},
		{"Payload", s.Payload, &a.payload, false},
		{"MessageID", s.MessageID, &a.messageID, false},
		{"OccurredAt", s.OccurredAt, &a.occurredAt, false},
		{"Producer", s.Producer, &a.producer, false},
	} {
		if f.text == "" {
			if f.required {
				reason := "an expression is required"
				if f.field == "Key" {
					reason = "an expression is required: the idempotency key comes from the domain, never from a per-send id"
				}
				bad(f.field, reason)
			}
			continue
		}
		jp, err := jmespath.Compile(f.text)
		if err != nil {
			errs = append(errs, &AdapterError{Field: f.field, Expression: f.text, Reason: "not a JMESPath expression", Err: err})
			continue
		}
		*f.dst = &expr{text: f.text, jp: jp}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return a, nil
}

// String names the adapter: "JSON", "SNS(JSON)", "EventBridge", "SNS(EventBridge)".
func (a *Adapter) String() string { return a.name }

// Adapters is an ordered list of message types, each with the adapter
// that reads its bodies: the order in which Decoder.Read asks them. The
// zero value and nil are empty. It is immutable and safe for concurrent
// use.
type Adapters struct {
	list []adapted
}

type adapted struct {
	messageType string
	a           *Adapter
}

// With returns the list with messageType read by a at its end. It refuses
// a messageType that is not a valid message type, one already in the
// list, and one whose bodies an earlier adapter would always take first.
func (as *Adapters) With(messageType string, a *Adapter) (*Adapters, error) {
	if a == nil {
		return nil, &AdapterError{MessageType: messageType, Reason: "nil adapter"}
	}
	if err := checkName(fieldNames[fMessageType], messageType, DefaultMaxFieldBytes); err != nil || messageType == "" {
		return nil, &AdapterError{MessageType: messageType,
			Reason: "an adapted message type must be 1.." + strconv.Itoa(maxNameLen) + " characters of [A-Za-z0-9._-]"}
	}
	var list []adapted
	if as != nil {
		list = as.list
	}
	for _, e := range list {
		if e.messageType == messageType {
			return nil, &AdapterError{MessageType: messageType, Reason: "the message type has an adapter already"}
		}
		if why := e.a.covers(e.messageType, a, messageType); why != "" {
			return nil, &AdapterError{MessageType: messageType, Reason: fmt.Sprintf(
				"message type %q, earlier in the list, would take every body this one's %s adapter could (%s): add the narrower one first, or narrow the earlier one with a Match or a type",
				e.messageType, a.name, why)}
		}
	}
	return &Adapters{list: append(slices.Clip(list), adapted{messageType: messageType, a: a})}, nil
}

// Len is the number of adapted message types.
func (as *Adapters) Len() int {
	if as == nil {
		return 0
	}
	return len(as.list)
}

// Types lists the adapted message types in the order Read asks them.
func (as *Adapters) Types() []string {
	out := make([]string, 0, as.Len())
	for i := range as.Len() {
		out = append(out, as.list[i].messageType)
	}
	return out
}

// Attributes lists the message attributes the adapters read to take a
// body (their TypeAttribute), sorted, each once: a copy of a message —
// the worker's DLQ copy and re-sends — must keep them, or no adapter can
// read it again (the worker ranks them right after its control
// attributes, dlq.FitAttributesFor).
func (as *Adapters) Attributes() []string {
	var out []string
	for i := range as.Len() {
		if n := as.list[i].a.typeAttr; n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// covers reports why a, the adapter of messageType, takes every body that
// l, of lType, could take ("" when it may not): l would never be asked.
func (a *Adapter) covers(messageType string, l *Adapter, lType string) string {
	if a.match != nil {
		return ""
	}
	switch a.kind {
	case KindJSON:
		if a.typ != nil || a.typeAttr != "" {
			return ""
		}
		switch {
		case !a.sns:
			return "it has neither Match nor type, so it takes every JSON body"
		case l.sns || l.kind == KindEventBridge:
			return "it has neither Match nor type, so it takes every SNS notification and every other JSON body"
		}
	case KindEventBridge:
		want, lwant := cmp.Or(a.detail, messageType), cmp.Or(l.detail, lType)
		if l.kind == KindEventBridge && want == lwant && (a.from == "" || a.from == l.from) && (a.sns || !l.sns) {
			return "it has no Match and takes every event of detail-type " + strconv.Quote(want)
		}
	}
	return ""
}

// Read reads a message body: ddbworker's envelope, as Decode does, or a
// body one of as's adapters takes, into the envelope it yields, of that
// adapter's message type. See the rule above (the file's comment): a body
// over MaxBodyBytes or that is not a JSON object, any body when as is
// empty, and a body with a top-level schemaVersion member that Decode
// accepts are read by Decode; a body with a schemaVersion member that
// Decode rejects is read by an adapter that recognises it, else rejected
// as Decode rejects it. The returned error is always a *Error; for an
// adapted body its Adapter names the adapter.
func (d *Decoder) Read(in Input, as *Adapters) (*Envelope, error) {
	if d == nil {
		d = defaultDecoder
	}
	if as.Len() == 0 || len(in.Body) > d.cfg.MaxBodyBytes {
		return d.Decode(in.Body)
	}
	var claimed *Error // Decode's rejection of a body with a schemaVersion member
	if isEnvelope(in.Body) {
		env, err := d.decode(in.Body)
		if err == nil {
			return env, nil
		}
		claimed = err
	}
	doc, terr := parseTree(in.Body)
	switch {
	case claimed != nil && terr != nil:
		return nil, claimed
	case terr != nil && terr.syntax != nil:
		return d.Decode(in.Body) // the decoder's own report of malformed JSON
	case terr != nil:
		return nil, repeated(terr, "")
	}
	root, ok := doc.(map[string]any)
	if !ok {
		return d.Decode(in.Body)
	}
	r := &reading{d: d, in: in, root: root, claimed: claimed != nil}
	var first, shaped *Error
	for _, e := range as.list {
		env, taken, recognised, err := e.a.read(r, e.messageType)
		switch {
		case taken && err != nil:
			return nil, err
		case taken:
			return env, nil
		case err != nil && recognised && shaped == nil:
			shaped = err
		case err != nil && first == nil:
			first = err
		}
	}
	if claimed != nil {
		if r.catchAll != "" {
			c := *claimed
			c.Reason += fmt.Sprintf(" (not read by the adapter of %q, which has neither Match nor type: a body with a top-level schemaVersion that is not a valid envelope goes only to an adapter that recognises it)", r.catchAll)
			return nil, &c
		}
		return nil, claimed
	}
	if err := cmp.Or(shaped, first); err != nil {
		return nil, err
	}
	return d.Decode(in.Body)
}

// isEnvelope reports whether b is a JSON object with a top-level
// schemaVersion member.
func isEnvelope(b []byte) bool {
	var spans [1]span
	var rd reader
	var scratch []byte
	_, err := scanObject(b, spans[:], func(k []byte) int {
		if string(k) == "schemaVersion" {
			return 0
		}
		return -1
	}, &rd, &scratch, false)
	return err == nil && spans[0].set
}

// repeated is the rejection of a repeated member name; within is the
// member the document was found in ("Message" of a notification).
func repeated(terr *treeError, within string) *Error {
	field := terr.field()
	if within != "" {
		field = within + "." + field
	}
	return &Error{Code: CodeInvalidJSON, Field: field, Reason: "a member name appears more than once in its object"}
}

// reading is one body being read: its document, and its SNS notification
// unwrapped once for every SNS adapter.
type reading struct {
	d    *Decoder
	in   Input
	root map[string]any
	// claimed: the body has a top-level schemaVersion member and Decode
	// rejected it; catchAll is the first message type whose catch-all
	// adapter therefore did not take it.
	claimed  bool
	catchAll string

	unwrapped bool
	isSNS     bool
	sns       source
	snsErr    *Error
}

// source is the document an adapter searches and what its transport says
// of it.
type source struct {
	doc       map[string]any
	messageID string
	producer  string
	timestamp string    // an SNS notification's Timestamp
	sentAt    time.Time // the transport's send time
	attrs     map[string]string
	wrapped   bool // unwrapped from an SNS notification
}

// notification unwraps the body as an SNS notification, once.
func (r *reading) notification() (source, bool, *Error) {
	if !r.unwrapped {
		r.unwrapped = true
		r.sns, r.isSNS, r.snsErr = r.unwrap()
	}
	return r.sns, r.isSNS, r.snsErr
}

func (r *reading) unwrap() (source, bool, *Error) {
	typ, isType := r.root["Type"].(string)
	arn, isArn := r.root["TopicArn"].(string)
	if !isType || !isArn {
		return source{}, false, nil
	}
	if typ != "Notification" {
		what := "an SNS message that is not a notification"
		if typ == "SubscriptionConfirmation" || typ == "UnsubscribeConfirmation" {
			what = "an SNS " + typ + " message, not a notification: confirm the subscription (its SubscribeURL)"
		}
		return source{}, true, &Error{Code: CodeInvalidJSON, Field: "Type", Reason: "the body is " + what}
	}
	src := source{producer: arn, wrapped: true}
	var msg string
	for _, f := range [...]struct {
		name string
		dst  *string
	}{{"MessageId", &src.messageID}, {"Timestamp", &src.timestamp}, {"Message", &msg}} {
		switch v := r.root[f.name].(type) {
		case nil:
			return source{}, true, &Error{Code: CodeMissingField, Field: f.name, Reason: "the SNS notification has no " + f.name}
		case string:
			*f.dst = v
		default:
			return source{}, true, &Error{Code: CodeInvalidJSON, Field: f.name, Reason: "must be a string"}
		}
	}
	if msg == "" {
		return source{}, true, &Error{Code: CodeMissingField, Field: "Message", Reason: "the SNS notification's Message is empty"}
	}
	doc, terr := parseTree([]byte(msg))
	switch {
	case terr != nil && terr.syntax != nil:
		return source{}, true, &Error{Code: CodeInvalidJSON, Field: "Message", Reason: "the SNS message is not valid JSON", Err: terr.syntax}
	case terr != nil:
		return source{}, true, repeated(terr, "Message")
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return source{}, true, &Error{Code: CodeInvalidJSON, Field: "Message", Reason: "the SNS message must be a JSON object"}
	}
	src.doc = obj
	if attrs, ok := r.root["MessageAttributes"].(map[string]any); ok {
		src.attrs = make(map[string]string, len(attrs))
		for name, v := range attrs {
			a, _ := v.(map[string]any)
			if t, _ := a["Type"].(string); t == "Binary" {
				continue
			}
			if s, ok := a["Value"].(string); ok {
				src.attrs[name] = s
			}
		}
	}
	return src, true, nil
}

// read is what a makes of the body for messageType: taken (the envelope,
// or why the body it took is rejected), or not — with, when a recognised
// the body without taking it, the rejection that stands if no adapter
// takes it, and whether it recognised the body's shape (an SNS
// notification, an EventBridge event), not only its type.
func (a *Adapter) read(r *reading, messageType string) (env *Envelope, taken, recognised bool, miss *Error) {
	env, taken, miss = a.take(r, messageType, &recognised)
	return env, taken, recognised, miss
}

func (a *Adapter) take(r *reading, messageType string, recognised *bool) (*Envelope, bool, *Error) {
	src := source{doc: r.root, messageID: r.in.MessageID, sentAt: r.in.SentAt, attrs: r.in.Attributes, producer: "sqs"}
	if a.sns {
		s, isSNS, err := r.notification()
		switch {
		case err != nil:
			*recognised = true
			return nil, false, a.mark(err)
		case isSNS:
			src = s
		default:
			src.producer = "sns"
		}
	}
	*recognised = src.wrapped
	if r.claimed && !src.wrapped && a.kind == KindJSON && a.match == nil && a.typ == nil && a.typeAttr == "" {
		// A catch-all recognises nothing of a body that claims to be an
		// envelope: it is not read as this message type's.
		if r.catchAll == "" {
			r.catchAll = messageType
		}
		return nil, false, nil
	}
	unknown := func(reason string) *Error {
		return &Error{Code: CodeUnknownMessageType, Adapter: a.name, Reason: reason}
	}
	unknownType := func(seen, reason string) *Error {
		e := unknown(reason)
		e.MessageType = seen
		return e
	}
	if a.kind == KindEventBridge {
		dt, isDT := src.doc["detail-type"].(string)
		from, isFrom := src.doc["source"].(string)
		_, isDetail := src.doc["detail"]
		if !isDT || !isFrom || !isDetail {
			if *recognised {
				return nil, false, unknown("no message type takes this SNS notification")
			}
			return nil, false, nil
		}
		*recognised = true
		if dt != cmp.Or(a.detail, messageType) || a.from != "" && from != a.from {
			return nil, false, unknownType(dt, fmt.Sprintf("no message type takes EventBridge events of detail-type %.128q from source %.128q", dt, from))
		}
	}
	if a.match != nil {
		if v, err := a.match.eval(src.doc); err != nil || falsy(v) {
			if *recognised {
				return nil, false, unknown("no message type's Match holds for this " + a.shape(src))
			}
			return nil, false, nil
		}
	}
	switch {
	case a.typeAttr != "":
		t := src.attrs[a.typeAttr]
		if t == "" {
			return nil, false, &Error{Code: CodeMissingField, Field: fieldNames[fMessageType], Adapter: a.name,
				Reason: "the message attribute " + strconv.Quote(a.typeAttr) + " (TypeAttribute) is absent or empty"}
		}
		if t != messageType {
			return nil, false, unknownType(t, fmt.Sprintf("no message type takes this %s of type %.128q (attribute %q)", a.shape(src), t, a.typeAttr))
		}
	case a.typ != nil:
		t, err := a.text(a.typ, fieldNames[fMessageType], src.doc)
		switch {
		case err != nil:
			return nil, false, a.mark(err)
		case t == "":
			return nil, false, a.mark(&Error{Code: CodeMissingField, Field: fieldNames[fMessageType], Expression: a.typ.text,
				Reason: "the expression yields nothing (the member is absent or null): the body's type cannot be determined"})
		case t != messageType:
			return nil, false, unknownType(t, fmt.Sprintf("no message type takes this %s of type %.128q", a.shape(src), t))
		}
	}
	env, err := a.build(r.d, &src, messageType)
	return env, true, err
}

// shape names what src is, for a rejection.
func (a *Adapter) shape(src source) string {
	switch {
	case a.kind == KindEventBridge:
		return "EventBridge event"
	case src.wrapped:
		return "SNS notification"
	}
	return "JSON body"
}

// mark names a in err (a copy: the unwrapped notification's error is
// shared by every SNS adapter).
func (a *Adapter) mark(err *Error) *Error {
	c := *err
	c.Adapter = a.name
	return &c
}

// build is the envelope a makes of src for messageType: each field
// decoded in the envelope's order, then the envelope's validation and
// request hash, as Decode runs them.
func (a *Adapter) build(d *Decoder, src *source, messageType string) (*Envelope, *Error) {
	e := &Envelope{SchemaVersion: SchemaV1, MessageType: messageType}
	ds := decodeState{svPresent: true}
	var err *Error
	if e.MessageID, err = a.textOr(a.messageID, fieldNames[fMessageID], src.doc, src.messageID); err != nil {
		return nil, a.mark(err)
	}
	if e.Producer, err = a.textOr(a.producer, fieldNames[fProducer], src.doc, src.producer); err != nil {
		return nil, a.mark(err)
	}
	var at any
	if a.occurredAt != nil {
		v, err := a.occurredAt.eval(src.doc) // failing on this body, it yields nothing: the default stands in
		if at = v; err == nil && v != nil && jsonType(v) != "string" {
			return nil, a.mark(wrongType(a.occurredAt, fieldNames[fOccurredAt], v, "an RFC 3339 string"))
		}
	}
	switch {
	case at != nil:
		ds.occurredAt = parseTime(at.(string), &e.OccurredAt)
	case src.timestamp != "":
		ds.occurredAt = parseTime(src.timestamp, &e.OccurredAt)
	case !src.sentAt.IsZero():
		e.OccurredAt, ds.occurredAt.present = src.sentAt.UTC(), true
	}
	// An expression that fails on the body yields nothing: the field is
	// missing, reported in the envelope's order with why (fails).
	fails := map[string]*Error{}
	for _, f := range [...]struct {
		x   *expr
		id  int
		dst *string
	}{
		{a.key, fIdempotencyKey, &e.IdempotencyKey},
		{a.aggType, fAggregateType, &e.AggregateType},
		{a.aggID, fAggregateID, &e.AggregateID},
	} {
		*f.dst, err = a.text(f.x, fieldNames[f.id], src.doc)
		switch {
		case err != nil && err.Code == CodeMissingField:
			fails[fieldNames[f.id]] = err
		case err != nil:
			return nil, a.mark(err)
		}
	}
	if a.aggVersion != nil {
		if e.AggregateVersion, err = a.integer(a.aggVersion, fieldNames[fAggregateVersion], src.doc); err != nil && err.Code != CodeMissingField {
			return nil, a.mark(err)
		}
	}
	payload := any(src.doc)
	if a.payload != nil {
		v, perr := a.payload.eval(src.doc)
		if perr != nil {
			fails[fieldNames[fPayload]] = failed(a.payload, fieldNames[fPayload], perr)
		}
		payload = v
	}
	if payload != nil {
		b, reason := appendTree(nil, payload)
		if reason != "" {
			return nil, a.attribute(&Error{Code: CodeInvalidField, Field: fieldNames[fPayload], Reason: reason}, src)
		}
		e.Payload = b
	}
	if err := validate(e, &d.cfg, &ds); err != nil {
		if f := fails[err.Field]; f != nil && err.Code == CodeMissingField {
			err = f
		}
		return nil, a.attribute(err, src)
	}
	h, canonical, err := d.requestHash(e)
	if err != nil {
		return nil, a.attribute(err, src)
	}
	e.RequestHash = h
	e.setCanonical(canonical)
	return e, nil
}

// attribute names, in a validation error, the adapter and the expression
// that yielded its field.
func (a *Adapter) attribute(err *Error, src *source) *Error {
	err = a.mark(err)
	var x *expr
	switch err.Field {
	case fieldNames[fMessageID]:
		x = a.messageID
	case fieldNames[fProducer]:
		x = a.producer
	case fieldNames[fOccurredAt]:
		x = a.occurredAt
	case fieldNames[fIdempotencyKey]:
		x = a.key
	case fieldNames[fAggregateType]:
		x = a.aggType
	case fieldNames[fAggregateID]:
		x = a.aggID
	case fieldNames[fAggregateVersion]:
		x = a.aggVersion
	case fieldNames[fPayload]:
		x = a.payload
	}
	if x != nil {
		err.Expression = x.text
	}
	if err.Code == CodeMissingField && err.Err == nil {
		switch {
		case x != nil:
			err.Reason = "the expression yields nothing (the member is absent or null)"
			if err.Field == fieldNames[fAggregateType] {
				err.Reason += "; a fixed value is a raw string literal, such as 'Order'"
			}
		case err.Field == fieldNames[fPayload]:
			err.Reason = "the body is empty"
		case src.wrapped:
			err.Reason = "neither the body nor the SNS notification names one"
		default:
			err.Reason = "the adapter has no expression for it and the transport gave none"
		}
	}
	return err
}

// textOr is x's text field, or def when x is nil or yields nothing (x
// yields metadata, never hashed: the transport's is as good).
func (a *Adapter) textOr(x *expr, field string, doc map[string]any, def string) (string, *Error) {
	if x == nil {
		return def, nil
	}
	s, err := a.text(x, field, doc)
	if err != nil && err.Code == CodeMissingField || err == nil && s == "" {
		return def, nil // it failed on this body, or yields nothing
	}
	return s, err
}

// text is the string x yields: a string as it is, a number in its
// canonical form (42, 42.0 and 4.2e1 are all "42"), "" for nothing.
func (a *Adapter) text(x *expr, field string, doc map[string]any) (string, *Error) {
	v, err := x.eval(doc)
	if err != nil {
		return "", failed(x, field, err)
	}
	switch t := v.(type) {
	case nil:
		return "", nil
	case string:
		return t, nil
	case float64, bigNumber:
		s, ok := numberText(t)
		if !ok {
			return "", &Error{Code: CodeInvalidField, Field: field, Expression: x.text, Reason: "the number's exponent overflows int32"}
		}
		return s, nil
	}
	return "", wrongType(x, field, v, "a string or a number")
}

// integer is the integer x yields, nil for nothing. Numbers count by
// value, as the request hash counts them: 7.0 is 7.
func (a *Adapter) integer(x *expr, field string, doc map[string]any) (*int64, *Error) {
	v, err := x.eval(doc)
	if err != nil {
		return nil, failed(x, field, err)
	}
	var n int64
	switch t := v.(type) {
	case nil:
		return nil, nil
	case float64:
		if t != math.Trunc(t) {
			return nil, wrongType(x, field, v, "an integer")
		}
		if t < -(1<<63) || t >= 1<<63 {
			return nil, &Error{Code: CodeInvalidJSON, Field: field, Expression: x.text, Reason: "integer out of range"}
		}
		n = int64(t)
	case bigNumber:
		s, ok := numberText(t)
		num, isNum := splitNumber([]byte(s))
		if !ok || !isNum || !num.isInteger() {
			return nil, wrongType(x, field, v, "an integer")
		}
		if n, ok = parseInt([]byte(s[num.intS:num.intE]), num.neg, 64); !ok {
			return nil, &Error{Code: CodeInvalidJSON, Field: field, Expression: x.text, Reason: "integer out of range"}
		}
	default:
		return nil, wrongType(x, field, v, "an integer")
	}
	return &n, nil
}

// parseTime is the outcome of parsing an RFC 3339 text, as Decode records
// it for validation.
func parseTime(s string, dst *time.Time) timeState {
	var ts timeState
	if s == "" {
		return ts
	}
	ts.present = true
	if len(s) > maxTimeLen {
		ts.err = errors.New("time text longer than " + strconv.Itoa(maxTimeLen) + " bytes")
		return ts
	}
	ts.err = dst.UnmarshalText([]byte(s))
	return ts
}

// eval runs x over doc. The interpreter's own errors quote the values they
// were given (the payload, possibly): only their start is kept.
func (x *expr) eval(doc any) (v any, err error) {
	defer func() {
		if p := recover(); p != nil {
			v, err = nil, fmt.Errorf("jmespath: %.120v", p)
		}
	}()
	v, err = x.jp.Search(doc)
	if err != nil {
		msg := err.Error()
		const p = "invalid type for: "
		if len(msg) > len(p) && strings.EqualFold(msg[:len(p)], p) {
			// "invalid type for: <the value>, expected: []functions.JpType{…}": not the value.
			_, want, _ := strings.Cut(msg[len(p):], ", expected: ")
			if _, types, ok := strings.Cut(want, "{"); ok {
				want = types
			}
			want = strings.ReplaceAll(strings.TrimSuffix(want, "}"), `"`, "")
			msg = "a function's argument is of another type, expected " + want
		}
		return nil, fmt.Errorf("jmespath: %.120s", msg)
	}
	return v, nil
}

// failed is an expression that fails on the body (a function given a
// member that is absent, null or of another type: join(':', [orderId])
// without an orderId): it yields nothing, as an absent member does.
func failed(x *expr, field string, err error) *Error {
	return &Error{Code: CodeMissingField, Field: field, Expression: x.text,
		Reason: "the expression fails on this body (a member it needs is absent, null or of another type)", Err: err}
}

// wrongType is an expression that yields a value of the wrong JSON type.
func wrongType(x *expr, field string, v any, want string) *Error {
	t := jsonType(v)
	article := "a "
	if t == "array" || t == "object" || t == "expression reference" {
		article = "an "
	}
	return &Error{Code: CodeInvalidJSON, Field: field, Expression: x.text, Reason: "the expression yields " + article + t + ", must yield " + want}
}

// falsy is JMESPath's false: false, null, and an empty string, array or
// object.
func falsy(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case bool:
		return !t
	case string:
		return t == ""
	case []any:
		return len(t) == 0
	case map[string]any:
		return len(t) == 0
	}
	return false
}
