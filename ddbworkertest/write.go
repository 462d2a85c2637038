package ddbworkertest

import (
	"bytes"
	"encoding/hex"
	"maps"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/mutation"
)

// Write is one of the handler's writes as the commit would send it,
// rendered for reading and comparing.
type Write struct {
	// Index is the write's place in the handler's Result.Writes.
	Index int
	// Table is the table written.
	Table string
	// Kind is "Put", "Update", "Delete" or "Check" ("" when the write is
	// invalid: see Err).
	Kind string
	// Key is the item's key as plain Go values (see Plain). For a Put it
	// holds the attributes of the item that are the table's key when the
	// kit knows them: from an Existing item of that table, or from another
	// write's key; otherwise it is nil.
	Key map[string]any
	// Item is a Put's item, key included, as plain Go values.
	Item map[string]any
	// Update is an Update's expression with names and values resolved:
	// `SET stage = "review", stageVersion = 7 ADD noteCount 1`.
	Update string
	// Condition is the write's condition with names and values resolved:
	// `attribute_exists(PK) AND (attribute_not_exists(v) OR v < 7)`; ""
	// when the write is unguarded.
	Condition string
	// Eval is what the write's judge made of the item before the commit.
	Eval Eval
	// Before is the item at the write's key before the commit, as the test
	// declared it with Existing (plain Go values), or nil when there was
	// none.
	Before map[string]any
	// Err is an invalid write's failure: the terminal
	// INVALID_HANDLER_RESULT the commit raises.
	Err error
	// Mutation is the transaction item and the judge of its guards, as
	// the worker gets them from ddbworker.Write.Mutation.
	Mutation mutation.Write
}

// Eval is what the kit made of a write's condition on the item before the
// commit.
type Eval int

const (
	// NotEvaluated: the commit did not get that far (the handler failed,
	// or a write is invalid).
	NotEvaluated Eval = iota
	// Unconditional: the write has no condition.
	Unconditional
	// Holds: the write's judge finds no failing guard on the item. For a
	// builder's write that is exactly DynamoDB's evaluation of its
	// condition; for a Raw write, its judge's word.
	Holds
	// Fails: one of the write's guards fails on the item; the first one's
	// policy is the write's verdict.
	Fails
	// PolicyOnly: a Raw write with a condition and no judge. The kit cannot
	// evaluate the condition and takes it to hold; if DynamoDB failed it,
	// the commit would re-run the handler (the policy of a write without a
	// judge).
	PolicyOnly
)

func (e Eval) String() string {
	switch e {
	case NotEvaluated:
		return "not evaluated"
	case Unconditional:
		return "unconditional"
	case Holds:
		return "holds"
	case Fails:
		return "fails"
	case PolicyOnly:
		return "judged by its policy only: no judge, taken to hold"
	}
	return "Eval(" + strconv.Itoa(int(e)) + ")"
}

// String renders w on one line: `Update app {PK: "ORDER#o-1", SK: "ORDER"}
// SET status = "INVOICED" IF attribute_exists(PK)`.
func (w Write) String() string {
	if w.Err != nil {
		return "invalid: " + w.Err.Error()
	}
	var b strings.Builder
	b.WriteString(w.Kind + " " + w.Table + " ")
	switch it := w.Mutation.Item; {
	case it.Put != nil:
		b.WriteString(literal(&types.AttributeValueMemberM{Value: it.Put.Item}))
	case it.Update != nil:
		b.WriteString(literal(&types.AttributeValueMemberM{Value: it.Update.Key}))
	case it.Delete != nil:
		b.WriteString(literal(&types.AttributeValueMemberM{Value: it.Delete.Key}))
	case it.ConditionCheck != nil:
		b.WriteString(literal(&types.AttributeValueMemberM{Value: it.ConditionCheck.Key}))
	}
	if w.Update != "" {
		b.WriteString(" " + w.Update)
	}
	if w.Condition != "" {
		b.WriteString(" IF " + w.Condition)
	}
	return b.String()
}

// render fills w's rendered fields from its transaction item.
func render(w *Write, m mutation.Write) {
	w.Mutation = m
	var names map[string]string
	var values map[string]types.AttributeValue
	var condExpr *string
	switch it := m.Item; {
	case it.Put != nil:
		w.Kind, w.Table, w.Item = "Put", aws.ToString(it.Put.TableName), plainMap(it.Put.Item)
		names, values, condExpr = it.Put.ExpressionAttributeNames, it.Put.ExpressionAttributeValues, it.Put.ConditionExpression
	case it.Update != nil:
		w.Kind, w.Table, w.Key = "Update", aws.ToString(it.Update.TableName), plainMap(it.Update.Key)
		names, values, condExpr = it.Update.ExpressionAttributeNames, it.Update.ExpressionAttributeValues, it.Update.ConditionExpression
		w.Update = substitute(aws.ToString(it.Update.UpdateExpression), names, values)
	case it.Delete != nil:
		w.Kind, w.Table, w.Key = "Delete", aws.ToString(it.Delete.TableName), plainMap(it.Delete.Key)
		names, values, condExpr = it.Delete.ExpressionAttributeNames, it.Delete.ExpressionAttributeValues, it.Delete.ConditionExpression
	case it.ConditionCheck != nil:
		w.Kind, w.Table, w.Key = "Check", aws.ToString(it.ConditionCheck.TableName), plainMap(it.ConditionCheck.Key)
		names, values, condExpr = it.ConditionCheck.ExpressionAttributeNames, it.ConditionCheck.ExpressionAttributeValues, it.ConditionCheck.ConditionExpression
	}
	if expr := aws.ToString(condExpr); expr != "" {
		w.Condition = substitute(tidy(expr), names, values)
	}
}

var placeholder = regexp.MustCompile(`[#:][A-Za-z0-9_]+`)

// substitute resolves #names and :values in an expression's text and puts
// its clauses (SET, ADD, REMOVE, DELETE) on one line.
func substitute(expr string, names map[string]string, values map[string]types.AttributeValue) string {
	return placeholder.ReplaceAllStringFunc(strings.Join(strings.Fields(expr), " "), func(p string) string {
		if p[0] == '#' {
			if n, ok := names[p]; ok {
				return attrName(n)
			}
			return p
		}
		if v, ok := values[p]; ok {
			return literal(v)
		}
		return p
	})
}

// tidy rewrites a condition expression as the expression builder writes
// it — every operand of AND and OR in parentheses, a space before a
// function's arguments — with only the parentheses DynamoDB's precedence
// (NOT, then AND, then OR) needs:
//
//	(attribute_exists (#0)) AND ((attribute_not_exists (#1)) OR (#1 < :0))
//	attribute_exists(#0) AND (attribute_not_exists(#1) OR #1 < :0)
//
// It changes only parentheses and spaces, for reading; an expression whose
// parentheses do not balance is returned as it is.
func tidy(expr string) string {
	var toks []string
	for _, f := range strings.Fields(expr) {
		for f != "" {
			i := strings.IndexAny(f, "(),")
			switch {
			case i < 0:
				toks, f = append(toks, f), ""
			case i > 0:
				toks, f = append(toks, f[:i]), f[i:]
			default:
				toks, f = append(toks, f[:1]), f[1:]
			}
		}
	}
	seq, n, ok := parseGroup(toks)
	if !ok || n != len(toks) {
		return expr
	}
	return renderGroup(seq)
}

// A term of a condition: a word (a path, a placeholder, an operator, a
// function name, a comma) or a parenthesized group of terms.
type term struct {
	word  string
	group []term
	paren bool
}

// parseGroup reads terms up to an unmatched ")" or the end; n is where it
// stopped.
func parseGroup(toks []string) (seq []term, n int, ok bool) {
	for n < len(toks) {
		switch toks[n] {
		case ")":
			return seq, n, true
		case "(":
			sub, m, ok := parseGroup(toks[n+1:])
			if !ok || n+1+m >= len(toks) {
				return nil, 0, false
			}
			seq, n = append(seq, term{group: sub, paren: true}), n+1+m+1
		default:
			seq, n = append(seq, term{word: toks[n]}), n+1
		}
	}
	return seq, n, true
}

func renderGroup(seq []term) string {
	word := func(i int) string {
		if i < 0 || i >= len(seq) || seq[i].paren {
			return ""
		}
		return strings.ToUpper(seq[i].word)
	}
	var parts []string
	for i, t := range seq {
		if !t.paren {
			parts = append(parts, t.word)
			continue
		}
		inner := renderGroup(t.group)
		switch left, right, op := word(i-1), word(i+1), logicOf(t.group); {
		case isWord(left) && !slices.Contains([]string{"AND", "OR", "NOT", "IN", "BETWEEN"}, left):
			parts[len(parts)-1] += "(" + inner + ")" // a function's arguments
			continue
		case left == "IN", op == "AND" && left == "NOT", op == "OR" && (left == "NOT" || left == "AND" || right == "AND"):
			inner = "(" + inner + ")"
		}
		parts = append(parts, inner)
	}
	return strings.ReplaceAll(strings.Join(parts, " "), " ,", ",")
}

// logicOf is the loosest logical operator at the top of a group: OR, else
// AND (not BETWEEN's), else "".
func logicOf(seq []term) string {
	op, between := "", false
	for _, t := range seq {
		switch w := strings.ToUpper(t.word); {
		case t.paren:
		case w == "OR":
			return "OR"
		case w == "BETWEEN":
			between = true
		case w == "AND" && between:
			between = false
		case w == "AND":
			op = "AND"
		}
	}
	return op
}

func isWord(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c == '_' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return s != ""
}

// attrName writes an attribute name as it is, or quoted in backticks when
// it is not a plain word.
func attrName(n string) string {
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return "`" + n + "`"
		}
	}
	if n == "" {
		return "``"
	}
	return n
}

// sameKeyValue is DynamoDB's equality for key attributes (strings,
// numbers by value, binaries); false for any other type.
func sameKeyValue(a, b types.AttributeValue) bool {
	switch a := a.(type) {
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberN:
		b, ok := b.(*types.AttributeValueMemberN)
		if !ok {
			return false
		}
		x, okx := new(big.Rat).SetString(a.Value)
		y, oky := new(big.Rat).SetString(b.Value)
		return okx && oky && x.Cmp(y) == 0
	case *types.AttributeValueMemberB:
		b, ok := b.(*types.AttributeValueMemberB)
		return ok && bytes.Equal(a.Value, b.Value)
	}
	return false
}

// Plain converts an attribute value to a plain Go value, as the kit shows
// keys, items and values: S → string; N → int64 when it is a whole number
// in range, else float64; B → []byte; BOOL → bool; NULL → nil; L → []any;
// M → map[string]any; SS → []string; NS → []any of numbers; BS → [][]byte.
func Plain(v types.AttributeValue) any {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case *types.AttributeValueMemberN:
		return number(v.Value)
	case *types.AttributeValueMemberB:
		return v.Value
	case *types.AttributeValueMemberBOOL:
		return v.Value
	case *types.AttributeValueMemberNULL:
		return nil
	case *types.AttributeValueMemberL:
		out := make([]any, len(v.Value))
		for i, e := range v.Value {
			out[i] = Plain(e)
		}
		return out
	case *types.AttributeValueMemberM:
		return plainMap(v.Value)
	case *types.AttributeValueMemberSS:
		return slices.Clone(v.Value)
	case *types.AttributeValueMemberNS:
		out := make([]any, len(v.Value))
		for i, e := range v.Value {
			out[i] = number(e)
		}
		return out
	case *types.AttributeValueMemberBS:
		return slices.Clone(v.Value)
	}
	return nil
}

func number(s string) any {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n
	}
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

func plainMap(m map[string]types.AttributeValue) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = Plain(v)
	}
	return out
}

// literal renders an attribute value as a literal: "text", 12.5, true,
// NULL, 0x0a0b, [1, "a"], {k: 1}, <<"a", "b">> for sets.
func literal(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return strconv.Quote(v.Value)
	case *types.AttributeValueMemberN:
		return v.Value
	case *types.AttributeValueMemberB:
		return "0x" + hex.EncodeToString(v.Value)
	case *types.AttributeValueMemberBOOL:
		return strconv.FormatBool(v.Value)
	case *types.AttributeValueMemberNULL:
		return "NULL"
	case *types.AttributeValueMemberL:
		s := make([]string, len(v.Value))
		for i, e := range v.Value {
			s[i] = literal(e)
		}
		return "[" + strings.Join(s, ", ") + "]"
	case *types.AttributeValueMemberM:
		s := make([]string, 0, len(v.Value))
		for _, k := range slices.Sorted(maps.Keys(v.Value)) {
			s = append(s, attrName(k)+": "+literal(v.Value[k]))
		}
		return "{" + strings.Join(s, ", ") + "}"
	case *types.AttributeValueMemberSS:
		s := make([]string, len(v.Value))
		for i, e := range v.Value {
			s[i] = strconv.Quote(e)
		}
		return "<<" + strings.Join(s, ", ") + ">>"
	case *types.AttributeValueMemberNS:
		return "<<" + strings.Join(v.Value, ", ") + ">>"
	case *types.AttributeValueMemberBS:
		s := make([]string, len(v.Value))
		for i, e := range v.Value {
			s[i] = "0x" + hex.EncodeToString(e)
		}
		return "<<" + strings.Join(s, ", ") + ">>"
	}
	return "?"
}
