package producer_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/producer"
)

// Build and check an envelope without sending it: what the worker will
// decode, and the request hash it will compute.
func ExampleProducer_Envelope() {
	p, err := producer.New(&sqs.Client{}, producer.Config{
		QueueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/billing.fifo",
		Producer: "billing-api",
		Now:      func() time.Time { return time.Date(2026, 3, 1, 13, 0, 0, 0, time.FixedZone("CET", 3600)) },
	})
	if err != nil {
		panic(err)
	}
	version := int64(7)
	e, err := p.Envelope(producer.Message{
		MessageType: "invoice.requested", IdempotencyKey: "order-42:invoice",
		AggregateType: "order", AggregateID: "42", AggregateVersion: &version,
		Payload: map[string]any{"orderId": "42", "amountCents": 1999, "currency": "EUR"},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(e.OccurredAt.Format(time.RFC3339), e.RequestHash)

	// A message the worker would reject is refused before it is sent.
	_, err = p.Envelope(producer.Message{MessageType: "invoice requested", IdempotencyKey: "k",
		AggregateType: "order", AggregateID: "42", Payload: map[string]any{}})
	var ee *envelope.Error
	if errors.As(err, &ee) {
		fmt.Println(ee.Code, ee.Field)
	}
	// Output:
	// 2026-03-01T13:00:00+01:00 v3:d2a4dfbd870c0988e23fc4c012c3b89e2d192f9cbe92a271fe610f0c99eb3400
	// INVALID_FIELD messageType
}

// Send never stops at one bad message: each Result says what became of its
// message, and the error joins the failures.
func ExampleProducer_Send() {
	var p *producer.Producer // producer.New(sqs.NewFromConfig(cfg), producer.Config{...})
	if p == nil {
		return
	}
	results, err := p.Send(context.Background(), producer.Message{ /* ... */ })
	for _, r := range results {
		var ee *producer.EntryError
		switch {
		case r.Err == nil:
			fmt.Println("sent", r.SQSMessageID, r.Envelope.RequestHash)
		case errors.Is(r.Err, producer.ErrInvalid):
			fmt.Println("fix the message:", r.Err)
		case errors.As(r.Err, &ee) && errors.Is(ee, producer.ErrSend):
			fmt.Println("send it again (same key, new messageId):", ee.Code)
		}
	}
	_ = err
}

// Tenants on a standard queue: each message's MessageGroupId is its
// tenant, which makes the queue an SQS fair queue. Config.Tenant names
// every message's tenant; Message.Tenant one message's own. A tenant SQS
// would refuse fails its message (ErrInvalidTenant), which is not sent.
func ExampleConfig_tenant() {
	p, err := producer.New(&sqs.Client{}, producer.Config{
		QueueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/billing",
		Producer: "billing-api",
		Tenant: func(e *envelope.Envelope) string {
			return "acct-" + e.AggregateID // the account the order belongs to
		},
	})
	if err != nil {
		panic(err)
	}
	results, _ := p.Send(context.Background(), producer.Message{MessageType: "invoice.requested", IdempotencyKey: "order-42:invoice",
		AggregateType: "order", AggregateID: "42", Payload: map[string]any{}, Tenant: "ACME Corp"})
	var te *producer.TenantError
	if errors.As(results[0].Err, &te) {
		fmt.Println(errors.Is(results[0].Err, producer.ErrInvalidTenant), te.Reason)
	}
	// Output:
	// true U+0020 at byte 4: SQS takes ASCII letters, digits and punctuation only
}
