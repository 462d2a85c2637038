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
//     of the test's own (FromEnvelope, FromBody, with the delivery's
//     message attributes: Attribute), each decoded by the worker's real
//     envelope decoder — a raw body read, as the worker reads it, by the
//     registry's body adapters (an SNS notification, an EventBridge event,
//     a service's own JSON: ddbworker.Adapt) — so a rejected body shows the
//     code the worker records;
//   - running it as the worker does (Worker.Work): the type looked up in a
//     Registry (UNKNOWN_MESSAGE_TYPE when missing), the handler called with
//     the Message it would see — through the Registry's middleware and the
//     route's (ddbworker.Middleware), as the worker runs it — a panic recovered as retryable
//     HANDLER_PANIC, an error classified as the worker classifies it
//     (HANDLER_ERROR, infrastructure trouble, the attempts policy that
//     makes a failure of the last attempt terminal);
//   - rendering the writes (Write): table, kind, key and item as plain Go
//     values, the update and the condition with names and values resolved,
//     and an invalid write as the terminal INVALID_HANDLER_RESULT the
//     commit raises (two writes to one item as DynamoDB's
//     INVALID_TRANSACTION);
//   - judging the commit against the items the test says are there before
//     it (Existing; none by default): each write's judge (mutation.Judge)
//     is asked about the item at its table and key, in write order, and
//     the first write one of whose guards fails stands for the cancelled
//     transaction (a *mutation.GuardError with its verdict), exactly as the
//     commit's cancellation names it. Every guard the builders make
//     (MustExist, CreateOnly, NewerVersion, NewerThan, ExpectVersion, Equal, on
//     top-level or nested attributes) is judged exactly as DynamoDB
//     evaluates its condition; only a hand-built write of the engine's (an
//     effect's Write) is judged by its policy alone: by its own judge, or — with none — taken to hold
//     (Write.Eval is PolicyOnly);
//   - settling the run as the worker's run and record stages do, with the
//     same package (internal/judge): judge.Of turns the handler's error or
//     the cancelled commit into Applied, Superseded (with an outcome),
//     Rerun or a failure, and judge.Attempt puts a business failure through
//     the attempts policy (the envelope's attemptPolicy, or
//     DefaultMaxAttempts), which may make it Terminal; infrastructure
//     trouble stays Retryable and counts no attempt;
//   - serving the handler's own reads from the same items (Reader: GetItem
//     and BatchGetItem with *dynamodb.Client's signatures, reading the
//     Existing items of the Work that runs the handler), so the test states
//     the tables once and the handler decides on what its commit meets;
//   - assertions in require style (RequireApplied, RequireSuperseded,
//     RequireRerun, RequireTerminal, RequireRetryable, RequireWrite).
//
// It is not DynamoDB. It runs no transaction, keeps no inbox, has no gate
// and no lease: nothing is written anywhere, a Rerun is reported and not
// run, duplicates and takeovers are not simulated, attemptPolicy.notBefore
// does not defer, a payload by reference is not fetched, and the handler's
// own reads see the Existing items only through a Reader (a Query or a
// Scan is not served; reads through another client go wherever it sends
// them). The protocol
// itself — the gate, the fenced commit, the inbox, the DLQ — is tested
// against the real emulators in this repository's `make test`.
package ddbworkertest
