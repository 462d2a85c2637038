package envelope

// Internal tests: they compare the canonical forms with encoding/json,
// which unexported functions make possible.

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// canonicalize is HashV1's form of p (see canonicalizeForm).
func canonicalize(p []byte) ([]byte, *canonError) { return canonicalizeForm(p, HashV1) }

// canonicalizeForm is p's canonical payload in hash version v.
func canonicalizeForm(p []byte, v HashVersion) ([]byte, *canonError) {
	c := &canon{}
	if ce := c.payload(p); ce != nil {
		return nil, ce
	}
	if v == HashV3 {
		return c.out, nil
	}
	out, ok := c.old.value(nil, c.rd.reset(p), v == HashV2)
	if !ok {
		return nil, &canonError{reason: "payload number exponent overflows int32"}
	}
	return out, nil
}

var canonSeeds = []string{
	`{"b":1,"a":[1,2.50,-0,1e999999999,{"y":null,"x":true}]}`,
	`"\u00e9\ud83d\ude00\u2028<&>\"\\\/\b\f\n\r\t\u0001"`,
	`[0.0001e-3, 120e-1, -1200.50, 0e99, 1E+2]`,
	`[1e20, 1e21, 12345678901234567890123, 1234567890123456789012.0, 10000000000000000000000, 0.000001, 1e-7]`,
	`{"\uffff":1,"\ud83d\ude00":2,"\u2028":[1.5e-7,-0.5]}`,
	`{"\u0062":1,"a":2}`,
	`{"a":1,"a":2}`,
	`"\ud800"`,
	"\"\xff\"",
	`[1e2147483648]`,
	`01`, `[1,]`, `{"a" 1}`, `"abc`, `tru`, `-`, `1.`, `1e`, ` `, ``,
	strings.Repeat("[", 129) + strings.Repeat("]", 129),
}

func FuzzCanonical(f *testing.F) {
	for _, s := range canonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		checkCanonical(t, p)
	})
}

func TestCanonicalSeeds(t *testing.T) {
	for _, s := range canonSeeds {
		checkCanonical(t, []byte(s))
	}
}

func checkCanonical(t *testing.T, p []byte) {
	t.Helper()
	for _, v := range []HashVersion{HashV1, HashV2, HashV3} {
		checkCanonicalForm(t, p, v)
	}
	// HashV2 is taken from HashV3's text where v2SameAsV3 says it is the
	// same: it must be, byte for byte.
	v3, ce := canonicalizeForm(p, HashV3)
	if ce != nil || !v2SameAsV3(v3) {
		return
	}
	if v2, _ := canonicalizeForm(p, HashV2); !bytes.Equal(v2, v3) {
		t.Fatalf("v2SameAsV3 holds for %q, but V2 is %q", v3, v2)
	}
}

// checkCanonicalForm checks one hash version's form.
func checkCanonicalForm(t *testing.T, p []byte, v HashVersion) {
	t.Helper()
	canonicalize := func(p []byte) ([]byte, *canonError) { return canonicalizeForm(p, v) }
	valid := json.Valid(p)
	if got := validJSON(p); got != valid {
		t.Fatalf("jsontext validity %v, json.Valid %v for %q", got, valid, p)
	}
	out, ce := canonicalize(p)
	if ce != nil {
		if !valid && ce.err == nil {
			t.Fatalf("invalid JSON %q rejected for a non-syntax reason: %s", p, ce.reason)
		}
		if valid && ce.err != nil {
			t.Fatalf("valid JSON %q rejected as malformed: %v", p, ce.err)
		}
		return
	}
	if !valid {
		t.Fatalf("canonicalized invalid JSON %q", p)
	}
	if !json.Valid(out) {
		t.Fatalf("canonical form %q of %q is not valid JSON", out, p)
	}
	again, ce := canonicalize(out)
	if ce != nil || !bytes.Equal(again, out) {
		t.Fatalf("canonical form not idempotent: %q -> %q (%v)", out, again, ce)
	}
	if bytes.ContainsAny(out, " \t\r\n") && !bytes.Contains(p, []byte(`"`)) {
		t.Fatalf("whitespace in canonical form %q", out)
	}
	// Same value as the input, by encoding/json's reading.
	var a, b any
	if err := unmarshalNumber(p, &a); err != nil {
		t.Fatalf("encoding/json cannot read %q: %v", p, err)
	}
	if err := unmarshalNumber(out, &b); err != nil {
		t.Fatalf("encoding/json cannot read %q: %v", out, err)
	}
	if !sameValue(a, b) {
		t.Fatalf("canonical form %q differs in value from %q", out, p)
	}
	// Strings are escaped exactly like encoding/json without HTML escaping
	// (HashV1, HashV2).
	if s, ok := a.(string); ok && v != HashV3 {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if want := bytes.TrimSuffix(buf.Bytes(), []byte("\n")); !bytes.Equal(out, want) {
			t.Fatalf("string %q canonicalized to %q, encoding/json gives %q", p, out, want)
		}
	}
}

func unmarshalNumber(b []byte, v *any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

func sameValue(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, v := range a {
			if w, ok := bm[k]; !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return false
		}
		for i := range a {
			if !sameValue(a[i], bs[i]) {
				return false
			}
		}
		return true
	case json.Number:
		bn, ok := b.(json.Number)
		return ok && sameNumber(string(a), string(bn))
	case string:
		bs, ok := b.(string)
		return ok && utf8.ValidString(a) && a == bs
	default:
		return a == b
	}
}

// sameNumber compares decimal literals exactly, by their significant
// digits and exponent (see significant): no float64, no big.Rat of a huge
// exponent.
func sameNumber(x, y string) bool {
	nx, okx := splitNumber([]byte(x))
	ny, oky := splitNumber([]byte(y))
	if !okx || !oky {
		return false
	}
	sx, zx, okx := significant([]byte(x), &nx)
	sy, zy, oky := significant([]byte(y), &ny)
	switch {
	case !okx || !oky:
		return x == y
	case zx || zy:
		return zx == zy
	}
	dx := sx.appendDigits(nil, 0, sx.last-sx.first+1)
	dy := sy.appendDigits(nil, 0, sy.last-sy.first+1)
	return nx.neg == ny.neg && sx.e == sy.e && bytes.Equal(dx, dy)
}

// FuzzCanonicalDistinct: two payloads share a HashV3 canonical form only
// when they are the same JSON value — members compared as sets, strings
// by their bytes, numbers (integers above 2^53 included) by their exact
// decimal value. Every seed pair but the last has equal forms.
func FuzzCanonicalDistinct(f *testing.F) {
	for _, s := range [][2]string{
		{`{"b":1,"a":[1.0,"x"]}`, `{ "a" : [1, "\u0078"], "b" : 1e0 }`},
		{`9007199254740993`, `9007199254740993.0`},
		{`[1e21, 0.000001, -0]`, `[1000000000000000000000, 1e-6, 0]`},
		{`{"\ud83d\ude00":1,"\uffff":2}`, `{"\uffff":2,"😀":1}`},
		{`"\u2028\/"`, "\"\u2028/\""},
		{`9007199254740993`, `9007199254740992`},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ca, ea := canonicalizeForm(a, HashV3)
		cb, eb := canonicalizeForm(b, HashV3)
		if ea != nil || eb != nil || !bytes.Equal(ca, cb) {
			return
		}
		var va, vb any
		if err := unmarshalNumber(a, &va); err != nil {
			t.Fatalf("encoding/json cannot read %q: %v", a, err)
		}
		if err := unmarshalNumber(b, &vb); err != nil {
			t.Fatalf("encoding/json cannot read %q: %v", b, err)
		}
		if !sameValue(va, vb) {
			t.Fatalf("%q and %q share the canonical form %q", a, b, ca)
		}
	})
}

func TestNumberCanonicalForms(t *testing.T) {
	for in, want := range map[string]string{
		"0": "0", "-0": "0", "0.000": "0", "0e-7": "0", "-0E+7": "0",
		"1": "1", "1.0": "1", "1e0": "1", "10e-1": "1", "1.00": "1", "0.1e1": "1",
		"100": "1e2", "1200": "12e2", "0.25": "25e-2", "-1.5": "-15e-1",
		"1e999999999": "1e999999999", "1e-2147483648": "1e-2147483648",
		"10e2147483646": "1e2147483647", "0.5e-2147483647": "5e-2147483648",
		"123.456e2": "123456e-1", "0.00100": "1e-3", "1e00000000000000000001": "1e1",
	} {
		n, ok := splitNumber([]byte(in))
		if !ok {
			t.Fatalf("splitNumber(%q)", in)
		}
		got, ok := appendNumber(nil, []byte(in), &n)
		if !ok || string(got) != want {
			t.Errorf("canonical(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"1e2147483648", "1e-2147483649", "10e2147483647", "0.1e-2147483648", "1e99999999999", "0e99999999999"} {
		n, _ := splitNumber([]byte(in))
		if _, ok := appendNumber(nil, []byte(in), &n); ok {
			t.Errorf("canonical(%q) should overflow", in)
		}
	}
}

func TestNumberCanonicalFormsV2(t *testing.T) {
	for in, want := range map[string]string{
		"0": "0", "-0": "0", "0.000": "0", "0e-7": "0", "-0E+7": "0",
		"1": "1", "1.0": "1", "1e0": "1", "10e-1": "1", "1.00": "1", "0.1e1": "1",
		"100": "100", "1200": "1200", "0.25": "0.25", "-1.5": "-1.5", "1234.0": "1234", "1.2340e3": "1234",
		"123.456e2": "12345.6", "0.00100": "0.001", "1e00000000000000000001": "10",
		"1e20": "100000000000000000000", "1e21": "1e21", "-1e21": "-1e21", "999999999999999999999": "999999999999999999999",
		"1e-6": "0.000001", "1e-7": "1e-7", "0.0000015": "0.0000015", "0.00000015": "15e-8",
		"1e999999999": "1e999999999", "1e-2147483648": "1e-2147483648",
		"10e2147483646": "1e2147483647", "0.5e-2147483647": "5e-2147483648",
		"-9223372036854775808": "-9223372036854775808", "18446744073709551615.000": "18446744073709551615",
	} {
		n, ok := splitNumber([]byte(in))
		if !ok {
			t.Fatalf("splitNumber(%q)", in)
		}
		got, ok := appendNumberV2(nil, []byte(in), &n)
		if !ok || string(got) != want {
			t.Errorf("canonical(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"1e2147483648", "1e-2147483649", "10e2147483647", "0.1e-2147483648"} {
		n, _ := splitNumber([]byte(in))
		if _, ok := appendNumberV2(nil, []byte(in), &n); ok {
			t.Errorf("canonical(%q) should overflow", in)
		}
	}
}

// Work that hashes the same decodes the same: every spelling of an
// integral value decodes into an int64 from the canonical form.
func TestCanonicalV2DecodesIntegers(t *testing.T) {
	for _, in := range []string{"1234", "1234.0", "1.2340e3", "12340e-1", "1234.000000", "0.1234e4"} {
		out, ce := canonicalizeForm([]byte(`{"n":`+in+`}`), HashV2)
		if ce != nil {
			t.Fatal(ce.reason)
		}
		var v struct{ N int64 }
		if err := json.Unmarshal(out, &v); err != nil || v.N != 1234 {
			t.Fatalf("%s: canonical %s decodes to %d, %v", in, out, v.N, err)
		}
	}
}

func TestHugeExponentDoesNotAllocate(t *testing.T) {
	p := []byte(`[1e999999999,-123.456e-999999999]`)
	c := &canon{}
	c.payload(p) // warm buffers
	allocs := testing.AllocsPerRun(100, func() {
		c.out = c.out[:0]
		if ce := c.payload(p); ce != nil {
			t.Fatal(ce.reason)
		}
	})
	if allocs != 0 && !raceEnabled {
		t.Fatalf("%v allocs per run", allocs)
	}
	for _, v2 := range []bool{false, true} {
		out, ok := c.old.value(nil, c.rd.reset(p), v2)
		require.True(t, ok)
		allocs := testing.AllocsPerRun(100, func() {
			out, _ = c.old.value(out[:0], c.rd.reset(p), v2)
		})
		require.Zero(t, allocs, "v2 %v", v2)
	}
}

func TestSyntaxDepthMatchesEncodingJSON(t *testing.T) {
	for _, n := range []int{9999, 10000, 10001} {
		p := []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
		if validJSON(p) != json.Valid(p) {
			t.Fatalf("depth %d: jsontext %v, json.Valid %v", n, validJSON(p), json.Valid(p))
		}
	}
}

func TestLargeObjectSorted(t *testing.T) {
	var in, want strings.Builder
	in.WriteString("{")
	want.WriteString("{")
	const n = 40
	for i := n - 1; i >= 0; i-- {
		if i != n-1 {
			in.WriteString(", ")
		}
		in.WriteString(`"k` + strconv.Itoa(100+i) + `" : ` + strconv.Itoa(i) + `.0`)
	}
	for i := 0; i < n; i++ {
		if i != 0 {
			want.WriteString(",")
		}
		want.WriteString(`"k` + strconv.Itoa(100+i) + `":` + strconv.Itoa(i))
	}
	in.WriteString("}")
	want.WriteString("}")
	// "0.0" canonicalizes to "0", "10.0" to "1e1", etc.; compare after
	// canonicalizing the expectation's numbers the same way.
	got, ce := canonicalize([]byte(in.String()))
	if ce != nil {
		t.Fatal(ce.reason)
	}
	exp, ce := canonicalize([]byte(want.String()))
	if ce != nil {
		t.Fatal(ce.reason)
	}
	if string(got) != string(exp) {
		t.Fatalf("got  %s\nwant %s", got, exp)
	}
	dup := strings.Replace(in.String(), `"k100"`, `"k139"`, 1)
	if _, ce := canonicalize([]byte(dup)); ce == nil || ce.reason != "payload object has a duplicate key" {
		t.Fatalf("duplicate in large object not detected: %v", ce)
	}
}

// The seeds of FuzzCanonicalDistinct exercise equal forms.
func TestCanonicalDistinctSeeds(t *testing.T) {
	for _, s := range [][2]string{
		{`{"b":1,"a":[1.0,"x"]}`, `{ "a" : [1, "\u0078"], "b" : 1e0 }`},
		{`9007199254740993`, `9007199254740993.0`},
		{`[1e21, 0.000001, -0]`, `[1000000000000000000000, 1e-6, 0]`},
		{`{"\ud83d\ude00":1,"\uffff":2}`, `{"\uffff":2,"😀":1}`},
	} {
		a, ea := canonicalizeForm([]byte(s[0]), HashV3)
		b, eb := canonicalizeForm([]byte(s[1]), HashV3)
		require.Nil(t, ea)
		require.Nil(t, eb)
		require.Equal(t, string(a), string(b))
	}
}
