package ddbworker_test

import (
	"context"
	"fmt"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/ddbworkertest"
)

// OrderPlaced is the orders service's own event, as it publishes it to
// its SNS topic (and EventBridge carries it as detail).
type OrderPlaced struct {
	OrderID     string `json:"orderId"`
	AmountCents int64  `json:"amountCents"`
	Currency    string `json:"currency"`
}

func placeOrder(_ context.Context, msg *ddbworker.Message, p OrderPlaced) (ddbworker.Result, error) {
	return ddbworker.Apply(ddbworker.Put("app", ddbworker.Key{"PK": "ORDER#" + p.OrderID, "SK": "PLACED"},
		ddbworker.Item{"amountCents": p.AmountCents, "currency": p.Currency}).
		Guard(ddbworker.CreateOnly())), nil
}

// An SNS topic's messages, as the subscribed queue receives them: with
// raw message delivery off (the notification JSON) and on (the message
// itself). The key comes from the domain; the notification's MessageId
// and Timestamp are the delivery's, never hashed.
func ExampleSNS() {
	reg := ddbworker.NewRegistry()
	err := reg.Register("OrderPlaced", ddbworker.JSON(placeOrder), ddbworker.Adapt(ddbworker.SNS(ddbworker.JSONBody{
		Type:          "eventType",
		Key:           "join(':', ['order', orderId, 'placed'])",
		AggregateType: "'order'", AggregateID: "orderId", AggregateVersion: "version",
	})))
	if err != nil {
		panic(err)
	}
	message := `{"eventType":"OrderPlaced","orderId":"o-1042","version":3,"amountCents":1999,"currency":"EUR"}`
	notification := func(messageID, timestamp string) []byte {
		return fmt.Appendf(nil, `{"Type":"Notification","MessageId":%q,"TopicArn":"arn:aws:sns:eu-west-1:123456789012:orders",`+
			`"Message":%q,"Timestamp":%q,"SignatureVersion":"1","Signature":"EXAMPLE","SigningCertURL":"https://example","UnsubscribeURL":"https://example"}`,
			messageID, message, timestamp)
	}
	kit := ddbworkertest.NewRegistry(reg)
	for _, body := range [][]byte{
		notification("63a3f6b6-d533-4a47-aef9-fcf5cf758c76", "2026-03-29T05:12:16.901Z"),
		notification("b8f1c0de-3c4d-5e6f-8a9b-0c1d2e3f4a5b", "2026-03-29T05:14:02.117Z"), // published again
		[]byte(message), // raw message delivery
	} {
		res, err := kit.Work(context.Background(), ddbworkertest.FromBody(body))
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Kind, res.Envelope.IdempotencyKey, res.Envelope.RequestHash[:15], res.Envelope.MessageID)
	}
	res, _ := kit.Work(context.Background(), ddbworkertest.FromBody([]byte(`{"eventType":"OrderPlaced","amountCents":1999}`)))
	fmt.Println(res.Failure)
	// Output:
	// applied order:o-1042:placed v3:1bbc7f72520a 63a3f6b6-d533-4a47-aef9-fcf5cf758c76
	// applied order:o-1042:placed v3:1bbc7f72520a b8f1c0de-3c4d-5e6f-8a9b-0c1d2e3f4a5b
	// applied order:o-1042:placed v3:1bbc7f72520a test-sqs-message
	// terminal MISSING_FIELD: envelope: MISSING_FIELD idempotencyKey (SNS(JSON) expression "join(':', ['order', orderId, 'placed'])"): the expression fails on this body (a member it needs is absent, null or of another type): jmespath: a function's argument is of another type, expected array[string]
}

// An EventBridge rule with an SQS target: detail is the payload, the
// event's id and time are the delivery's.
func ExampleEventBridge() {
	reg := ddbworker.NewRegistry()
	err := reg.Register("OrderPlaced", ddbworker.JSON(placeOrder), ddbworker.Adapt(ddbworker.EventBridge{
		DetailType: "Order Placed", Source: "com.example.orders",
		Key:           "join(':', ['order', detail.orderId, 'placed'])",
		AggregateType: "'order'", AggregateID: "detail.orderId",
	}))
	if err != nil {
		panic(err)
	}
	event := []byte(`{"version":"0","id":"6a7e8feb-b491-4cf7-a9f1-bf3703467718","detail-type":"Order Placed","source":"com.example.orders",` +
		`"account":"111122223333","time":"2026-03-29T05:12:16Z","region":"eu-west-1","resources":[],` +
		`"detail":{"orderId":"o-1042","amountCents":1999,"currency":"EUR"}}`)
	res, err := ddbworkertest.NewRegistry(reg).Work(context.Background(), ddbworkertest.FromBody(event))
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Kind, res.Envelope.MessageType, res.Envelope.IdempotencyKey, res.Envelope.Producer)
	fmt.Println(string(res.Envelope.Payload))
	// Output:
	// applied OrderPlaced order:o-1042:placed com.example.orders
	// {"amountCents":1999,"currency":"EUR","orderId":"o-1042"}
}

// A service's own JSON on SQS: one queue, two types, told apart by a
// member; the payload leaves out what changes per send (sentAt).
func ExampleJSONBody() {
	invoices := ddbworker.JSONBody{
		Type:          "kind",
		Key:           "join(':', [invoice.orderId, kind])",
		AggregateType: "'order'", AggregateID: "invoice.orderId", AggregateVersion: "orderVersion",
		Payload: "invoice", OccurredAt: "sentAt", Producer: "sender",
	}
	reg := ddbworker.NewRegistry()
	for _, kind := range []string{"invoice.requested", "invoice.cancelled"} {
		if err := reg.Register(kind, ddbworker.JSON(placeOrder), ddbworker.Adapt(invoices)); err != nil {
			panic(err)
		}
	}
	kit := ddbworkertest.NewRegistry(reg)
	for _, body := range []string{
		`{"kind":"invoice.requested","invoice":{"orderId":"o-1","amountCents":1200,"currency":"EUR"},"orderVersion":3,"sentAt":"2026-03-29T05:12:16Z","sender":"billing-api"}`,
		`{"kind":"invoice.requested","invoice":{"orderId":"o-1","amountCents":1200,"currency":"EUR"},"orderVersion":3,"sentAt":"2026-03-29T05:13:00Z","sender":"billing-api"}`,
		`{"kind":"invoice.refunded","invoice":{"orderId":"o-1"}}`,
		`{"invoice":{"orderId":"o-1"}}`,
	} {
		res, err := kit.Work(context.Background(), ddbworkertest.FromBody([]byte(body)))
		if err != nil {
			panic(err)
		}
		if res.Failure != nil {
			fmt.Println(res.Failure.Code)
			continue
		}
		fmt.Println(res.Envelope.MessageType, res.Envelope.IdempotencyKey, res.Envelope.RequestHash[:15])
	}
	// Output:
	// invoice.requested o-1:invoice.requested v3:a84a7545c1b0
	// invoice.requested o-1:invoice.requested v3:a84a7545c1b0
	// UNKNOWN_MESSAGE_TYPE
	// MISSING_FIELD
}

// Adapt gives a route a body adapter; a route registered after one that
// would always take its bodies first is refused.
func ExampleAdapt() {
	reg := ddbworker.NewRegistry()
	catchAll := ddbworker.JSONBody{Key: "id", AggregateType: "'thing'", AggregateID: "id"}
	fmt.Println(reg.Register("ThingChanged", ddbworker.JSON(placeOrder), ddbworker.Adapt(catchAll)))
	err := reg.Register("OrderPlaced", ddbworker.JSON(placeOrder), ddbworker.Adapt(ddbworker.JSONBody{
		Type: "eventType", Key: "orderId", AggregateType: "'order'", AggregateID: "orderId"}))
	fmt.Println(err != nil)
	err = reg.Register("Broken", ddbworker.JSON(placeOrder), ddbworker.Adapt(ddbworker.JSONBody{
		Key: "join(':', [orderId", AggregateType: "'order'", AggregateID: "orderId"}))
	fmt.Println(err != nil)
	// Output:
	// <nil>
	// true
	// true
}
