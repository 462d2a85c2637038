// Package emftest checks documents against the CloudWatch Embedded Metric
// Format specification ("Specification: Embedded metric format", Amazon
// CloudWatch User Guide, and its JSON schema), for the tests of the code
// that writes them. It owns the rules as the specification states them,
// written out here independently of the writer (package emf), so that a
// mistake in one is not repeated in the other.
package emftest
