package envelope

import (
	"strconv"
	"unicode/utf8"
)

// This file holds a small, allocation-free JSON scanner. It accepts exactly
// the grammar of RFC 8259 as encoding/json does (including its nesting limit
// of 10000), so that "valid JSON" means the same thing here and in
// json.Valid. It never panics on malformed input: every index is bounds
// checked and every failure is returned as a *syntaxError.

// maxSyntaxDepth matches encoding/json's maxNestingDepth.
const maxSyntaxDepth = 10000

// syntaxError describes where and why a body is not valid JSON. Its message
// never quotes more than one byte of the input.
type syntaxError struct {
	msg string
	off int
}

func (e *syntaxError) Error() string {
	return e.msg + " at offset " + strconv.Itoa(e.off)
}

func errEOF(off int) error { return &syntaxError{msg: "unexpected end of JSON input", off: off} }

func errChar(b []byte, off int, context string) error {
	if off >= len(b) {
		return errEOF(off)
	}
	return &syntaxError{msg: "invalid character " + quoteByte(b[off]) + " " + context, off: off}
}

func quoteByte(c byte) string {
	if c == '\'' {
		return `'\''`
	}
	if c == '"' {
		return `'"'`
	}
	if c >= 0x20 && c < 0x7f {
		return "'" + string(c) + "'"
	}
	return strconv.QuoteRuneToASCII(rune(c))
}

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipWS(b []byte, i int) int {
	for i < len(b) && isWS(b[i]) {
		i++
	}
	return i
}

// skipValue validates the JSON value starting at b[i] and returns the index
// just past it. depth is the number of arrays/objects already open.
func skipValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return i, errEOF(i)
	}
	switch c := b[i]; c {
	case '{':
		depth++
		if depth > maxSyntaxDepth {
			return i, &syntaxError{msg: "exceeded max depth", off: i}
		}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return i, errChar(b, i, "looking for beginning of object key string")
			}
			var err error
			if i, err = skipString(b, i); err != nil {
				return i, err
			}
			i = skipWS(b, i)
			if i >= len(b) || b[i] != ':' {
				return i, errChar(b, i, "after object key")
			}
			i = skipWS(b, i+1)
			if i, err = skipValue(b, i, depth); err != nil {
				return i, err
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return i, errEOF(i)
			}
			switch b[i] {
			case ',':
				i = skipWS(b, i+1)
			case '}':
				return i + 1, nil
			default:
				return i, errChar(b, i, "after object key:value pair")
			}
		}
	case '[':
		depth++
		if depth > maxSyntaxDepth {
			return i, &syntaxError{msg: "exceeded max depth", off: i}
		}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		for {
			var err error
			if i, err = skipValue(b, i, depth); err != nil {
				return i, err
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return i, errEOF(i)
			}
			switch b[i] {
			case ',':
				i = skipWS(b, i+1)
			case ']':
				return i + 1, nil
			default:
				return i, errChar(b, i, "after array element")
			}
		}
	case '"':
		return skipString(b, i)
	case 't':
		return skipLiteral(b, i, "true")
	case 'f':
		return skipLiteral(b, i, "false")
	case 'n':
		return skipLiteral(b, i, "null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			end, _, err := scanNumber(b, i)
			return end, err
		}
		return i, errChar(b, i, "looking for beginning of value")
	}
}

func skipLiteral(b []byte, i int, lit string) (int, error) {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(b) {
			return i + k, errEOF(i + k)
		}
		if b[i+k] != lit[k] {
			return i + k, errChar(b, i+k, "in literal "+lit)
		}
	}
	return i + len(lit), nil
}

// skipString validates the string starting at b[i] == '"' and returns the
// index just past its closing quote.
func skipString(b []byte, i int) (int, error) {
	i++
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			n, err := escapeLen(b, i)
			if err != nil {
				return i, err
			}
			i += n
		case c < 0x20:
			return i, errChar(b, i, "in string literal")
		default:
			i++
		}
	}
	return i, errEOF(i)
}

// escapeLen validates the escape sequence at b[i] == '\\' and returns its
// length in bytes.
func escapeLen(b []byte, i int) (int, error) {
	if i+1 >= len(b) {
		return 0, errEOF(i + 1)
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, nil
	case 'u':
		for k := i + 2; k < i+6; k++ {
			if k >= len(b) {
				return 0, errEOF(k)
			}
			if unhex(b[k]) < 0 {
				return 0, errChar(b, k, "in \\u hexadecimal character escape")
			}
		}
		return 6, nil
	default:
		return 0, errChar(b, i+1, "in string escape code")
	}
}

func unhex(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10)
	case c >= 'A' && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// hex4 decodes the four hex digits at b[i:i+4]; the caller has validated them.
func hex4(b []byte, i int) rune {
	return unhex(b[i])<<12 | unhex(b[i+1])<<8 | unhex(b[i+2])<<4 | unhex(b[i+3])
}

// unquote decodes the JSON string starting at b[i] == '"'. It returns the
// index just past the closing quote and the decoded bytes.
//
// When the string has no escapes, s aliases b and simple is true; ascii then
// reports whether every content byte is ASCII. Otherwise the decoded bytes
// are appended to *buf and s aliases that storage.
//
// Decoding is lossless: bytes that are not valid UTF-8 are kept as they are,
// and an unpaired \uD800-\uDFFF escape is written as its 3-byte (invalid
// UTF-8) generalized encoding, so callers detect both with utf8.Valid.
func unquote(b []byte, i int, buf *[]byte) (end int, s []byte, simple, ascii bool, err error) {
	start := i + 1
	ascii = true
	for j := start; j < len(b); j++ {
		c := b[j]
		switch {
		case c == '"':
			return j + 1, b[start:j], true, ascii, nil
		case c == '\\':
			return unquoteSlow(b, start, j, buf)
		case c < 0x20:
			return j, nil, false, false, errChar(b, j, "in string literal")
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return len(b), nil, false, false, errEOF(len(b))
}

func unquoteSlow(b []byte, start, j int, buf *[]byte) (int, []byte, bool, bool, error) {
	base := len(*buf)
	out := append(*buf, b[start:j]...)
	for j < len(b) {
		c := b[j]
		switch {
		case c == '"':
			*buf = out
			return j + 1, out[base:], false, false, nil
		case c < 0x20:
			return j, nil, false, false, errChar(b, j, "in string literal")
		case c != '\\':
			// Copy a run of ordinary bytes at once.
			k := j + 1
			for k < len(b) && b[k] != '"' && b[k] != '\\' && b[k] >= 0x20 {
				k++
			}
			out = append(out, b[j:k]...)
			j = k
			continue
		}
		n, err := escapeLen(b, j)
		if err != nil {
			return j, nil, false, false, err
		}
		switch e := b[j+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(b, j+2)
			if r >= 0xD800 && r < 0xDC00 && j+12 <= len(b) && b[j+6] == '\\' && b[j+7] == 'u' {
				if _, err := escapeLen(b, j+6); err == nil {
					if r2 := hex4(b, j+8); r2 >= 0xDC00 && r2 < 0xE000 {
						out = utf8.AppendRune(out, (r-0xD800)<<10|(r2-0xDC00)+0x10000)
						j += 12
						continue
					}
				}
			}
			if r >= 0xD800 && r < 0xE000 {
				// Unpaired surrogate: keep it detectable as invalid UTF-8.
				out = append(out, byte(0xE0|r>>12), byte(0x80|(r>>6)&0x3F), byte(0x80|r&0x3F))
			} else {
				out = utf8.AppendRune(out, r)
			}
		}
		j += n
	}
	return len(b), nil, false, false, errEOF(len(b))
}

// number is the decomposition of a JSON number literal into byte ranges of
// the input: [intS,intE) integer digits, [fracS,fracE) fraction digits
// (empty when absent), [expS,expE) exponent digits (empty when absent).
type number struct {
	neg          bool
	expNeg       bool
	intS, intE   int
	fracS, fracE int
	expS, expE   int
}

// isInteger reports whether the literal has neither fraction nor exponent.
func (n *number) isInteger() bool { return n.fracS == n.fracE && n.expS == n.expE }

// scanNumber validates the number starting at b[i] and returns the index
// just past it together with its decomposition.
func scanNumber(b []byte, i int) (int, number, error) {
	var n number
	if i < len(b) && b[i] == '-' {
		n.neg = true
		i++
	}
	n.intS = i
	switch {
	case i >= len(b):
		return i, n, errEOF(i)
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i++
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return i, n, errChar(b, i, "in numeric literal")
	}
	n.intE = i
	n.fracS, n.fracE = i, i
	if i < len(b) && b[i] == '.' {
		i++
		n.fracS = i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == n.fracS {
			return i, n, errChar(b, i, "after decimal point in numeric literal")
		}
		n.fracE = i
	}
	n.expS, n.expE = i, i
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			n.expNeg = b[i] == '-'
			i++
		}
		n.expS = i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == n.expS {
			return i, n, errChar(b, i, "in exponent of numeric literal")
		}
		n.expE = i
	}
	return i, n, nil
}
