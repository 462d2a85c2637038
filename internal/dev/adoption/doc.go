// Package adoption proves that a team can use ddbworker from a module of
// its own, as issue 15 asks: its test writes a new module outside the
// repository (example.com/shop, in a temporary directory, with a replace
// of github.com/ddbworker/ddbworker to this checkout and its go.sum filled
// from the local module cache alone) and runs that module's own `go test`.
// The module is testdata/shop: a service in a few lines of main
// (daemon.Main) whose handlers import only the root package, reading the
// messages its producers already send — an SNS notification, an
// EventBridge event, JSON of its own — and an integration test that
// imports only public packages (ddbworkertest/emulators and the AWS SDK):
// it adopts a table that predates ddbworker with `shop-worker tables
// adopt`, runs `shop-worker run` against the emulators, and checks the
// effects were applied once, the bad messages dead-lettered with their
// codes, and what `shop-worker inbox` shows.
//
// It owns nothing that ships, and nothing else imports it. testdata/shop
// is also the example to copy: the go command ignores testdata, gofmt
// (make lint) does not.
package adoption
