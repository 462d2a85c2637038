package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// The attributes that carry a message's creation context.
const (
	// AttrTraceparent is the String message attribute holding the W3C
	// traceparent of the message's creation context
	// (00-<trace id>-<span id>-<flags>).
	AttrTraceparent = "traceparent"
	// AttrTracestate is the String message attribute holding its W3C
	// tracestate, when it has one.
	AttrTracestate = "tracestate"
	// SystemAttrAWSTraceHeader is the message system attribute SQS sets
	// from the X-Ray trace header of the send (X-Ray SDKs, Powertools, the
	// OpenTelemetry AWS SDK instrumentation with the X-Ray propagator, or
	// MessageSystemAttributes on the send).
	SystemAttrAWSTraceHeader = "AWSTraceHeader"
)

// maxAttributes is SQS's limit of message attributes per message
// (internal/sqsbatch.MaxAttributes).
const maxAttributes = 10

// QueueName is the name of the queue a queue URL (or ARN) names, its last
// segment ("orders" for https://sqs.eu-west-1.amazonaws.com/123/orders):
// messaging.destination.name, and the {destination} of a span's name.
func QueueName(queueURL string) string {
	queueURL = strings.TrimRight(queueURL, "/")
	if i := strings.LastIndexAny(queueURL, "/:"); i >= 0 {
		return queueURL[i+1:]
	}
	return queueURL
}

// Log record keys that LogHandler adds.
const (
	LogTraceID = "traceId"
	LogSpanID  = "spanId"
)

// KeyHash is an idempotency key as a span attribute: the first 16 hex
// digits (64 bits) of its SHA-256. Keys come from the domain and may carry
// personal data (a customer's e-mail, an account number); traces go to
// backends with wider access and longer retention than the inbox table, so
// the key itself is never exported. The same key always hashes the same,
// so an operator finds a key's traces by hashing it (printf '%s' KEY |
// sha256sum | cut -c1-16), and 64 bits keep collisions out of reach for
// any fleet's volume. A key guessable from a small set (order-1, order-2 …)
// can be recovered by hashing the candidates: that is pseudonymisation, not
// anonymity.
func KeyHash(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:8])
}

// Carry returns the message attributes (W3C Trace Context, the one format
// ddbworker writes) that carry sc: traceparent and,
// when sc has one, tracestate. It returns nil for an invalid sc.
func Carry(sc trace.SpanContext) map[string]types.MessageAttributeValue {
	if !sc.IsValid() {
		return nil
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), c)
	out := map[string]types.MessageAttributeValue{AttrTraceparent: str(c[AttrTraceparent])}
	if ts := c[AttrTracestate]; ts != "" {
		out[AttrTracestate] = str(ts)
	}
	return out
}

// Inject returns attrs with the context of ctx's span added as
// traceparent and tracestate, on a copy (attrs is not changed). Nothing is
// added when ctx has no valid span context, when attrs carries a
// traceparent already (a creation context the sender chose is kept, as the
// conventions ask), or beyond SQS's 10 attributes per message: the
// sender's own attributes are never displaced — with one slot left only
// traceparent is added, with none nothing.
func Inject(ctx context.Context, attrs map[string]types.MessageAttributeValue) map[string]types.MessageAttributeValue {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return attrs
	}
	if _, ok := attrs[AttrTraceparent]; ok {
		return attrs
	}
	room := maxAttributes - len(attrs)
	if room <= 0 {
		return attrs
	}
	carried := Carry(sc)
	out := make(map[string]types.MessageAttributeValue, len(attrs)+len(carried))
	maps.Copy(out, attrs)
	out[AttrTraceparent] = carried[AttrTraceparent]
	if ts, ok := carried[AttrTracestate]; ok && room > 1 {
		if _, taken := attrs[AttrTracestate]; !taken {
			out[AttrTracestate] = ts
		}
	}
	return out
}

// Extract is the creation context a received message carries: its
// traceparent (and tracestate) message attributes, or, failing that, its
// AWSTraceHeader system attribute (system: the message's Attributes). The
// span context is remote; it is invalid when the message carries none.
func Extract(attrs map[string]types.MessageAttributeValue, system map[string]string) trace.SpanContext {
	if sc := fromW3C(aws.ToString(attrs[AttrTraceparent].StringValue), aws.ToString(attrs[AttrTracestate].StringValue)); sc.IsValid() {
		return sc
	}
	return fromSystem(system)
}

// ExtractDelivery is the creation context a received SQS message carries,
// its body read too: its traceparent message attributes; else, when its
// body is an SNS notification (an SNS subscription without raw delivery
// puts the publisher's message attributes in the notification, not on the
// SQS message), the traceparent and tracestate of the notification's
// MessageAttributes (FromSNS); else its AWSTraceHeader. A traceparent the
// publisher set is the more precise context: the AWSTraceHeader of an SNS
// delivery may be the topic's own segment.
func ExtractDelivery(attrs map[string]types.MessageAttributeValue, system map[string]string, body string) trace.SpanContext {
	if sc := fromW3C(aws.ToString(attrs[AttrTraceparent].StringValue), aws.ToString(attrs[AttrTracestate].StringValue)); sc.IsValid() {
		return sc
	}
	if sc := FromSNS(body); sc.IsValid() {
		return sc
	}
	return fromSystem(system)
}

// FromSNS is the creation context an SNS notification (the JSON body SNS
// delivers to an SQS queue without raw message delivery) carries in its
// MessageAttributes — {"traceparent":{"Type":"String","Value":"00-…"}},
// and tracestate alike — or an invalid span context when body is not a
// notification or carries none. Bodies that do not mention traceparent
// are not decoded.
func FromSNS(body string) trace.SpanContext {
	if !strings.Contains(body, `"`+AttrTraceparent+`"`) || !strings.HasPrefix(strings.TrimSpace(body), "{") {
		return trace.SpanContext{}
	}
	var n struct {
		Type              string
		MessageAttributes map[string]struct{ Type, Value string }
	}
	if json.Unmarshal([]byte(body), &n) != nil || n.Type != "Notification" {
		return trace.SpanContext{}
	}
	str := func(name string) string {
		if a := n.MessageAttributes[name]; a.Type == "String" {
			return a.Value
		}
		return ""
	}
	return fromW3C(str(AttrTraceparent), str(AttrTracestate))
}

// fromW3C is the remote span context of a W3C traceparent and tracestate;
// invalid when tp is empty or not one.
func fromW3C(tp, ts string) trace.SpanContext {
	if tp == "" {
		return trace.SpanContext{}
	}
	c := propagation.MapCarrier{AttrTraceparent: tp}
	if ts != "" {
		c[AttrTracestate] = ts
	}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), c))
}

// fromSystem is the creation context of a message's AWSTraceHeader system
// attribute; invalid when it has none.
func fromSystem(system map[string]string) trace.SpanContext {
	if h := system[SystemAttrAWSTraceHeader]; h != "" {
		if sc, ok := FromXRay(h); ok {
			return sc
		}
	}
	return trace.SpanContext{}
}

// FromXRay converts an X-Ray trace header (AWSTraceHeader, X-Amzn-Trace-Id:
// Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1)
// to a W3C span context: the trace id is the Root's epoch and unique parts
// joined (5759e988bd862e3fe1be46a994272793), the span id is Parent,
// Sampled=1 sets the sampled flag (0, ? or none leaves it clear); Lineage
// and other fields are ignored. ok is false without a valid Root and
// Parent.
func FromXRay(header string) (sc trace.SpanContext, ok bool) {
	var cfg trace.SpanContextConfig
	var haveRoot, haveParent bool
	for part := range strings.SplitSeq(header, ";") {
		k, v, found := strings.Cut(strings.TrimSpace(part), "=")
		if !found {
			continue
		}
		switch strings.TrimSpace(k) {
		case "Root":
			ver, rest, ok := strings.Cut(strings.TrimSpace(v), "-")
			epoch, unique, ok2 := strings.Cut(rest, "-")
			if !ok || !ok2 || ver != "1" || len(epoch) != 8 || len(unique) != 24 {
				return trace.SpanContext{}, false
			}
			id, err := trace.TraceIDFromHex(epoch + unique)
			if err != nil {
				return trace.SpanContext{}, false
			}
			cfg.TraceID, haveRoot = id, true
		case "Parent":
			id, err := trace.SpanIDFromHex(strings.TrimSpace(v))
			if err != nil {
				return trace.SpanContext{}, false
			}
			cfg.SpanID, haveParent = id, true
		case "Sampled":
			if strings.TrimSpace(v) == "1" {
				cfg.TraceFlags = trace.FlagsSampled
			}
		}
	}
	if !haveRoot || !haveParent {
		return trace.SpanContext{}, false
	}
	cfg.Remote = true
	sc = trace.NewSpanContext(cfg)
	return sc, sc.IsValid()
}

// ToXRay is sc as an X-Ray trace header (FromXRay's inverse), "" for an
// invalid sc.
func ToXRay(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	id := sc.TraceID().String()
	sampled := 0
	if sc.IsSampled() {
		sampled = 1
	}
	return fmt.Sprintf("Root=1-%s-%s;Parent=%s;Sampled=%d", id[:8], id[8:], sc.SpanID(), sampled)
}

// Link is the link of a consumer span to a message's creation context
// (none for an invalid one), with the message's id.
func Link(sc trace.SpanContext, messageID string) []trace.Link {
	if !sc.IsValid() {
		return nil
	}
	return []trace.Link{{SpanContext: sc, Attributes: []attribute.KeyValue{semconv.MessagingMessageID(messageID)}}}
}

// LogHandler wraps h so that every record logged with a context that holds
// a valid span carries that span's trace and span ids (LogTraceID,
// LogSpanID), lower-case hex as W3C and OTLP write them: a log line is
// found from its trace and the other way round. Without a span the record
// passes unchanged.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String(LogTraceID, sc.TraceID().String()), slog.String(LogSpanID, sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{h.Handler.WithAttrs(attrs)}
}

func (h logHandler) WithGroup(name string) slog.Handler { return logHandler{h.Handler.WithGroup(name)} }

func str(s string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
}
