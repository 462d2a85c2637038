package ddbworkertest

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// This file reads a DynamoDB condition expression: it parses it, renders it
// with its names and values resolved, and evaluates it against an item as
// far as the kit can (see Eval). It is not DynamoDB's evaluator: it decides
// the forms the front door builds and answers "unknown" for the others.

// truth is a three-valued result: a condition the kit cannot decide is
// unknown, and AND/OR/NOT carry that through (false AND unknown is false).
type truth int8

const (
	unknown truth = iota
	no
	yes
)

func truthOf(b bool) truth {
	if b {
		return yes
	}
	return no
}

// A cond is a parsed condition: logic (AND, OR), not, compare, call (a
// function such as attribute_exists), between or in.
type cond interface{ isCond() }

// An operand is a path, a value reference (:v) or a function call (size).
type operand interface{ isOperand() }

type (
	logic struct {
		op   string // "AND", "OR"
		args []cond
	}
	not     struct{ x cond }
	compare struct {
		op   string // = <> < <= > >=
		l, r operand
	}
	call struct {
		name string
		args []operand
	}
	between struct{ x, lo, hi operand }
	in      struct {
		x    operand
		list []operand
	}
)

func (logic) isCond()   {}
func (not) isCond()     {}
func (compare) isCond() {}
func (call) isCond()    {}
func (between) isCond() {}
func (in) isCond()      {}

type (
	// path is a document path: attribute names (resolved) and list indexes.
	path  []pathElem
	value struct{ ref string } // ":v"
	fn    struct {             // an operand function: size(path)
		name string
		args []operand
	}
)

type pathElem struct {
	name  string
	index int // for a list index ("[3]"); name is "" then
}

func (path) isOperand()  {}
func (value) isOperand() {}
func (fn) isOperand()    {}

// Tokens.
type tokKind int

const (
	tEOF tokKind = iota
	tIdent
	tName   // #name
	tValue  // :value
	tNumber // a list index
	tPunct  // ( ) , . [ ]
	tCmp    // = <> < <= > >=
)

type token struct {
	kind tokKind
	text string
}

func tokenize(s string) ([]token, error) {
	var out []token
	isWord := func(c byte) bool {
		return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#' || c == ':':
			j := i + 1
			for j < len(s) && isWord(s[j]) {
				j++
			}
			if j == i+1 {
				return nil, fmt.Errorf("%q at %d names nothing", c, i)
			}
			k := tName
			if c == ':' {
				k = tValue
			}
			out = append(out, token{k, s[i:j]})
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			out = append(out, token{tNumber, s[i:j]})
			i = j
		case isWord(c):
			j := i
			for j < len(s) && isWord(s[j]) {
				j++
			}
			out = append(out, token{tIdent, s[i:j]})
			i = j
		case strings.IndexByte("(),.[]", c) >= 0:
			out = append(out, token{tPunct, s[i : i+1]})
			i++
		case c == '=':
			out = append(out, token{tCmp, "="})
			i++
		case c == '<' || c == '>':
			op := s[i : i+1]
			if i+1 < len(s) && (s[i+1] == '=' || c == '<' && s[i+1] == '>') {
				op = s[i : i+2]
			}
			out = append(out, token{tCmp, op})
			i += len(op)
		default:
			return nil, fmt.Errorf("unexpected %q at %d", c, i)
		}
	}
	return append(out, token{kind: tEOF}), nil
}

type parser struct {
	toks  []token
	pos   int
	names map[string]string
}

// parseCondition parses a condition expression, resolving #names.
func parseCondition(expr string, names map[string]string) (cond, error) {
	toks, err := tokenize(expr)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, names: names}
	c, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, fmt.Errorf("unexpected %q", t.text)
	}
	return c, nil
}

func (p *parser) peek() token { return p.toks[p.pos] }
func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.kind != tEOF {
		p.pos++
	}
	return t
}

func (p *parser) keyword(w string) bool {
	if t := p.peek(); t.kind == tIdent && strings.EqualFold(t.text, w) {
		p.pos++
		return true
	}
	return false
}

func (p *parser) punct(s string) bool {
	if t := p.peek(); t.kind == tPunct && t.text == s {
		p.pos++
		return true
	}
	return false
}

func (p *parser) expect(s string) error {
	if !p.punct(s) {
		return fmt.Errorf("want %q, got %q", s, p.peek().text)
	}
	return nil
}

func (p *parser) or() (cond, error)  { return p.logic("OR", p.and) }
func (p *parser) and() (cond, error) { return p.logic("AND", p.not) }

func (p *parser) logic(op string, sub func() (cond, error)) (cond, error) {
	c, err := sub()
	if err != nil {
		return nil, err
	}
	args := []cond{c}
	for p.keyword(op) {
		c, err := sub()
		if err != nil {
			return nil, err
		}
		args = append(args, c)
	}
	if len(args) == 1 {
		return args[0], nil
	}
	// (a AND b) AND c is a AND b AND c.
	var flat []cond
	for _, a := range args {
		if l, ok := a.(logic); ok && l.op == op {
			flat = append(flat, l.args...)
		} else {
			flat = append(flat, a)
		}
	}
	return logic{op: op, args: flat}, nil
}

func (p *parser) not() (cond, error) {
	if p.keyword("NOT") {
		c, err := p.not()
		if err != nil {
			return nil, err
		}
		return not{c}, nil
	}
	return p.primary()
}

var condFuncs = []string{"attribute_exists", "attribute_not_exists", "attribute_type", "begins_with", "contains"}

func (p *parser) primary() (cond, error) {
	if p.punct("(") {
		c, err := p.or()
		if err != nil {
			return nil, err
		}
		if err := p.expect(")"); err != nil {
			return nil, err
		}
		return c, nil
	}
	if t := p.peek(); t.kind == tIdent && slices.Contains(condFuncs, t.text) && p.toks[p.pos+1].text == "(" {
		p.pos++
		args, err := p.args()
		if err != nil {
			return nil, err
		}
		return call{name: t.text, args: args}, nil
	}
	x, err := p.operand()
	if err != nil {
		return nil, err
	}
	switch {
	case p.peek().kind == tCmp:
		op := p.next().text
		r, err := p.operand()
		if err != nil {
			return nil, err
		}
		return compare{op: op, l: x, r: r}, nil
	case p.keyword("BETWEEN"):
		lo, err := p.operand()
		if err != nil {
			return nil, err
		}
		if !p.keyword("AND") {
			return nil, errors.New("BETWEEN without AND")
		}
		hi, err := p.operand()
		if err != nil {
			return nil, err
		}
		return between{x: x, lo: lo, hi: hi}, nil
	case p.keyword("IN"):
		list, err := p.args()
		if err != nil {
			return nil, err
		}
		return in{x: x, list: list}, nil
	}
	return nil, fmt.Errorf("an operand without a comparison at %q", p.peek().text)
}

// args parses "( operand, … )".
func (p *parser) args() ([]operand, error) {
	if err := p.expect("("); err != nil {
		return nil, err
	}
	var out []operand
	for {
		o, err := p.operand()
		if err != nil {
			return nil, err
		}
		out = append(out, o)
		if p.punct(")") {
			return out, nil
		}
		if err := p.expect(","); err != nil {
			return nil, err
		}
	}
}

func (p *parser) operand() (operand, error) {
	t := p.peek()
	switch {
	case t.kind == tValue:
		p.pos++
		return value{t.text}, nil
	case t.kind == tIdent && p.toks[p.pos+1].text == "(":
		p.pos++
		args, err := p.args()
		if err != nil {
			return nil, err
		}
		return fn{name: t.text, args: args}, nil
	case t.kind == tIdent || t.kind == tName:
		return p.path()
	}
	return nil, fmt.Errorf("want an operand, got %q", t.text)
}

func (p *parser) path() (path, error) {
	var out path
	name := func() error {
		t := p.next()
		switch t.kind {
		case tIdent:
			out = append(out, pathElem{name: t.text})
		case tName:
			n, ok := p.names[t.text]
			if !ok {
				return fmt.Errorf("%s is not in ExpressionAttributeNames", t.text)
			}
			out = append(out, pathElem{name: n})
		default:
			return fmt.Errorf("want an attribute name, got %q", t.text)
		}
		return nil
	}
	if err := name(); err != nil {
		return nil, err
	}
	for {
		switch {
		case p.punct("."):
			if err := name(); err != nil {
				return nil, err
			}
		case p.punct("["):
			t := p.next()
			i, err := strconv.Atoi(t.text)
			if t.kind != tNumber || err != nil {
				return nil, fmt.Errorf("want a list index, got %q", t.text)
			}
			if err := p.expect("]"); err != nil {
				return nil, err
			}
			out = append(out, pathElem{index: i})
		default:
			return out, nil
		}
	}
}

// Evaluation.

// evaluate decides c on item (nil: the item does not exist) with the
// expression's values. It decides attribute_exists, attribute_not_exists,
// the comparisons = <> < <= > >= (ordering on numbers, strings and
// binaries), AND, OR, NOT and parentheses; anything else is unknown.
func evaluate(c cond, item map[string]types.AttributeValue, values map[string]types.AttributeValue) truth {
	if !valid(c, values) {
		return unknown
	}
	return eval(c, item, values)
}

// valid reports whether DynamoDB would accept c with values at all: an
// ordering (< <= > >=) takes only numbers, strings and binaries as values,
// and DynamoDB refuses the whole expression (ValidationException) when one
// does not — whatever the rest of it would decide.
func valid(c cond, values map[string]types.AttributeValue) bool {
	switch c := c.(type) {
	case logic:
		for _, a := range c.args {
			if !valid(a, values) {
				return false
			}
		}
	case not:
		return valid(c.x, values)
	case compare:
		if c.op == "=" || c.op == "<>" {
			return true
		}
		for _, o := range []operand{c.l, c.r} {
			if v, ok := o.(value); ok {
				switch values[v.ref].(type) {
				case *types.AttributeValueMemberN, *types.AttributeValueMemberS, *types.AttributeValueMemberB:
				default:
					return false
				}
			}
		}
	}
	return true
}

func eval(c cond, item map[string]types.AttributeValue, values map[string]types.AttributeValue) truth {
	switch c := c.(type) {
	case logic:
		out := yes
		if c.op == "OR" {
			out = no
		}
		for _, a := range c.args {
			switch eval(a, item, values) {
			case unknown:
				out = unknown
			case yes:
				if c.op == "OR" {
					return yes
				}
			case no:
				if c.op == "AND" {
					return no
				}
			}
		}
		return out
	case not:
		switch eval(c.x, item, values) {
		case yes:
			return no
		case no:
			return yes
		}
		return unknown
	case call:
		if len(c.args) != 1 {
			return unknown
		}
		p, ok := c.args[0].(path)
		if !ok {
			return unknown
		}
		switch c.name {
		case "attribute_exists":
			return truthOf(p.resolve(item) != nil)
		case "attribute_not_exists":
			return truthOf(p.resolve(item) == nil)
		}
		return unknown
	case compare:
		l, lok := resolve(c.l, item, values)
		r, rok := resolve(c.r, item, values)
		if !lok || !rok {
			return unknown
		}
		return compareValues(c.op, l, r)
	}
	return unknown
}

// resolve reads an operand: a path on the item (nil when absent) or a
// value; false when the kit cannot (a function, an unknown :value).
func resolve(o operand, item, values map[string]types.AttributeValue) (types.AttributeValue, bool) {
	switch o := o.(type) {
	case path:
		return o.resolve(item), true
	case value:
		v, ok := values[o.ref]
		return v, ok
	}
	return nil, false
}

func (p path) resolve(item map[string]types.AttributeValue) types.AttributeValue {
	var cur types.AttributeValue
	for i, e := range p {
		switch {
		case i == 0:
			cur = item[e.name]
		case e.name != "":
			m, ok := cur.(*types.AttributeValueMemberM)
			if !ok {
				return nil
			}
			cur = m.Value[e.name]
		default:
			l, ok := cur.(*types.AttributeValueMemberL)
			if !ok || e.index >= len(l.Value) {
				return nil
			}
			cur = l.Value[e.index]
		}
		if cur == nil {
			return nil
		}
	}
	return cur
}

// compareValues applies op to two values, either of them nil when absent.
// An absent attribute or values of different types make = false and <>
// true; an ordering (< <= > >=) holds only between two numbers, two
// strings (by UTF-8 bytes) or two binaries, and is unknown for other types.
func compareValues(op string, l, r types.AttributeValue) truth {
	switch op {
	case "=":
		return truthOf(l != nil && r != nil && equal(l, r))
	case "<>":
		return truthOf(l == nil || r == nil || !equal(l, r))
	}
	if l == nil || r == nil {
		return no
	}
	n, ok := order(l, r)
	if !ok {
		if fmt.Sprintf("%T", l) != fmt.Sprintf("%T", r) {
			return no
		}
		return unknown
	}
	switch op {
	case "<":
		return truthOf(n < 0)
	case "<=":
		return truthOf(n <= 0)
	case ">":
		return truthOf(n > 0)
	case ">=":
		return truthOf(n >= 0)
	}
	return unknown
}

// order compares two numbers, strings or binaries.
func order(a, b types.AttributeValue) (int, bool) {
	switch a := a.(type) {
	case *types.AttributeValueMemberN:
		b, ok := b.(*types.AttributeValueMemberN)
		if !ok {
			return 0, false
		}
		x, okx := new(big.Rat).SetString(a.Value)
		y, oky := new(big.Rat).SetString(b.Value)
		if !okx || !oky {
			return 0, false
		}
		return x.Cmp(y), true
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		if !ok {
			return 0, false
		}
		return strings.Compare(a.Value, b.Value), true
	case *types.AttributeValueMemberB:
		b, ok := b.(*types.AttributeValueMemberB)
		if !ok {
			return 0, false
		}
		return bytes.Compare(a.Value, b.Value), true
	}
	return 0, false
}

// equal is DynamoDB's equality: same type and value; numbers by value
// (1 = 1.0), sets regardless of order, lists in order, maps by member.
func equal(a, b types.AttributeValue) bool {
	switch a := a.(type) {
	case *types.AttributeValueMemberS, *types.AttributeValueMemberN, *types.AttributeValueMemberB:
		n, ok := order(a, b)
		return ok && n == 0
	case *types.AttributeValueMemberBOOL:
		b, ok := b.(*types.AttributeValueMemberBOOL)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberNULL:
		_, ok := b.(*types.AttributeValueMemberNULL)
		return ok
	case *types.AttributeValueMemberL:
		b, ok := b.(*types.AttributeValueMemberL)
		return ok && slices.EqualFunc(a.Value, b.Value, equal)
	case *types.AttributeValueMemberM:
		b, ok := b.(*types.AttributeValueMemberM)
		if !ok || len(a.Value) != len(b.Value) {
			return false
		}
		for k, v := range a.Value {
			w, ok := b.Value[k]
			if !ok || !equal(v, w) {
				return false
			}
		}
		return true
	case *types.AttributeValueMemberSS:
		b, ok := b.(*types.AttributeValueMemberSS)
		return ok && sameSet(a.Value, b.Value, func(x, y string) bool { return x == y })
	case *types.AttributeValueMemberNS:
		b, ok := b.(*types.AttributeValueMemberNS)
		return ok && sameSet(a.Value, b.Value, func(x, y string) bool {
			return equal(&types.AttributeValueMemberN{Value: x}, &types.AttributeValueMemberN{Value: y})
		})
	case *types.AttributeValueMemberBS:
		b, ok := b.(*types.AttributeValueMemberBS)
		return ok && sameSet(a.Value, b.Value, bytes.Equal)
	}
	return false
}

func sameSet[T any](a, b []T, eq func(x, y T) bool) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.ContainsFunc(b, func(y T) bool { return eq(x, y) }) {
			return false
		}
	}
	for _, y := range b {
		if !slices.ContainsFunc(a, func(x T) bool { return eq(x, y) }) {
			return false
		}
	}
	return true
}

// Rendering.

// renderCond writes c with names resolved and values as literals, with
// only the parentheses the precedence needs.
func renderCond(c cond, values map[string]types.AttributeValue) string {
	var b strings.Builder
	writeCond(&b, c, values, 0)
	return b.String()
}

// Precedence: OR 1, AND 2, NOT 3, the rest 4.
func precedence(c cond) int {
	switch c := c.(type) {
	case logic:
		if c.op == "OR" {
			return 1
		}
		return 2
	case not:
		return 3
	}
	return 4
}

func writeCond(b *strings.Builder, c cond, values map[string]types.AttributeValue, outer int) {
	if precedence(c) <= outer && precedence(c) < 3 {
		b.WriteByte('(')
		defer b.WriteByte(')')
	}
	switch c := c.(type) {
	case logic:
		for i, a := range c.args {
			if i > 0 {
				b.WriteString(" " + c.op + " ")
			}
			writeCond(b, a, values, precedence(c))
		}
	case not:
		b.WriteString("NOT ")
		writeCond(b, c.x, values, 3)
	case compare:
		b.WriteString(renderOperand(c.l, values) + " " + c.op + " " + renderOperand(c.r, values))
	case call:
		b.WriteString(c.name + "(" + renderOperands(c.args, values) + ")")
	case between:
		b.WriteString(renderOperand(c.x, values) + " BETWEEN " + renderOperand(c.lo, values) + " AND " + renderOperand(c.hi, values))
	case in:
		b.WriteString(renderOperand(c.x, values) + " IN (" + renderOperands(c.list, values) + ")")
	}
}

func renderOperands(os []operand, values map[string]types.AttributeValue) string {
	s := make([]string, len(os))
	for i, o := range os {
		s[i] = renderOperand(o, values)
	}
	return strings.Join(s, ", ")
}

func renderOperand(o operand, values map[string]types.AttributeValue) string {
	switch o := o.(type) {
	case path:
		var b strings.Builder
		for i, e := range o {
			switch {
			case e.name == "":
				fmt.Fprintf(&b, "[%d]", e.index)
			case i > 0:
				b.WriteString("." + attrName(e.name))
			default:
				b.WriteString(attrName(e.name))
			}
		}
		return b.String()
	case value:
		if v, ok := values[o.ref]; ok {
			return literal(v)
		}
		return o.ref
	case fn:
		return o.name + "(" + renderOperands(o.args, values) + ")"
	}
	return "?"
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
