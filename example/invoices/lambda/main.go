package main

import "github.com/ddbworker/ddbworker/internal/invoices"
import "github.com/ddbworker/ddbworker/lambda"

func main() {
	lambda.Main(func(reg *lambda.Registry, env lambda.Env) error {
		return (&invoices.Handler{Table: env.Store.Table}).Register(reg)
	})
}
