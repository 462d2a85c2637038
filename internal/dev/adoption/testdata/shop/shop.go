package main

import (
	"context"
	"errors"

	"github.com/ddbworker/ddbworker"
)

// The shop's table predates the worker: its key is (pk, sk).
const (
	AttrPK = "pk"
	AttrSK = "sk"
)

// The message types the worker routes.
const (
	TypeOrderPlaced        = "OrderPlaced"
	TypePaymentCaptured    = "PaymentCaptured"
	TypeShipmentDispatched = "ShipmentDispatched"
)

// OrderKey is an order's item; CustomerKey a customer's profile.
func OrderKey(orderID string) ddbworker.Key {
	return ddbworker.Key{AttrPK: "ORDER#" + orderID, AttrSK: "DETAILS"}
}

func CustomerKey(customerID string) ddbworker.Key {
	return ddbworker.Key{AttrPK: "CUSTOMER#" + customerID, AttrSK: "PROFILE"}
}

// PaymentKey is a payment, under its order's partition.
func PaymentKey(orderID, paymentID string) ddbworker.Key {
	return ddbworker.Key{AttrPK: "ORDER#" + orderID, AttrSK: "PAYMENT#" + paymentID}
}

// OrderPlaced is what the checkout publishes to its SNS topic.
type OrderPlaced struct {
	OrderID    string `json:"orderId"`
	CustomerID string `json:"customerId"`
	TotalCents int64  `json:"totalCents"`
	Currency   string `json:"currency"`
	PlacedAt   string `json:"placedAt"`
}

func (p OrderPlaced) Validate() error {
	if p.OrderID == "" || p.CustomerID == "" || p.TotalCents <= 0 || p.PlacedAt == "" {
		return errors.New("orderId, customerId, placedAt and a positive totalCents are required")
	}
	return nil
}

// PaymentCaptured is the detail of the payment service's EventBridge event
// "Payment Captured".
type PaymentCaptured struct {
	PaymentID   string `json:"paymentId"`
	OrderID     string `json:"orderId"`
	AmountCents int64  `json:"amountCents"`
	Currency    string `json:"currency"`
}

func (p PaymentCaptured) Validate() error {
	if p.PaymentID == "" || p.OrderID == "" || p.AmountCents <= 0 {
		return errors.New("paymentId, orderId and a positive amountCents are required")
	}
	return nil
}

// ShipmentDispatched is the warehouse's own JSON, without its sentAt.
type ShipmentDispatched struct {
	ShipmentID     string `json:"shipmentId"`
	OrderID        string `json:"orderId"`
	Carrier        string `json:"carrier"`
	TrackingNumber string `json:"trackingNumber"`
}

// Shop holds the handlers.
type Shop struct{ Table string }

// Register routes the three kinds of message, each read from the body its
// producer already sends, with the idempotency key taken from the domain.
func (s *Shop) Register(reg *ddbworker.Registry) error {
	if err := reg.Register(TypeOrderPlaced, ddbworker.JSON(s.OrderPlaced), ddbworker.Adapt(ddbworker.SNS(ddbworker.JSONBody{
		Type: "eventType", Key: "join(':', ['order', orderId, 'placed'])",
		AggregateType: "'order'", AggregateID: "orderId",
	}))); err != nil {
		return err
	}
	if err := reg.Register(TypePaymentCaptured, ddbworker.JSON(s.PaymentCaptured), ddbworker.Adapt(ddbworker.EventBridge{
		DetailType: "Payment Captured", Source: "com.example.payments",
		Key:           "join(':', ['payment', detail.paymentId])",
		AggregateType: "'order'", AggregateID: "detail.orderId",
	})); err != nil {
		return err
	}
	// The warehouse stamps each send with sentAt: the payload leaves it
	// out, so a re-send is the same work.
	return reg.Register(TypeShipmentDispatched, ddbworker.JSON(s.ShipmentDispatched), ddbworker.Adapt(ddbworker.JSONBody{
		Match: "type == 'shipment.dispatched'", Key: "join(':', ['shipment', shipmentId])",
		AggregateType: "'order'", AggregateID: "orderId", OccurredAt: "dispatchedAt",
		Payload: "{shipmentId: shipmentId, orderId: orderId, carrier: carrier, trackingNumber: trackingNumber}",
	}))
}

// OrderPlaced creates the order and counts it on the customer's profile.
func (s *Shop) OrderPlaced(_ context.Context, _ *ddbworker.Message, p OrderPlaced) (ddbworker.Result, error) {
	order := ddbworker.Put(s.Table, OrderKey(p.OrderID), ddbworker.Item{
		"customerId": p.CustomerID, "placedAt": p.PlacedAt, "orderStatus": "PLACED",
		"totalCents": p.TotalCents, "currency": p.Currency,
	}).Guard(ddbworker.CreateOnly().Else(ddbworker.Supersede("ALREADY_PLACED")))
	customer := ddbworker.Update(s.Table, CustomerKey(p.CustomerID)).Add("ordersPlaced", 1).
		Guard(ddbworker.MustExist().Else(ddbworker.Fail("UNKNOWN_CUSTOMER", "no customer "+p.CustomerID)))
	return ddbworker.Apply(order, customer), nil
}

// PaymentCaptured records the payment and adds it to its order.
func (s *Shop) PaymentCaptured(_ context.Context, msg *ddbworker.Message, p PaymentCaptured) (ddbworker.Result, error) {
	payment := ddbworker.Put(s.Table, PaymentKey(p.OrderID, p.PaymentID), ddbworker.Item{
		"amountCents": p.AmountCents, "currency": p.Currency, "capturedAt": msg.OccurredAt(),
	}).Guard(ddbworker.CreateOnly())
	order := ddbworker.Update(s.Table, OrderKey(p.OrderID)).
		Set("paymentStatus", "CAPTURED").Add("capturedCents", p.AmountCents).Add("payments", 1).
		Guard(ddbworker.MustExist().Else(ddbworker.Fail("ORDER_NOT_FOUND", "no order "+p.OrderID)))
	return ddbworker.Apply(payment, order), nil
}

// ShipmentDispatched marks the order dispatched.
func (s *Shop) ShipmentDispatched(_ context.Context, _ *ddbworker.Message, p ShipmentDispatched) (ddbworker.Result, error) {
	return ddbworker.Apply(ddbworker.Update(s.Table, OrderKey(p.OrderID)).
		Set("fulfilment", "DISPATCHED").Set("carrier", p.Carrier).Set("trackingNumber", p.TrackingNumber).Add("shipments", 1).
		Guard(ddbworker.MustExist().Else(ddbworker.Fail("ORDER_NOT_FOUND", "no order "+p.OrderID)))), nil
}
