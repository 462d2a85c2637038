// Package invoices is the example a team copies: one message type of its
// own (OrderInvoiceRequested), its typed handler on ddbworker's front door,
// and — beside it — the service's container main (cmd/invoice-worker), its
// Lambda main (lambda), a Dockerfile and a SAM template.
//
// The handler writes two items of the application's own table in one
// transaction with the inbox flip: the invoice (created once) and the
// order (which must exist), so an order is invoiced exactly once however
// often the message arrives.
package invoices
