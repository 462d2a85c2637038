package ddbworker

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// How the guards read the item as it was: DynamoDB's rules for the few
// conditions they build (attribute_exists, attribute_not_exists, = and <
// on a path), so that a guard's judgement and DynamoDB's evaluation of its
// condition never differ.

// attribute is the value at path in item, read as expression.Name reads a
// path ("a.b" is member b of map a; a trailing "[n]" indexes a list), or
// nil when it is absent (or item is nil: no item).
func attribute(item map[string]types.AttributeValue, path string) types.AttributeValue {
	var cur types.AttributeValue = &types.AttributeValueMemberM{Value: item}
	for _, word := range strings.Split(path, ".") {
		name, indexes := word, ""
		if strings.HasSuffix(word, "]") {
			if i := strings.IndexByte(word, '['); i >= 0 {
				name, indexes = word[:i], word[i:]
			}
		}
		m, ok := cur.(*types.AttributeValueMemberM)
		if !ok {
			return nil
		}
		cur = m.Value[name]
		for indexes != "" {
			end := strings.IndexByte(indexes, ']')
			if indexes[0] != '[' || end < 0 {
				return nil // not a path expression.Name builds
			}
			n, err := strconv.Atoi(indexes[1:end])
			l, ok := cur.(*types.AttributeValueMemberL)
			if err != nil || !ok || n >= len(l.Value) {
				return nil
			}
			cur, indexes = l.Value[n], indexes[end+1:]
		}
		if cur == nil {
			return nil
		}
	}
	return cur
}

// value is v as the condition carries it: marshalled by the same
// expression.Value the condition is built with.
func value(v any) (types.AttributeValue, error) {
	ex, err := expression.NewBuilder().WithCondition(expression.Name("v").Equal(expression.Value(v))).Build()
	if err != nil {
		return nil, fmt.Errorf("value %v: %w", v, err)
	}
	return ex.Values()[":0"], nil
}

// compareNumber compares a number attribute with n by value; false when
// av is absent or not a number (DynamoDB then finds = and < false).
func compareNumber(av types.AttributeValue, n int64) (int, bool) {
	x, ok := rat(av)
	if !ok {
		return 0, false
	}
	return x.Cmp(new(big.Rat).SetInt64(n)), true
}

// orderable is v as NewerThan compares it: a number, a string or a
// binary, marshalled as the condition carries it; an error for any other
// value (DynamoDB's < compares only those) and for a time.Time, whose
// marshalled form is not fixed width.
func orderable(v any) (types.AttributeValue, error) {
	if _, ok := v.(time.Time); ok {
		return nil, errors.New("NewerThan: a time.Time marshals with a varying number of fraction digits and does not compare as a string: pass Timestamp(t) or t.UnixMilli()")
	}
	av, err := value(v)
	if err != nil {
		return nil, fmt.Errorf("NewerThan: %w", err)
	}
	switch av.(type) {
	case *types.AttributeValueMemberN, *types.AttributeValueMemberS, *types.AttributeValueMemberB:
		return av, nil
	}
	return nil, fmt.Errorf("NewerThan: %T %v is not a number, a string or a binary, which DynamoDB's < compares", v, v)
}

// compareValue compares two attributes as DynamoDB's < does: numbers by
// value, strings and binaries byte by byte; false when either is absent
// or they are not of one such type (DynamoDB then finds < false).
func compareValue(a, b types.AttributeValue) (int, bool) {
	switch a := a.(type) {
	case *types.AttributeValueMemberN:
		x, okx := rat(a)
		y, oky := rat(b)
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

func rat(av types.AttributeValue) (*big.Rat, bool) {
	v, ok := av.(*types.AttributeValueMemberN)
	if !ok {
		return nil, false
	}
	return new(big.Rat).SetString(v.Value)
}

// sameValue is DynamoDB's equality: both present, the same type and the
// same value — numbers by value (1 = 1.0), strings and binaries by bytes,
// sets regardless of order, lists in order, maps member by member.
func sameValue(a, b types.AttributeValue) bool {
	switch a := a.(type) {
	case *types.AttributeValueMemberN:
		x, okx := rat(a)
		y, oky := rat(b)
		return okx && oky && x.Cmp(y) == 0
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberB:
		b, ok := b.(*types.AttributeValueMemberB)
		return ok && bytes.Equal(a.Value, b.Value)
	case *types.AttributeValueMemberBOOL:
		b, ok := b.(*types.AttributeValueMemberBOOL)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberNULL:
		_, ok := b.(*types.AttributeValueMemberNULL)
		return ok
	case *types.AttributeValueMemberL:
		b, ok := b.(*types.AttributeValueMemberL)
		return ok && slices.EqualFunc(a.Value, b.Value, sameValue)
	case *types.AttributeValueMemberM:
		b, ok := b.(*types.AttributeValueMemberM)
		if !ok || len(a.Value) != len(b.Value) {
			return false
		}
		for k, v := range a.Value {
			if !sameValue(v, b.Value[k]) {
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
			return sameValue(&types.AttributeValueMemberN{Value: x}, &types.AttributeValueMemberN{Value: y})
		})
	case *types.AttributeValueMemberBS:
		b, ok := b.(*types.AttributeValueMemberBS)
		return ok && sameSet(a.Value, b.Value, bytes.Equal)
	}
	return false
}

func sameSet[T any](a, b []T, eq func(x, y T) bool) bool {
	covers := func(xs, ys []T) bool {
		for _, y := range ys {
			if !slices.ContainsFunc(xs, func(x T) bool { return eq(x, y) }) {
				return false
			}
		}
		return true
	}
	return covers(a, b) && covers(b, a)
}
