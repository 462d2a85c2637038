package inbox

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// ErrIndex reports an index of the store's layout that the table lacks,
// or that is keyed on other attributes than the layout names: it is not
// the inbox's, and an answer read from it would be wrong (an application's
// index of the same name lists none of the inbox's records).
var ErrIndex = errors.New("inbox: the layout's index is missing or not the inbox's")

// The layout's indexes, as an IndexError names them.
const (
	RoleAggregate = "aggregate"
	RoleAttention = "attention"
)

// IndexError is an index of the store's layout that the table lacks
// (Keys empty) or keys on other attributes (Keys: the table's). It
// unwraps to ErrIndex, and to DynamoDB's error when DynamoDB reported it.
type IndexError struct {
	Table, Index string
	// Role is RoleAggregate or RoleAttention.
	Role string
	// Want are the key attributes the layout names for the index; Keys the
	// ones the table's index of that name has (none: it has no such index).
	Want, Keys []string
	// Fix says what to do; "" is the library's own advice (the Store's
	// Layout field). The daemon names its flags.
	Fix string
	// Err is DynamoDB's error, when a request found the problem.
	Err error
}

func (e *IndexError) Error() string {
	fix := e.Fix
	if fix == "" {
		fix = fmt.Sprintf("name the inbox's %s index in Store.Layout.%s, or record the layout in the table (the daemon's `tables create` or `tables adopt`)",
			e.Role, layoutIndexField(e.Role))
	}
	what := fmt.Sprintf("table %s has no index %s, the inbox's %s index (%s)", e.Table, e.Index, e.Role, strings.Join(e.Want, ", "))
	if len(e.Keys) > 0 {
		what = fmt.Sprintf("index %s of table %s is keyed on (%s), not on the inbox's %s index keys (%s): it is not the inbox's, and nothing is read from it",
			e.Index, e.Table, strings.Join(e.Keys, ", "), e.Role, strings.Join(e.Want, ", "))
	}
	return "inbox: " + what + ": " + fix
}

// Unwrap returns ErrIndex and DynamoDB's error, if any.
func (e *IndexError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrIndex, e.Err}
	}
	return []error{ErrIndex}
}

func layoutIndexField(role string) string {
	if role == RoleAggregate {
		return "AggregateIndex"
	}
	return "AttentionIndex"
}

// CheckIndexes checks the table's description against the store's layout:
// each of its two indexes must exist, keyed on the layout's attributes.
// It returns one *IndexError per index that is not (aggregate first);
// none: both fit.
func (s Store) CheckIndexes(t *types.TableDescription) []*IndexError {
	l := s.layout()
	have := map[string][]string{}
	if t != nil {
		for _, g := range t.GlobalSecondaryIndexes {
			var keys []string
			for _, k := range g.KeySchema {
				keys = append(keys, aws.ToString(k.AttributeName))
			}
			have[aws.ToString(g.IndexName)] = keys
		}
	}
	var out []*IndexError
	for _, ix := range []struct{ role, name, pk, sk string }{
		{RoleAggregate, l.AggregateIndex, l.AggregatePK, l.AggregateSK},
		{RoleAttention, l.AttentionIndex, l.AttentionPK, l.AttentionSK},
	} {
		want := []string{ix.pk, ix.sk}
		keys, ok := have[ix.name]
		switch {
		case !ok:
			out = append(out, &IndexError{Table: s.Table, Index: ix.name, Role: ix.role, Want: want})
		case len(keys) != 2 || keys[0] != ix.pk || keys[1] != ix.sk:
			out = append(out, &IndexError{Table: s.Table, Index: ix.name, Role: ix.role, Want: want, Keys: keys})
		}
	}
	return out
}

// indexQueryError maps DynamoDB's refusal of a query on index (of role,
// keyed on want by the layout) to an *IndexError: "The table does not have
// the specified index" (it is missing) or "Query condition missed key
// schema element" (it is keyed on other attributes). Any other error is
// returned as it is.
func (s Store) indexQueryError(err error, role, index string, want []string) error {
	var api smithy.APIError
	if !errors.As(err, &api) || !strings.HasSuffix(api.ErrorCode(), "ValidationException") {
		return err
	}
	msg := api.ErrorMessage()
	switch {
	case strings.Contains(msg, "does not have the specified index"):
		return &IndexError{Table: s.Table, Index: index, Role: role, Want: want, Err: err}
	case strings.Contains(msg, "key schema element"):
		return &IndexError{Table: s.Table, Index: index, Role: role, Want: want, Keys: []string{"other attributes"}, Err: err}
	}
	return err
}
