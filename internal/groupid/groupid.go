package groupid

import "fmt"

// MaxLen is the longest MessageGroupId SQS accepts, in characters.
const MaxLen = 128

// Problem returns why SQS would refuse s as a MessageGroupId, or "" when
// it accepts it.
func Problem(s string) string {
	if s == "" {
		return "empty"
	}
	if len(s) > MaxLen {
		return fmt.Sprintf("%d bytes, SQS takes at most %d characters", len(s), MaxLen)
	}
	for i, r := range s {
		if r < '!' || r > '~' {
			return fmt.Sprintf("%U at byte %d: SQS takes ASCII letters, digits and punctuation only", r, i)
		}
	}
	return ""
}
