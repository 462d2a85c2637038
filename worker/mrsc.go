package worker

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker"
)

// A global table configured for multi-Region strong consistency (MRSC)
// refuses transactions: "Global tables configured for multi-Region strong
// consistency (MRSC) do not support transaction operations, and will
// return an error if those operations are invoked on an MRSC replica"
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/V2globaltables_HowItWorks.html).
// DescribeTable says which tables are: TableDescription.MultiRegionConsistency
// is STRONG. The gated and fused commits are a TransactWriteItems, and so
// is the single-write route's fresh path unless the route skips its inbox
// check; what is left on such a table is the single-write route with
// SkipInboxCheck, whose redeliveries commit through the gate without a
// transaction (mutation.Committer.CommitApart).

// ErrTransactionsRefused is the sentinel of *TransactionsRefusedError.
var ErrTransactionsRefused = errors.New("worker: the table refuses transactions")

// TransactionsRefusedError: the table is an MRSC global table
// (Config.MultiRegionConsistency STRONG), which refuses TransactWriteItems,
// and Routes commit through one. Why holds, for each route, its commit
// mode.
type TransactionsRefusedError struct {
	Table  string
	Routes []string // message types, sorted
	Why    map[string]string
}

func (e *TransactionsRefusedError) Error() string {
	named := make([]string, len(e.Routes))
	for i, r := range e.Routes {
		named[i] = fmt.Sprintf("%s (%s)", r, e.Why[r])
	}
	return fmt.Sprintf("worker: table %s is a global table with multi-Region strong consistency (MRSC: DescribeTable's MultiRegionConsistency is STRONG), "+
		"which refuses transactions, and these routes commit with TransactWriteItems: %s. Register each with ddbworker.SingleWrite() and ddbworker.SkipInboxCheck() "+
		"(the single-write route: its handler returns one version-guarded write, committed as one conditional UpdateItem or PutItem), "+
		"or point the worker at a table that is not MRSC", e.Table, strings.Join(named, ", "))
}

// Unwrap returns ErrTransactionsRefused.
func (e *TransactionsRefusedError) Unwrap() error { return ErrTransactionsRefused }

// strongTable reports whether the worker's table is an MRSC global table.
func (c Config) strongTable() bool {
	return c.MultiRegionConsistency == ddbtypes.MultiRegionConsistencyStrong
}

// refuseTransactions checks the routes of reg against the table's
// consistency mode: nil unless the table is MRSC and a route's commit
// needs a transaction there.
func refuseTransactions(cfg Config, reg *ddbworker.Registry) error {
	switch cfg.MultiRegionConsistency {
	case "", ddbtypes.MultiRegionConsistencyEventual:
		return nil
	case ddbtypes.MultiRegionConsistencyStrong:
	default:
		return fmt.Errorf("worker: Config.MultiRegionConsistency %q is none of EVENTUAL, STRONG or empty (DescribeTable's TableDescription.MultiRegionConsistency)",
			cfg.MultiRegionConsistency)
	}
	if reg == nil {
		return nil
	}
	e := &TransactionsRefusedError{Table: cfg.Store.Table, Why: map[string]string{}}
	for _, t := range reg.Types() {
		rt, _ := reg.Lookup(t)
		switch {
		case rt.SingleWrite && rt.SkipInboxCheck:
			continue
		case rt.SingleWrite:
			e.Why[t] = "SingleWrite without SkipInboxCheck: its fresh path checks the inbox in a transaction"
		case rt.Fused:
			e.Why[t] = "Fused: the record is created in the handler's transaction"
		default:
			e.Why[t] = "the default gated commit: the writes and the record's flip in one transaction"
		}
		e.Routes = append(e.Routes, t)
	}
	if len(e.Routes) == 0 {
		return nil
	}
	slices.Sort(e.Routes)
	return e
}
