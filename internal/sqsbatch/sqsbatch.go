package sqsbatch

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQS's limits.
const (
	// MaxEntries is the most entries of one batch call.
	MaxEntries = 10
	// MaxMessageBytes is the largest message SQS accepts (body and
	// attributes, MessageSize), when the queue's MaximumMessageSize allows
	// it: 1 MiB.
	MaxMessageBytes = 1 << 20
	// MaxBatchBytes is the largest payload of one batch call (the sum of
	// its messages' MessageSize): 1 MiB since August 2025.
	MaxBatchBytes = 1 << 20
	// PortableBatchBytes is the payload limit of a batch call before
	// August 2025 (256 KiB), which some endpoints still enforce: a caller
	// that cannot know its endpoint's limit stays within it, and a message
	// larger than it goes alone.
	PortableBatchBytes = 256 << 10
	// MaxAttributes is the most message attributes of one message.
	MaxAttributes = 10
)

// AttributeSize is what one message attribute adds to a message's size, as
// SQS counts it: its name, its data type and its value (string or binary),
// in bytes.
func AttributeSize(name string, v types.MessageAttributeValue) int {
	return len(name) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
}

// MessageSize is a message's size as SQS counts it against
// MaxMessageBytes, a queue's MaximumMessageSize and a batch's payload: the
// body's bytes plus every attribute's AttributeSize.
func MessageSize(body string, attrs map[string]types.MessageAttributeValue) int {
	n := len(body)
	for k, v := range attrs {
		n += AttributeSize(k, v)
	}
	return n
}

// Limits bound one batch call.
type Limits struct {
	// Entries is the most entries per call; 0 (or more than MaxEntries):
	// MaxEntries.
	Entries int
	// Bytes is the most payload per call (the sum of the entries'
	// MessageSize); 0: MaxBatchBytes.
	Bytes int
}

func (l Limits) entries() int {
	if l.Entries <= 0 || l.Entries > MaxEntries {
		return MaxEntries
	}
	return l.Entries
}

func (l Limits) bytes() int {
	if l.Bytes <= 0 {
		return MaxBatchBytes
	}
	return l.Bytes
}

// Fits reports whether an entry of size bytes may join a batch that holds
// n entries of total bytes: always when the batch is empty (an entry
// larger than the limit goes alone), else when the batch stays within
// both limits.
func (l Limits) Fits(n, total, size int) bool {
	return n == 0 || n < l.entries() && total+size <= l.bytes()
}

// Split cuts entries into consecutive batches within l, in order: every
// entry is in exactly one batch, and a batch over l.Bytes is a single
// entry larger than it. The batches are subslices of entries. size gives
// an entry's MessageSize; it is called once per entry.
func Split[E any](entries []E, size func(E) int, l Limits) [][]E {
	var batches [][]E
	start, total := 0, 0
	for i, e := range entries {
		sz := size(e)
		if !l.Fits(i-start, total, sz) {
			batches = append(batches, entries[start:i:i])
			start, total = i, 0
		}
		total += sz
	}
	if start < len(entries) {
		batches = append(batches, entries[start:len(entries):len(entries)])
	}
	return batches
}
