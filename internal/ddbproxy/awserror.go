package ddbproxy

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"hash/crc32"
	"net/http"
	"strconv"
)

// awsError is one error answer of DynamoDB's awsJson1_0 protocol.
type awsError struct {
	status  int
	typ     string // the body's __type; the SDK keeps the part after '#'
	message string
}

// The answers AWS DynamoDB gives when it throttles or fails, as it words them.
var (
	errThroughputExceeded = awsError{
		status:  http.StatusBadRequest,
		typ:     "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
		message: "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.",
	}
	errThrottling = awsError{
		status:  http.StatusBadRequest,
		typ:     "com.amazonaws.dynamodb.v20120810#ThrottlingException",
		message: "Rate of requests exceeds the allowed throughput.",
	}
	errInternalServer = awsError{
		status:  http.StatusInternalServerError,
		typ:     "com.amazon.coral.service#InternalServerError",
		message: "Internal server error",
	}
	errServiceUnavailable = awsError{
		status:  http.StatusServiceUnavailable,
		typ:     "com.amazon.coral.availability#ServiceUnavailableException",
		message: "Service unavailable",
	}
)

// serverErrors are ServerError's answers, in turn: the i-th request in that
// mode (from 0, since Start or Reset) gets serverErrors[i%2].
var serverErrors = [...]awsError{errInternalServer, errServiceUnavailable}

// throughputOperations are the operations whose throttles DynamoDB reports
// as ProvisionedThroughputExceededException: the ones that consume a table's
// read or write capacity. Every other operation — the control plane
// (CreateTable, DescribeTable, ListTables, UpdateTimeToLive, …) and
// BatchExecuteStatement, which reports per-statement errors — is throttled
// with ThrottlingException.
var throughputOperations = map[string]bool{
	"GetItem":            true,
	"PutItem":            true,
	"UpdateItem":         true,
	"DeleteItem":         true,
	"Query":              true,
	"Scan":               true,
	"BatchGetItem":       true,
	"BatchWriteItem":     true,
	"TransactGetItems":   true,
	"TransactWriteItems": true,
	"ExecuteStatement":   true,
	"ExecuteTransaction": true,
}

// throttleError is Throttle's answer to op.
func throttleError(op string) awsError {
	if throughputOperations[op] {
		return errThroughputExceeded
	}
	return errThrottling
}

// write sends e with the headers DynamoDB sends: the awsJson1_0 content
// type, a request id and the body's CRC32 (which the SDK checks).
func (e awsError) write(w http.ResponseWriter) {
	body, err := json.Marshal(struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}{e.typ, e.message})
	if err != nil {
		panic(err) // two strings always marshal
	}
	h := w.Header()
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	// Spelled as DynamoDB spells them; header names are case-insensitive.
	h["x-amzn-RequestId"] = []string{requestID()}
	h["x-amz-crc32"] = []string{strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10)}
	w.WriteHeader(e.status)
	_, _ = w.Write(body)
}

var requestIDEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// requestID returns a random id shaped like DynamoDB's: 52 characters of
// A–Z and 2–7.
func requestID() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return requestIDEncoding.EncodeToString(b[:])
}
