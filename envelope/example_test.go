package envelope_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/ddbworker/ddbworker/envelope"
)

func ExampleDecoder_Decode() {
	d, err := envelope.NewDecoder(envelope.Config{}) // defaults
	if err != nil {
		panic(err)
	}
	body := []byte(`{
		"messageId": "msg-1",
		"schemaVersion": 1,
		"messageType": "order.created",
		"producer": "orders-service",
		"occurredAt": "2024-05-01T12:00:00Z",
		"idempotencyKey": "order-42:create",
		"aggregateType": "order",
		"aggregateId": "42",
		"payload": {"qty": 2, "sku": "A-1"}
	}`)
	e, err := d.Decode(body)
	if err != nil {
		panic(err)
	}
	fmt.Println(e.MessageType, e.IdempotencyKey)
	fmt.Println(e.RequestHash)

	_, err = d.Decode([]byte(`{"schemaVersion": 2, "whatever": true}`))
	var ee *envelope.Error
	if errors.As(err, &ee) {
		fmt.Println(ee.Code, errors.Is(err, envelope.ErrInvalid))
	}
	fmt.Println(err)
	// Output:
	// order.created order-42:create
	// v3:073e5567aa0f1cc2cd5908c76725e6a25095f86bfc99e711e2e13f3ce5e17047
	// UNKNOWN_SCHEMA_VERSION true
	// envelope: UNKNOWN_SCHEMA_VERSION schemaVersion: schema version 2 is not supported
}

// Read takes ddbworker's envelope as Decode does, and a body an adapter
// of the list takes — here an SNS notification whose Message is the
// orders service's own JSON — into the envelope it yields.
func ExampleDecoder_Read() {
	a, err := envelope.NewAdapter(envelope.AdapterSpec{
		Kind: envelope.KindJSON, SNS: true, Type: "eventType",
		Key: "join(':', ['order', orderId, 'placed'])", AggregateType: "'order'", AggregateID: "orderId",
	})
	if err != nil {
		panic(err)
	}
	as, err := (*envelope.Adapters)(nil).With("OrderPlaced", a)
	if err != nil {
		panic(err)
	}
	body := []byte(`{"Type":"Notification","MessageId":"63a3f6b6-d533-4a47-aef9-fcf5cf758c76",` +
		`"TopicArn":"arn:aws:sns:eu-west-1:123456789012:orders","Timestamp":"2026-03-29T05:12:16.901Z",` +
		`"Message":"{\"eventType\":\"OrderPlaced\",\"orderId\":\"o-1042\",\"amountCents\":1999}"}`)
	e, err := (*envelope.Decoder)(nil).Read(envelope.Input{Body: body}, as)
	if err != nil {
		panic(err)
	}
	fmt.Println(e.MessageType, e.IdempotencyKey, e.MessageID, e.Producer)
	fmt.Println(string(e.Payload))

	// Delivered raw, without an orderId: the transport's message id and
	// send time stand in for the notification's, never for the key.
	_, err = (*envelope.Decoder)(nil).Read(envelope.Input{Body: []byte(`{"eventType":"OrderPlaced","amountCents":1999}`),
		MessageID: "5fea7756-0ea4-451a-a703-a558b933e274", SentAt: time.Date(2026, 3, 29, 5, 12, 17, 0, time.UTC)}, as)
	fmt.Println(err)
	// Output:
	// OrderPlaced order:o-1042:placed 63a3f6b6-d533-4a47-aef9-fcf5cf758c76 arn:aws:sns:eu-west-1:123456789012:orders
	// {"amountCents":1999,"eventType":"OrderPlaced","orderId":"o-1042"}
	// envelope: MISSING_FIELD idempotencyKey (SNS(JSON) expression "join(':', ['order', orderId, 'placed'])"): the expression fails on this body (a member it needs is absent, null or of another type): jmespath: a function's argument is of another type, expected array[string]
}
