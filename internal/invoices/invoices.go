package invoices

import (
	"context"
	"errors"
	"fmt"

	"github.com/ddbworker/ddbworker"
)

// TypeInvoiceRequested is the message type this service handles.
const TypeInvoiceRequested = "OrderInvoiceRequested"

// Codes and outcomes of the domain.
const (
	CodeOrderNotFound      = "ORDER_NOT_FOUND"
	OutcomeAlreadyInvoiced = "ALREADY_INVOICED"
	AttrPK, AttrSK         = "PK", "SK"
	AttrInvoiceNumber      = "invoiceNumber"
	AttrAmountCents        = "amountCents"
	AttrCurrency           = "currency"
	AttrStatus             = "orderStatus"
	StatusInvoiced         = "INVOICED"
)

// InvoiceRequested is the payload of OrderInvoiceRequested.
type InvoiceRequested struct {
	OrderID     string `json:"orderId"`
	AmountCents int64  `json:"amountCents"`
	Currency    string `json:"currency"`
}

// Validate is called after decoding; an error ends the message terminal
// INVALID_PAYLOAD.
func (p InvoiceRequested) Validate() error {
	switch {
	case p.OrderID == "":
		return errors.New("orderId is required")
	case p.AmountCents <= 0:
		return errors.New("amountCents must be positive")
	case len(p.Currency) != 3:
		return errors.New("currency must be an ISO 4217 code")
	}
	return nil
}

// OrderKey and InvoiceKey are the items' keys.
func OrderKey(orderID string) ddbworker.Key {
	return ddbworker.Key{AttrPK: "ORDER#" + orderID, AttrSK: "ORDER"}
}
func InvoiceKey(orderID string) ddbworker.Key {
	return ddbworker.Key{AttrPK: "ORDER#" + orderID, AttrSK: "INVOICE"}
}

// Handler invoices orders.
type Handler struct {
	// Table holds the orders and invoices. Required.
	Table string
}

// Register routes OrderInvoiceRequested to h.
func (h *Handler) Register(reg *ddbworker.Registry) error {
	if h.Table == "" {
		return errors.New("invoices: Handler.Table is required")
	}
	return reg.Register(TypeInvoiceRequested, ddbworker.JSON(h.Invoice))
}

// Invoice handles OrderInvoiceRequested: the invoice is created once (a
// second one means the work was done: superseded), the order must exist.
func (h *Handler) Invoice(_ context.Context, msg *ddbworker.Message, p InvoiceRequested) (ddbworker.Result, error) {
	number := fmt.Sprintf("INV-%s", msg.Key())
	invoice := ddbworker.Put(h.Table, InvoiceKey(p.OrderID), ddbworker.Item{
		AttrInvoiceNumber: number, AttrAmountCents: p.AmountCents, AttrCurrency: p.Currency,
	}).Guard(ddbworker.CreateOnly().Else(ddbworker.Supersede(OutcomeAlreadyInvoiced)))
	order := ddbworker.Update(h.Table, OrderKey(p.OrderID)).Set(AttrStatus, StatusInvoiced).Set(AttrInvoiceNumber, number).
		Guard(ddbworker.MustExist().Else(ddbworker.Fail(CodeOrderNotFound, "no order "+p.OrderID)))
	return ddbworker.Result{Writes: []ddbworker.Write{invoice, order}, ResultRef: number}, nil
}
