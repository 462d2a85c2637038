package ddbworker

import (
	"errors"
	"fmt"

	"github.com/ddbworker/ddbworker/envelope"
)

// Messages a team already sends — an SNS notification, an EventBridge
// event, a service's own JSON — need no rewrite of their producers: a
// route reads them with a body adapter,
//
//	reg.Register("OrderPlaced", ddbworker.JSON(h.Placed), ddbworker.Adapt(ddbworker.SNS(ddbworker.JSONBody{
//		Type: "eventType", Key: "join(':', ['order', orderId, 'placed'])",
//		AggregateType: "'order'", AggregateID: "orderId", AggregateVersion: "version",
//	})))
//
// and the worker turns each such body into the envelope it would have
// been: the request hash, the gate, the inbox, the DLQ and the handler see
// no difference. The route still takes ddbworker envelopes of its type.
//
// Expressions are JMESPath (https://jmespath.org), the query language of
// the AWS CLI's --query and of AWS Lambda Powertools' idempotency key: a
// member ("orderId", "detail.orderId", "\"detail-type\""), a fixed value
// as a raw string literal ('order'), a key built of several members
// (join(':', [customerId, orderId])), a condition (eventType ==
// 'OrderPlaced'). A number yields its canonical text: 42, 42.0 and 4.2e1
// are the key "42".
//
// Which route reads a body: a valid ddbworker envelope (and a body that is
// not a JSON object) is an envelope, routed by its messageType as always;
// any other body is offered to the adapted routes in registration order,
// and the first whose adapter takes it reads it. A body with a top-level
// schemaVersion member that is not a valid envelope — JSON of your own
// with a schemaVersion of its own, or a malformed envelope — is taken only
// by an adapter that recognises it (its Match holds or its type is the
// route's), never by a catch-all JSONBody, and when none takes it, it is
// rejected as the envelope it claims to be (a malformed envelope keeps its
// precise code). A body none takes is rejected: UNKNOWN_MESSAGE_TYPE when
// an adapter recognised it (an SNS notification, an EventBridge event, a
// JSON body of a type no route has), MISSING_FIELD messageType when a Type
// expression yields nothing, else as an envelope (MISSING_FIELD
// schemaVersion). Register refuses a route that an earlier adapted route
// would always take first.

// BodyAdapter is how a route reads message bodies that are not
// ddbworker's envelope: a JSONBody, an EventBridge event, or SNS of
// either. Give it to the route with Adapt.
type BodyAdapter interface {
	adapterSpec() (envelope.AdapterSpec, error)
}

// JSONBody reads a JSON object of the producer's own. Each field is a
// JMESPath expression over the body.
//
// What the producer must guarantee: Key yields the same key for the same
// work on every send (a retry or a re-publish must not change it: never a
// random or per-send id, never the SQS or SNS MessageId, which the key can
// never default to), and the payload — the body, or what Payload yields —
// is the same for the same work: it is what the request hash covers, so a
// member that changes per send (a send time, a message id) belongs
// outside it (Payload: "data", or "{orderId: orderId, amount: amount}").
type JSONBody struct {
	// Key yields the idempotency key. Required. A body for which it yields
	// nothing is rejected terminal MISSING_FIELD idempotencyKey.
	Key string
	// Type yields the body's message type: the route takes the bodies of
	// its own type, and a body whose Type yields nothing is rejected
	// MISSING_FIELD messageType. Empty (and TypeAttribute empty): every
	// body Match lets through is of the route's type. With neither a type
	// nor Match (a catch-all), the route does not take a body with a
	// top-level schemaVersion member: give such bodies a Type or a Match.
	Type string
	// TypeAttribute, instead of Type, names the message attribute that
	// carries the type: an SNS notification's MessageAttributes (what SNS
	// filter policies match), or the SQS message's own attributes. Every
	// copy of a message the worker makes (its DLQ copy, its re-sends) keeps
	// it right after ddbworker's control attributes, or is not made, and
	// dlq redrive carries it back (docs/producers.md, "The 10-attribute
	// budget").
	TypeAttribute string
	// Match, when set, must hold (be JMESPath-truthy) for the route to take
	// a body: "source == 'billing'". An expression that fails on a body
	// does not hold.
	Match string
	// AggregateType and AggregateID yield the aggregate the work is about.
	// Required; a fixed type is a raw string literal: "'order'".
	AggregateType, AggregateID string
	// AggregateVersion, when set, yields the aggregate's version, an
	// integer ≥ 0 (hashed: a key re-used with another version is
	// IDEMPOTENCY_HASH_MISMATCH).
	AggregateVersion string
	// Payload yields what the handler decodes and the request hash covers.
	// Default: the body itself.
	Payload string
	// MessageID, OccurredAt (an RFC 3339 string) and Producer yield the
	// delivery's metadata, never hashed. Defaults: the SNS notification's
	// MessageId, Timestamp and TopicArn; on SQS or with SNS raw delivery,
	// the SQS MessageId, SentTimestamp, and "sqs" ("sns").
	MessageID, OccurredAt, Producer string
}

func (b JSONBody) adapterSpec() (envelope.AdapterSpec, error) {
	return envelope.AdapterSpec{
		Kind: envelope.KindJSON, Match: b.Match, Type: b.Type, TypeAttribute: b.TypeAttribute,
		Key: b.Key, AggregateType: b.AggregateType, AggregateID: b.AggregateID, AggregateVersion: b.AggregateVersion,
		Payload: b.Payload, MessageID: b.MessageID, OccurredAt: b.OccurredAt, Producer: b.Producer,
	}, nil
}

// EventBridge reads an EventBridge event (version, id, detail-type,
// source, account, time, region, resources, detail), as an EventBridge
// rule with an SQS target delivers it: detail is the payload (the request
// hash covers it, never id or time, which change when an event is put
// again), id the messageId, time the occurredAt, source the producer.
// Each field is a JMESPath expression over the whole event.
type EventBridge struct {
	// DetailType is the detail-type the route takes. Default: the route's
	// message type (a detail-type with spaces, "Order Placed", must be
	// given here: a message type is [A-Za-z0-9._-]).
	DetailType string
	// Source, when set, is the only source the route takes.
	Source string
	// Match, when set, must hold as well.
	Match string
	// Key yields the idempotency key from the event's domain data:
	// "detail.orderId". Required; never the event's id.
	Key string
	// AggregateType and AggregateID yield the aggregate. Required.
	AggregateType, AggregateID string
	// AggregateVersion, when set, yields its version.
	AggregateVersion string
	// Payload yields the payload. Default: detail.
	Payload string
}

func (e EventBridge) adapterSpec() (envelope.AdapterSpec, error) {
	return envelope.AdapterSpec{
		Kind: envelope.KindEventBridge, DetailType: e.DetailType, Source: e.Source, Match: e.Match,
		Key: e.Key, AggregateType: e.AggregateType, AggregateID: e.AggregateID, AggregateVersion: e.AggregateVersion,
		Payload: e.Payload,
	}, nil
}

// SNS reads what an SNS subscription delivers to the queue, with raw
// message delivery on or off: a notification (Type "Notification" with a
// TopicArn) is unwrapped and inner reads its Message — the notification's
// MessageId, Timestamp and TopicArn are the messageId, occurredAt and
// producer unless inner's expressions say otherwise, and its
// MessageAttributes are the attributes TypeAttribute reads; any other body
// is the publisher's message itself, as raw delivery hands it over, and
// inner reads it. inner is a JSONBody or an EventBridge (an EventBridge
// rule with an SNS target). The request hash covers inner's payload, never
// the notification's MessageId or Timestamp, which a re-publish changes.
func SNS(inner BodyAdapter) BodyAdapter { return snsBody{inner: inner} }

type snsBody struct{ inner BodyAdapter }

func (s snsBody) adapterSpec() (envelope.AdapterSpec, error) {
	if s.inner == nil {
		return envelope.AdapterSpec{}, errors.New("ddbworker: SNS needs the adapter of its messages (a JSONBody or an EventBridge)")
	}
	spec, err := s.inner.adapterSpec()
	if err == nil && spec.SNS {
		err = errors.New("ddbworker: SNS(SNS(…)): an SNS message is not an SNS notification")
	}
	spec.SNS = true
	return spec, err
}

// Adapt has the route read bodies that are not ddbworker's envelope with
// a (see BodyAdapter): the worker and ddbworkertest turn each such body
// into the envelope the route's handler sees. An adapter whose
// expressions do not compile fails Register.
func Adapt(a BodyAdapter) RouteOption {
	return func(r *Route) {
		if a == nil {
			r.err = errors.New("ddbworker: Adapt(nil)")
			return
		}
		spec, err := a.adapterSpec()
		if err == nil {
			r.Adapter, err = envelope.NewAdapter(spec)
		}
		if err != nil {
			r.Adapter, r.err = nil, fmt.Errorf("ddbworker: Adapt: %w", err)
		}
	}
}
