//go:build race

package lambda_test

func init() { raceEnabled = true }
