// Command lambda is the invoices service as an AWS Lambda function: the
// Lambda adapter (package lambda) with the invoices handler registered on
// the table its environment names. The Makefile beside it builds the
// bootstrap; example/invoices/template.yaml deploys it.
package main
