// Package groupid checks a MessageGroupId — on a FIFO queue the order
// group, on a standard queue the tenant of SQS fair queues — as SQS (and an
// SNS topic) accepts it: 1..128 characters, each an ASCII letter, digit or
// punctuation mark (!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~), which is exactly
// '!' through '~'.
package groupid
