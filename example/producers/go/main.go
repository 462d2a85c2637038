// Command go is a Go producer of ddbworker envelopes: one
// "invoice.requested" message for an order, through package producer
// (which builds the envelope, validates it with the worker's decoder and
// sends it, FIFO aware).
//
//	QUEUE_URL=https://sqs.eu-west-1.amazonaws.com/123456789012/billing \
//	ORDER_ID=42 ORDER_VERSION=7 AMOUNT_CENTS=1999 go run ./example/producers/go
//
// docs/producers.md explains every field.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbworker/ddbworker/producer"
)

type invoiceRequested struct {
	OrderID     string `json:"orderId"`
	AmountCents int64  `json:"amountCents"`
	Currency    string `json:"currency"`
}

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	queueURL := os.Getenv("QUEUE_URL")
	if queueURL == "" {
		return fmt.Errorf("QUEUE_URL is required")
	}
	orderID := envOr("ORDER_ID", "42")
	version, err := strconv.ParseInt(envOr("ORDER_VERSION", "7"), 10, 64)
	if err != nil {
		return fmt.Errorf("ORDER_VERSION: %w", err)
	}
	amount, err := strconv.ParseInt(envOr("AMOUNT_CENTS", "1999"), 10, 64)
	if err != nil {
		return fmt.Errorf("AMOUNT_CENTS: %w", err)
	}

	// Endpoint (AWS_ENDPOINT_URL_SQS), region and credentials come from the
	// SDK's usual sources.
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	p, err := producer.New(sqs.NewFromConfig(cfg), producer.Config{QueueURL: queueURL, Producer: "billing-api-go"})
	if err != nil {
		return err
	}
	// The idempotency key names the work in the domain's terms: "the invoice
	// of order 42". A re-send of the same work carries the same key. The
	// producer adds a new messageId on every Send, occurredAt with its
	// offset, and on a FIFO queue MessageGroupId = aggregateId.
	results, err := p.Send(ctx, producer.Message{
		MessageType:      "invoice.requested",
		IdempotencyKey:   "order-" + orderID + ":invoice",
		AggregateType:    "order",
		AggregateID:      orderID,
		AggregateVersion: &version,
		CorrelationID:    os.Getenv("CORRELATION_ID"),
		Payload:          invoiceRequested{OrderID: orderID, AmountCents: amount, Currency: "EUR"},
	})
	if err != nil {
		// A *producer.EntryError says why (errors.Is ErrInvalid, ErrSend…).
		// Sending the same Message again is safe: the worker applies it once.
		return err
	}
	out, err := json.Marshal(map[string]string{"sent": results[0].Envelope.IdempotencyKey,
		"sqsMessageId": results[0].SQSMessageID, "requestHash": results[0].Envelope.RequestHash})
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
