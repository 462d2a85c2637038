// Package ddbworkertest runs a handler on a message in an ordinary unit
// test — no DynamoDB, no SQS, no emulators — and shows what the worker
// would make of it: the writes, the outcome, the failure.
//
//	kit := ddbworkertest.NewRegistry(reg).Before(ddbworkertest.Existing{
//		Table: "app", Key: invoices.OrderKey("o-1"), Item: ddbworker.Item{"orderStatus": "OPEN"},
//	})
//	res := kit.RequireWork(t, ddbworkertest.NewMessage(invoices.TypeInvoiceRequested,
//		invoices.InvoiceRequested{OrderID: "o-1", AmountCents: 1200, Currency: "EUR"}))
//	res.RequireApplied(t)
//	inv := res.RequireWrite(t, "app", invoices.InvoiceKey("o-1"))
//
// It owns the unit-test kit for handler authors:
//
//   - building a delivery: a valid envelope for a message type and payload
//     with defaults and options (NewMessage), or an envelope or a raw body
//     of the test's own (FromEnvelope, FromBody, with the delivery's
//     message attributes: Attribute), each decoded by the worker's real
//     envelope decoder — a raw body read, as the worker reads it, by the
//     registry's body adapters (an SNS notification, an EventBridge event,
//     a service's own JSON: ddbworker.Adapt) — so a rejected body shows the
//     code the worker records;
//   - running it as the worker does (Worker.Work): the type looked up in a
//     Registry (UNKNOWN_MESSAGE_TYPE when missing), the handler called with
//     the Message it would see, a panic recovered as retryable
//     HANDLER_PANIC, an error classified as the worker classifies it
//     (HANDLER_ERROR, infrastructure trouble, the attempts policy that
//     makes a failure of the last attempt terminal);
//   - rendering the writes (Write): table, kind, key and item as plain Go
//     values, the update and the condition with names and values resolved,
//     and an invalid write as the terminal INVALID_HANDLER_RESULT the
//     commit raises (two writes to one item as DynamoDB's
//     INVALID_TRANSACTION);
//   - judging the commit against the items the test says are there before
//     it (Existing; none by default): each write's condition is evaluated
//     against its item, the first one that fails names the verdict through
//     its guard's own judge (mutation.Write.Guard, called with the item or
//     nil), and the Result says what the worker does — Applied, Superseded
//     with an outcome, Terminal with a code, Rerun, or Retryable;
//   - assertions in require style (RequireApplied, RequireSuperseded,
//     RequireRerun, RequireTerminal, RequireRetryable, RequireWrite).
//
// It is not DynamoDB. It runs no transaction, keeps no inbox, has no gate
// and no lease: nothing is written anywhere, a Rerun is reported and not
// run, duplicates and takeovers are not simulated, attemptPolicy.notBefore
// does not defer, and the handler's own reads (if it reads) go wherever the
// handler sends them. The condition evaluator decides the forms the front
// door builds and a little more — attribute_exists, attribute_not_exists,
// the comparisons = <> < <= > >= (orderings on numbers, strings and
// binaries; equality on every type), AND, OR, NOT and parentheses, on
// top-level and nested paths — with DynamoDB's rules for a missing
// attribute (= and the orderings are false, <> is true) and for values of
// different types. Any other form (begins_with, contains, size,
// attribute_type, BETWEEN, IN, or an expression DynamoDB would refuse) is
// judged by the guard's policy only, not by DynamoDB: the guard's judge is
// asked about the item, and an answer other than Rerun counts as the
// condition failing (Write.Eval is PolicyOnly). The protocol itself — the
// gate, the fenced commit, the inbox, the DLQ — is tested against the real
// emulators in this repository's `make test`.
package ddbworkertest
