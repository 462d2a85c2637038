package envelope_test

import (
	"errors"
	"fmt"

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
	// v2:073e5567aa0f1cc2cd5908c76725e6a25095f86bfc99e711e2e13f3ce5e17047
	// UNKNOWN_SCHEMA_VERSION true
	// envelope: UNKNOWN_SCHEMA_VERSION schemaVersion: schema version 2 is not supported
}
