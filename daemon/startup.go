package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

// startupError is a problem at start that waiting will not fix: the
// daemon exits at once with what to change.
type startupError struct{ msg string }

func (e *startupError) Error() string { return e.msg }

// permanentCode reports AWS error codes that no retry heals: the resource
// does not exist, or the credentials may not use it.
func permanentCode(code string) bool {
	switch code {
	case "ResourceNotFoundException", "QueueDoesNotExist", "NonExistentQueue", "InvalidAddress",
		"AccessDenied", "AccessDeniedException", "UnrecognizedClientException", "InvalidClientTokenId",
		"InvalidSignatureException", "SignatureDoesNotMatch", "MissingAuthenticationToken", "InvalidSecurity",
		"KmsAccessDenied", "KmsDisabled", "KmsNotFound":
		return true
	}
	return false
}

// startupAPI is what the startup checks need.
type startupAPI interface {
	tables.API
}

type queueAPI interface {
	GetQueueAttributes(ctx context.Context, params *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// storeResolver reads the store the workers must share: the flags with
// the settings and layout the table records (globals.mergeStore).
type storeResolver func(context.Context) (merged, error)

// fixedStore is a resolver of a store known already.
func fixedStore(s inbox.Store) storeResolver {
	return func(context.Context) (merged, error) { return merged{store: s}, nil }
}

// checkDependencies is checkStartup of the store s, known already.
func checkDependencies(ctx context.Context, ddb startupAPI, q queueAPI, s inbox.Store, queueURL, dlqURL string, policy worker.TerminalPolicy,
	timeout time.Duration, app string, log *slog.Logger) error {
	_, err := checkStartup(ctx, ddb, q, fixedStore(s), s.Table, queueURL, dlqURL, policy, timeout, app, log)
	return err
}

// checkStartup reads the store the table records (resolve) and
// checks, before the worker starts, that the table fits its layout and the
// queues exist, retrying what may heal (a container that starts before the
// network or LocalStack) until timeout (0: forever), and failing at once —
// naming the flag or variable to fix — on what will not. It returns the
// store read.
func checkStartup(ctx context.Context, ddb startupAPI, q queueAPI, resolve storeResolver, table, queueURL, dlqURL string, policy worker.TerminalPolicy,
	timeout time.Duration, app string, log *slog.Logger) (inbox.Store, error) {
	if queueURL == "" {
		return inbox.Store{}, &startupError{"--queue-url (DDBWORKER_QUEUE_URL) is required: the work queue (`" + app + " queues create` prints it)"}
	}
	if policy == worker.PolicyDLQ && dlqURL == "" {
		return inbox.Store{}, &startupError{"--dlq-url (DDBWORKER_DLQ_URL) is required with --terminal-policy dlq (DDBWORKER_TERMINAL_POLICY): the dead-letter queue (`" + app + " queues create` prints it), or choose quarantine or redrive"}
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	delay := 500 * time.Millisecond
	for {
		s, err := checkOnce(ctx, ddb, q, resolve, table, queueURL, dlqURL, policy, app)
		var se *startupError
		if err == nil || errors.As(err, &se) {
			return s, err
		}
		log.Warn("waiting for the table and queues to answer", "table", table, "queueUrl", queueURL, "error", err.Error())
		select {
		case <-ctx.Done():
			return s, fmt.Errorf("the table %q or the queues did not answer within --startup-timeout %s (DDBWORKER_STARTUP_TIMEOUT): %w", table, timeout, err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Second)
	}
}

func checkOnce(ctx context.Context, ddb startupAPI, q queueAPI, resolve storeResolver, table, queueURL, dlqURL string, policy worker.TerminalPolicy,
	app string) (inbox.Store, error) {
	m, err := resolve(ctx)
	s := m.store
	if err != nil {
		// A call that failed may heal (or is the table's absence, or a
		// permission: said as such below); anything else is a decision —
		// a flag that contradicts the record, an unusable record.
		var call *smithy.OperationError
		switch code := failure.APICode(err); {
		case !errors.As(err, &call):
			return s, &startupError{err.Error()}
		case code == "ResourceNotFoundException":
			return s, &startupError{fmt.Sprintf("table %q does not exist: create it with `%s tables create`, or set --table (DDBWORKER_TABLE)", table, app)}
		case permanentCode(code):
			return s, &startupError{fmt.Sprintf("table %q: %v (check the credentials and their IAM policy: dynamodb:DescribeTable, DescribeTimeToLive and GetItem at start; PutItem and UpdateItem at work, which a transaction needs for its items)", table, err)}
		}
		return s, err
	}
	return s, checkTableAndQueues(ctx, ddb, q, s, m.layoutRecorded, queueURL, dlqURL, policy, app)
}

// checkTableAndQueues checks the table against the store's layout (which
// the table records, or the flags name) and the queues.
func checkTableAndQueues(ctx context.Context, ddb startupAPI, q queueAPI, s inbox.Store, layoutRecorded bool, queueURL, dlqURL string,
	policy worker.TerminalPolicy, app string) error {
	if err := tables.Verify(ctx, ddb, s.Table, s.Layout); err != nil {
		var inc *tables.IncompatibleError
		switch code := failure.APICode(err); {
		case errors.As(err, &inc) && layoutRecorded:
			return &startupError{fmt.Sprintf("%v. The table records this inbox layout, so its indexes or TTL changed since it was recorded: restore them (`%s tables adopt --dry-run` shows what that takes), or point --table (DDBWORKER_TABLE) at the inbox's table", err, app)}
		case errors.As(err, &inc):
			// The table records no layout (one that does is read, and
			// wins over unset flags): the flags name it. A plan with the
			// default names could take an application's own index of that
			// name, so adopt is shown with the names it must be given.
			return &startupError{fmt.Sprintf("%v. The table records no inbox layout, so the flags name it: point --table (DDBWORKER_TABLE) at an inbox table, or name this table's attributes and indexes with --pk-attribute, --sk-attribute, --aggregate-index, --aggregate-pk-attribute, --aggregate-sk-attribute, --attention-index, --attention-pk-attribute, --attention-sk-attribute and --ttl-attribute (DDBWORKER_PK_ATTRIBUTE, …). `%s tables create` makes a table that fits; for an application's table, `%[2]s tables adopt --dry-run --aggregate-index NAME --attention-index NAME …` shows what adding indexes of ddbworker's own takes (name indexes and attributes the application does not use) and records the layout, so that no command needs these flags again", err, app)}
		case code == "ResourceNotFoundException":
			return &startupError{fmt.Sprintf("table %q does not exist: create it with `%s tables create`, or set --table (DDBWORKER_TABLE)", s.Table, app)}
		case permanentCode(code):
			return &startupError{fmt.Sprintf("table %q: %v (check the credentials and their IAM policy: dynamodb:DescribeTable, DescribeTimeToLive and GetItem at start; PutItem and UpdateItem at work, which a transaction needs for its items)", s.Table, err)}
		}
		return err
	}
	if err := checkQueue(ctx, q, queueURL, "--queue-url (DDBWORKER_QUEUE_URL)"); err != nil {
		return err
	}
	if policy == worker.PolicyDLQ {
		return checkQueue(ctx, q, dlqURL, "--dlq-url (DDBWORKER_DLQ_URL)")
	}
	return nil
}

// checkQueue checks that the queue answers. (A visibility timeout other
// than the worker's is the worker's warning, said once when it starts: here
// it would be said again on every retry of the startup checks.)
func checkQueue(ctx context.Context, q queueAPI, url, flag string) error {
	_, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameVisibilityTimeout}})
	if err != nil {
		switch code := failure.APICode(err); {
		case code == "QueueDoesNotExist" || code == "NonExistentQueue":
			return &startupError{fmt.Sprintf("%s %s: no such queue (`queues create` makes the queue and its DLQ and prints both URLs)", flag, url)}
		case permanentCode(code):
			return &startupError{fmt.Sprintf("%s %s: %s (%v)", flag, url, code, err)}
		}
		return err
	}
	return nil
}

// configFieldRE finds the worker's Config fields in its errors; configFlag
// maps them to the flags that set them, so an error names what a person
// can change.
var configFieldRE = regexp.MustCompile(`Config\.(Health\.)?([A-Za-z]+)`)

func configFlag(field string) string {
	switch field {
	case "Concurrency":
		return "--concurrency"
	case "BatchSize":
		return "--batch-size"
	case "WaitTime":
		return "--wait-time"
	case "VisibilityTimeout":
		return "--visibility-timeout"
	case "ClockSkew":
		return "--clock-skew"
	case "MessageTimeout":
		return "--message-timeout"
	case "MaxAttempts":
		return "--max-attempts"
	case "MaxTakeovers":
		return "--max-takeovers"
	case "TerminalPolicy":
		return "--terminal-policy"
	case "DLQURL":
		return "--dlq-url"
	case "QueueURL":
		return "--queue-url"
	case "DrainTimeout":
		return "--drain-timeout"
	case "CallTimeout":
		return "--call-timeout"
	case "MaxWCU":
		return "--max-wcu"
	case "MinFailures":
		return "--health-min-failures"
	case "Window":
		return "--health-window"
	case "ProbeMaxInterval":
		return "--probe-max-interval"
	case "ParkVisibility":
		return "--park-visibility"
	case "ParkMaxVisibility":
		return "--park-max-visibility"
	}
	return ""
}

// flagErrors rewrites worker.New's "worker: Config.X …" into "--x (DDBWORKER_X) …".
func flagErrors(err error) error {
	if err == nil {
		return nil
	}
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = configFieldRE.ReplaceAllStringFunc(l, func(m string) string {
			sub := configFieldRE.FindStringSubmatch(m)
			if f := configFlag(sub[2]); f != "" {
				return f + " (" + envName(strings.TrimPrefix(f, "--")) + ")"
			}
			return m
		})
		lines[i] = strings.TrimPrefix(lines[i], "worker: ")
	}
	return errors.New(strings.Join(lines, "\n"))
}
