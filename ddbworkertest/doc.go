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
// It owns the unit-test kit for handler authors, and no decision of its
// own — each is the worker's:
//
//   - building a delivery: a valid envelope for a message type and payload
//     with defaults and options (NewMessage), or an envelope or a raw body
//     of the test's own (FromEnvelope, FromBody), each decoded by the
//     worker's real envelope decoder, so a rejected envelope ends terminal
//     with the code the worker records (and UNKNOWN_MESSAGE_TYPE for a type
//     the Registry does not know);
//   - running the handler with the Message the worker would give it, a
//     panic recovered as retryable HANDLER_PANIC — through the Registry's
//     middleware and the route's (ddbworker.Middleware), as the worker
//     runs it, because NewRegistry looks the route up in the Registry
//     (New(handler) runs that handler alone);
//   - rendering the writes (Write) through ddbworker.Write.Mutation, as the
//     worker does: table, kind, key and item as plain Go values, the update
//     and the condition with names and values resolved; a write that does
//     not render, or that the commit's own check refuses
//     (mutation.CheckWrites), is the terminal INVALID_HANDLER_RESULT the
//     worker records, and two writes to one item DynamoDB's
//     INVALID_TRANSACTION;
//   - judging the commit against the items the test says are there before
//     it (Existing; none by default): each write's judge (mutation.Judge)
//     is asked about the item at its table and key, in write order, and
//     the first write one of whose guards fails stands for the cancelled
//     transaction (a *mutation.GuardError with its verdict), exactly as the
//     commit's cancellation names it. Every guard the builders make
//     (MustExist, CreateOnly, NewerVersion, ExpectVersion, Equal, on
//     top-level or nested attributes) is judged exactly as DynamoDB
//     evaluates its condition; only a ddbworker.Raw write is judged by its
//     policy alone: by its own judge, or — with none — taken to hold
//     (Write.Eval is PolicyOnly);
//   - settling the run as the worker's run and record stages do, with the
//     same package (internal/judge): judge.Of turns the handler's error or
//     the cancelled commit into Applied, Superseded (with an outcome),
//     Rerun or a failure, and judge.Attempt puts a business failure through
//     the attempts policy (the envelope's attemptPolicy, or
//     DefaultMaxAttempts), which may make it Terminal; infrastructure
//     trouble stays Retryable and counts no attempt;
//   - assertions in require style (RequireApplied, RequireSuperseded,
//     RequireRerun, RequireTerminal, RequireRetryable, RequireWrite).
//
// It is not DynamoDB. It runs no transaction, keeps no inbox, has no gate
// and no lease: nothing is written anywhere, a Rerun is reported and not
// run, duplicates and takeovers are not simulated, attemptPolicy.notBefore
// does not defer, a payload by reference is not fetched, and the handler's
// own reads (if it reads) go wherever the handler sends them. The protocol
// itself — the gate, the fenced commit, the inbox, the DLQ — is tested
// against the real emulators in this repository's `make test`.
package ddbworkertest
